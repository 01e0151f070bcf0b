//! rollcall-sidecar as a library: the binary in `main.rs` is a thin shell over `sidecar::start`,
//! so tests drive the same code as production.
#![forbid(unsafe_code)]

pub mod access_log;
pub mod admin;
pub mod balance;
pub mod config;
pub mod drain;
#[doc(hidden)]
pub mod fuzzing;
pub mod grpc_status;
pub mod h1;
pub mod health;
pub mod local_answer;
pub mod memory;
pub mod metrics;
pub mod outcome;
pub mod outlier;
pub mod poll_clock;
pub mod pool;
pub mod proxy;
pub mod retry;
pub mod roster;
pub mod runtime;
pub mod sidecar;
pub mod stamp;
pub mod upstream;
