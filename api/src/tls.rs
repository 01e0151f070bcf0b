//! The serving certificate rustls presents, swapped in place when its source changes (the
//! injector's self-managed Secret, the controller's mounted `kubernetes.io/tls` Secret):
//! handshakes in progress keep the one they started with, new ones get the new one, and a pair
//! that does not load is refused while the last good one keeps serving.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate and key were not loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("the certificate is not PEM: {0}")]
    CertificateNotPem(String),
    #[error("no certificate in the certificate PEM")]
    NoCertificate,
    #[error("the key is not PEM: {0}")]
    KeyNotPem(String),
    #[error("the key does not fit the certificate, or its type is not supported: {0}")]
    Key(#[from] rustls::Error),
}

/// The serving certificate in use, if any yet.
#[derive(Debug, Default)]
pub struct CertResolver {
    current: ArcSwapOption<CertifiedKey>,
    /// The PEM it was loaded from, so an unchanged source is not reloaded.
    loaded_from: ArcSwapOption<String>,
}

// === impl CertResolver ===

impl CertResolver {
    /// Serve `cert_pem` (the certificate, then any chain) with `key_pem` from now on.
    /// Returns whether anything changed; on an error the previous pair stays in use.
    pub fn load(&self, cert_pem: &str, key_pem: &str) -> Result<bool, CertError> {
        let fingerprint = format!("{cert_pem}\n{key_pem}");
        if self.loaded_from.load().as_deref() == Some(&fingerprint) {
            return Ok(false);
        }
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CertError::CertificateNotPem(e.to_string()))?;
        if chain.is_empty() {
            return Err(CertError::NoCertificate);
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| CertError::KeyNotPem(e.to_string()))?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key)?;
        let certified = CertifiedKey::new(chain, signer);
        certified.keys_match()?;
        self.current.store(Some(Arc::new(certified)));
        self.loaded_from.store(Some(Arc::new(fingerprint)));
        Ok(true)
    }

    /// Whether a certificate is loaded.
    pub fn is_loaded(&self) -> bool {
        self.current.load().is_some()
    }

    /// A TLS server configuration that serves whatever is loaded, offering `alpn` protocols.
    pub fn server_config(
        self: &Arc<Self>,
        alpn: &[&[u8]],
    ) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn loads_a_pair_once_and_swaps_to_a_new_one() {
        let resolver = CertResolver::default();
        assert!(!resolver.is_loaded());
        let (cert, key) = pair("a.example");
        assert!(resolver.load(&cert, &key).unwrap());
        assert!(
            !resolver.load(&cert, &key).unwrap(),
            "unchanged is not reloaded"
        );
        let first = resolver.current.load_full().unwrap();
        let (cert2, key2) = pair("b.example");
        assert!(resolver.load(&cert2, &key2).unwrap());
        let second = resolver.current.load_full().unwrap();
        assert_ne!(first.cert, second.cert);
    }

    #[test]
    fn a_bad_pair_is_refused_and_the_last_good_one_keeps_serving() {
        let resolver = CertResolver::default();
        let (cert, key) = pair("a.example");
        resolver.load(&cert, &key).unwrap();
        let serving = resolver.current.load_full().unwrap();
        let (_, other_key) = pair("b.example");
        assert!(matches!(
            resolver.load(&cert, &other_key),
            Err(CertError::Key(_))
        ));
        assert!(matches!(
            resolver.load("not pem", &key),
            Err(CertError::NoCertificate | CertError::CertificateNotPem(_))
        ));
        assert!(matches!(
            resolver.load(&cert, "not pem"),
            Err(CertError::KeyNotPem(_))
        ));
        assert_eq!(resolver.current.load_full().unwrap().cert, serving.cert);
    }
}
