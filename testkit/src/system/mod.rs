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

/// A port nobody listens on right now (the child binds it a moment later), and never one this
/// process was given before: the kernel may hand the same free port to two probes in a row, and
/// a test that names two listeners would then name one twice. Picked below the kernel's
/// ephemeral range (`ip_local_port_range`), so the source port of some other connection made in
/// that moment (tests run side by side, and a fuzz run makes thousands a second) cannot take it
/// before the child binds it; the ephemeral range is the fallback.
pub fn free_port() -> anyhow::Result<SocketAddr> {
    static GIVEN: parking_lot::Mutex<std::collections::BTreeSet<u16>> =
        parking_lot::Mutex::new(std::collections::BTreeSet::new());
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_start);
    if high > low {
        for _ in 0..200 {
            let port: u16 = rand::random_range(low..high);
            if GIVEN.lock().contains(&port) {
                continue;
            }
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() && GIVEN.lock().insert(port) {
                return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
            }
        }
    }
    for _ in 0..100 {
        let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = probe.local_addr()?;
        if GIVEN.lock().insert(addr.port()) {
            return Ok(addr);
        }
    }
    anyhow::bail!("no port on 127.0.0.1 this process was not given already")
}
