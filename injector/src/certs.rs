//! The webhook's TLS without cert-manager: a private CA and a serving certificate for the
//! injector's Service, kept in one Secret that every replica serves from. `plan` decides
//! (pure), `issue` makes certificates, `store` talks to the API server (the Secret, and the
//! webhook's `caBundle`); `rollcall_api::tls::CertResolver` hands the current certificate to
//! rustls.
//!
//! Renewal: each is renewed once a third of its lifetime is left. A new CA is written to the
//! `caBundle` (with the previous one while it is valid) before any certificate it signed is
//! served, so the API server trusts every certificate a replica may present.

pub mod issue;
pub mod plan;
pub mod roster;
pub mod store;

pub use rollcall_api::tls::CertResolver;

/// The Secret's keys.
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const PREVIOUS_CA_CERT: &str = "ca-previous.crt";
/// Kept so the roster certificate can be issued from the CA every running sidecar trusts
/// until the previous CA is near its end (`roster::signer`).
pub const PREVIOUS_CA_KEY: &str = "ca-previous.key";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// What the Secret holds, as PEM text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Material {
    pub ca_cert: Option<String>,
    pub ca_key: Option<String>,
    pub previous_ca_cert: Option<String>,
    pub previous_ca_key: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

/// The names the serving certificate must cover: the Service's in-cluster DNS names.
pub fn dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_string(),
    ]
}
