//! Real HTTP backends that fail in real ways, for Rollcall's integration tests, the local demo
//! and the benchmarks.
//!
//! A [`TestBackend`] is a hyper server on `127.0.0.1` (HTTP/1.1 and h2c with prior knowledge)
//! whose [`Behavior`] can change at runtime: answer, fail a deterministic share of requests,
//! black-hole, break responses half way. It can be killed (listener closed and every open
//! connection aborted) and revived on the same port. Its counters wake waiting tests, so tests
//! wait for events instead of sleeping. [`client`] is a small retry-free HTTP client for tests.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

mod backend;
mod behavior;
pub mod client;
pub mod hostile;
mod service;
mod stats;
pub mod system;
pub mod traffic;

pub use backend::TestBackend;
pub use behavior::{Action, Behavior};
pub use service::{BACKEND_HEADER, Echo};
pub use stats::Stats;

/// Everything that can go wrong in the kit.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("building the request: {0}")]
    Request(#[from] http::Error),
}

/// The kit's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
