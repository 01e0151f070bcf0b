//! The whole system on one machine, for the demo and the end-to-end tests: the local API server
//! (`rollcall-devcluster`), controller replicas and sidecars as real child processes, each
//! logging to its own file in a run directory and never outliving the handle that started it.

mod api;
mod controller;
pub mod identity;
mod process;
mod service;
mod sidecar;
mod stack;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

pub use api::{LocalApi, apply, client_for};
pub use controller::Controller;
pub use process::{Process, binary, binary_dir, wait_ready};
pub use service::{Replica, ServiceProxy};
pub use sidecar::{EndpointView, PoolView, Sidecar, parse_pool};
pub use stack::{
    CRD_YAML, NAMESPACE, NAMESPACE_YAML, POOL, POOL_YAML, SERVICE_YAML, Stack, StackOptions,
    pool_resource, slices_yaml,
};

/// Every document of a YAML stream, as JSON values.
pub fn parse_yaml(yaml: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(serde_saphyr::from_multiple(yaml)?)
}

/// A port nobody listens on right now (the child binds it a moment later).
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(probe.local_addr()?)
}
