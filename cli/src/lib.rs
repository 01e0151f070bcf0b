//! `kubectl-rollcall`, the `kubectl rollcall` plugin. `check` answers what `linkerd check`
//! answers for Linkerd: before an install, whether the cluster can take Rollcall; after it,
//! whether the CRD, the controller (readiness, leadership, RBAC) and the injector (webhook,
//! certificate, reachability) are sound; for one pool, what its status and its sidecars say.
//! Each check is a small function that returns a `report::Check`; the report is printed as
//! text or JSON, and any failed check makes the exit code non-zero.

#![forbid(unsafe_code)]

pub mod checks;
pub mod fetch;
pub mod permissions;
pub mod prom;
pub mod report;
pub mod x509;

/// Everything that stops the checks from running at all (a failed check is not an error).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no Kubernetes client configuration: {0}")]
    Config(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Fetch(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
