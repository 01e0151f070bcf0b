//! rollcall-sidecar as a library: the binary in `main.rs` is a thin shell over this crate, so
//! tests drive the same code as production.
#![forbid(unsafe_code)]

pub mod balance;
pub mod health;
pub mod outlier;
