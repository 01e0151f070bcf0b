//! The certificate rustls serves, swapped in place when the Secret changes: handshakes in
//! progress keep the one they started with, new ones get the new one.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::{Error, Result};

/// The serving certificate in use, if any yet.
#[derive(Debug, Default)]
pub struct CertResolver {
    current: ArcSwapOption<CertifiedKey>,
    /// The PEM it was loaded from, so an unchanged Secret is not reloaded.
    loaded_from: ArcSwapOption<String>,
}

// === impl CertResolver ===

impl CertResolver {
    /// Serve `cert_pem` (the certificate, then any chain) with `key_pem` from now on.
    /// Returns whether anything changed.
    pub fn load(&self, cert_pem: &str, key_pem: &str) -> Result<bool> {
        let fingerprint = format!("{cert_pem}\n{key_pem}");
        if self.loaded_from.load().as_deref() == Some(&fingerprint) {
            return Ok(false);
        }
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Certificate(format!("the certificate is not PEM: {e}")))?;
        if chain.is_empty() {
            return Err(Error::Certificate("no certificate in tls.crt".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| Error::Certificate(format!("the key is not PEM: {e}")))?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key)?;
        let certified = CertifiedKey::new(chain, signer);
        certified.keys_match()?;
        self.current.store(Some(Arc::new(certified)));
        self.loaded_from.store(Some(Arc::new(fingerprint)));
        Ok(true)
    }

    /// Whether a certificate is loaded (the injector is ready then).
    pub fn is_loaded(&self) -> bool {
        self.current.load().is_some()
    }

    /// A TLS server configuration that serves whatever is loaded.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}
