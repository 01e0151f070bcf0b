//! rollcall-controller: turns `BackendPool`s and EndpointSlices into versioned rosters, streams
//! them to sidecars over gRPC, and writes what the sidecars report back into the pool's status.
//! Decision logic (roster computation, status aggregation, write coalescing) is pure; the
//! modules that talk to Kubernetes or the network are thin around it.

#![forbid(unsafe_code)]

pub mod api_client;
pub mod app;
pub mod crd;
#[cfg(test)]
mod fixtures;
pub mod fleet;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod leader;
pub mod leader_slice;
pub mod lease_runtime;
pub mod metrics;
pub mod reconcile;
pub mod roster;
pub mod run;
pub mod server;
pub mod status;

/// Maps and sets on the report path (every endpoint of every report is looked up by address):
/// foldhash instead of SipHash, which perf showed as a fifth of the controller's time ingesting
/// a fleet's first reports. Their keys are roster addresses the controller computed and slot
/// numbers it assigned (a report's addresses are checked against the roster first), so SipHash's
/// resistance to chosen keys buys nothing there.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Everything that can go wrong in the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[source] kube::Error),
    #[error("cannot render YAML: {0}")]
    Yaml(String),
    #[error("metrics error: {0}")]
    Metrics(#[source] prometheus::Error),
    #[error("leader election failed: {0}")]
    Lease(#[source] kube_lease_manager::LeaseManagerError),
    #[error("the EndpointSlice and Service caches stopped before they synced")]
    CachesNotReady,
    #[error("object has no {0}")]
    MissingObjectKey(&'static str),
    #[error("cannot listen on {0}: {1}")]
    Listen(std::net::SocketAddr, #[source] std::io::Error),
    #[error("the leader election thread: {0}")]
    LeaseRuntime(String),
    #[error("roster TLS: {0}")]
    Tls(#[source] server::tls::TlsError),
    #[error("the API server did not answer the status write within {0:?}")]
    StatusWriteTimeout(std::time::Duration),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wall-clock time in Unix milliseconds, for roster versions and report timestamps.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
