//! How the sidecar dials the controller: the URL's scheme, the CA an `https://` controller's
//! certificate must chain to (a file, or PEM text the injector put in the pod spec), and the
//! rule that a plaintext roster channel is refused unless it stays on this host or the operator
//! asked for it by name. A plaintext channel leaks the pod's token to anyone on the path and
//! lets them answer as the controller, so routing itself would be theirs to steer.

use std::net::IpAddr;
use std::path::PathBuf;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use super::OptionsError;

/// Where the controller's CA comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerCa {
    /// A PEM file (a mounted ConfigMap or Secret).
    File(PathBuf),
    /// PEM text, as the injector hands it in `ROLLCALL_CONTROLLER_CA_PEM`.
    Pem(String),
}

/// How to reach the controller, as the options give it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Dial<'a> {
    pub controller: &'a str,
    pub ca: Option<&'a ControllerCa>,
    /// The name the certificate must carry, when the URL's host is not it.
    pub server_name: Option<&'a str>,
    pub insecure_plaintext: bool,
}

/// The endpoint for `dial.controller`, with TLS when it is `https://`.
pub(super) fn endpoint(dial: Dial<'_>) -> Result<Endpoint, OptionsError> {
    let Dial {
        controller,
        ca,
        server_name,
        insecure_plaintext,
    } = dial;
    let tls = controller.starts_with("https://");
    if !tls && !controller.starts_with("http://") {
        return Err(OptionsError::Scheme(controller.to_owned()));
    }
    let endpoint = Endpoint::from_shared(controller.to_owned()).map_err(|source| {
        OptionsError::Controller {
            url: controller.to_owned(),
            source,
        }
    })?;
    match (ca, tls) {
        (None, true) => Err(OptionsError::NoCa(controller.to_owned())),
        (Some(_), false) => Err(OptionsError::CaWithoutTls(controller.to_owned())),
        (None, false) if server_name.is_some() => {
            Err(OptionsError::CaWithoutTls(controller.to_owned()))
        }
        (None, false) => {
            let host = endpoint.uri().host().unwrap_or_default();
            if insecure_plaintext || is_loopback(host) {
                Ok(endpoint)
            } else {
                Err(OptionsError::Plaintext(controller.to_owned()))
            }
        }
        (Some(ca), true) => {
            let (pem, origin) = match ca {
                ControllerCa::File(path) => (
                    std::fs::read(path).map_err(|source| OptionsError::ReadCa {
                        path: path.clone(),
                        source,
                    })?,
                    path.display().to_string(),
                ),
                ControllerCa::Pem(text) => (
                    text.clone().into_bytes(),
                    "ROLLCALL_CONTROLLER_CA_PEM".to_owned(),
                ),
            };
            // tonic accepts any bytes here and fails only at the first handshake; a CA that
            // is not PEM is a configuration error and is named now.
            if !looks_like_pem_certificate(&pem) {
                return Err(OptionsError::CaNotPem(origin));
            }
            // Only this CA is trusted: the roster certificate is the cluster's own, not a
            // public one.
            let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
            if let Some(name) = server_name {
                config = config.domain_name(name);
            }
            endpoint
                .tls_config(config)
                .map_err(|source| OptionsError::Tls { origin, source })
        }
    }
}

/// Whether `host` (as a URI spells it: IPv6 in brackets) names this machine.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn looks_like_pem_certificate(pem: &[u8]) -> bool {
    std::str::from_utf8(pem).is_ok_and(|text| text.contains("-----BEGIN CERTIFICATE-----"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised_and_nothing_else() {
        for host in ["127.0.0.1", "127.3.4.5", "[::1]", "localhost", "LOCALHOST"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "10.0.0.1",
            "[::2]",
            "rollcall-controller.rollcall-system.svc",
            "localhost.evil.example",
            "0.0.0.0",
            "",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    fn plain(controller: &str, insecure_plaintext: bool) -> Result<Endpoint, OptionsError> {
        endpoint(Dial {
            controller,
            insecure_plaintext,
            ..Dial::default()
        })
    }

    fn tls<'a>(controller: &'a str, ca: &'a ControllerCa) -> Dial<'a> {
        Dial {
            controller,
            ca: Some(ca),
            ..Dial::default()
        }
    }

    #[test]
    fn plaintext_is_refused_off_this_host_unless_asked_for_by_name() {
        let remote = "http://rollcall-controller.rollcall-system.svc:8300";
        assert!(matches!(
            plain(remote, false),
            Err(OptionsError::Plaintext(_))
        ));
        assert!(plain(remote, true).is_ok());
        assert!(plain("http://127.0.0.1:8300", false).is_ok());
        assert!(plain("http://[::1]:8300", false).is_ok());
        let message = plain(remote, false).unwrap_err().to_string();
        assert!(
            message.contains("--insecure-plaintext-controller"),
            "{message}"
        );
    }

    #[test]
    fn a_ca_must_be_pem_and_goes_only_with_https() {
        let url = "https://rollcall-controller.rollcall-system.svc:8300";
        assert!(matches!(plain(url, false), Err(OptionsError::NoCa(_))));
        let garbage = ControllerCa::Pem("not a certificate".into());
        assert!(matches!(
            endpoint(tls(url, &garbage)),
            Err(OptionsError::CaNotPem(origin)) if origin == "ROLLCALL_CONTROLLER_CA_PEM"
        ));
        let missing = ControllerCa::File("/nonexistent/ca.crt".into());
        assert!(matches!(
            endpoint(tls(url, &missing)),
            Err(OptionsError::ReadCa { .. })
        ));
        let pem = ControllerCa::Pem(
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(),
        );
        assert!(matches!(
            endpoint(tls("http://127.0.0.1:1", &pem)),
            Err(OptionsError::CaWithoutTls(_))
        ));
        let named = Dial {
            controller: "http://127.0.0.1:1",
            server_name: Some("rollcall-controller.rollcall-system.svc"),
            ..Dial::default()
        };
        assert!(matches!(
            endpoint(named),
            Err(OptionsError::CaWithoutTls(_))
        ));
    }
}
