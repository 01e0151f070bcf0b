//! `rollcall-injector`: the mutating admission webhook that adds the Rollcall sidecar to pods
//! that ask for it (the `rollcall.dev/pools` annotation, in namespaces labelled for injection),
//! as Linkerd's and Istio's injectors do. What gets added is decided by pure code (`patch`,
//! with the sidecar's container in `sidecar`, its one definition); serving it over HTTPS
//! (`server`), and creating and renewing its certificate without cert-manager (`certs`), are
//! the thin I/O around it.

#![forbid(unsafe_code)]

pub mod admin;
pub mod annotation;
pub mod certs;
pub mod config;
pub mod metrics;
pub mod patch;
pub mod review;
pub mod server;
pub mod sidecar;

/// Everything that can go wrong outside the pure decision.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the sidecar settings {path}: {source}")]
    ReadConfig {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the sidecar settings {path} are invalid: {message}")]
    InvalidConfig { path: String, message: String },
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("certificate: {0}")]
    Certificate(String),
    #[error("certificate: {0}")]
    Cert(#[from] rollcall_api::tls::CertError),
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("cannot listen on {0}: {1}")]
    Listen(std::net::SocketAddr, #[source] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
