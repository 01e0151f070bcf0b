//! What the injector adds, as the chart renders it (`sidecar.json` in the `rollcall-injector`
//! ConfigMap): the sidecar's image, the controller's address, resources and security context.
//! Read once at start (the chart rolls the injector when it changes); unknown fields are
//! refused, so a chart and an injector that disagree fail at start, not on the next pod.

use std::path::Path;

use k8s_openapi::api::core::v1::{ResourceRequirements, SecurityContext};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The sidecar every injected pod gets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SidecarSettings {
    pub image: String,
    #[serde(default = "default_pull_policy")]
    pub image_pull_policy: String,
    /// The roster service, e.g. `http://rollcall-controller.rollcall-system.svc:8300`.
    #[serde(rename = "controllerURL")]
    pub controller_url: String,
    /// Where the admin endpoint listens (the kubelet probes it on the pod's address).
    #[serde(default = "default_admin_address")]
    pub admin_address: String,
    #[serde(default = "default_admin_port")]
    pub admin_port: u16,
    #[serde(default = "default_log_level")]
    pub log_level: String,
    #[serde(default = "default_log_format")]
    pub log_format: String,
    #[serde(default)]
    pub resources: ResourceRequirements,
    #[serde(default)]
    pub security_context: SecurityContext,
    pub token: TokenSettings,
    /// TLS on the roster connection: the ConfigMap (in the pod's namespace) with the CA.
    #[serde(default, rename = "controllerCA")]
    pub controller_ca: Option<CaSource>,
    /// Let sidecars dial an `http://` controller (`--insecure-plaintext-controller`): the
    /// chart's `controller.tls.plaintext`.
    #[serde(default)]
    pub insecure_plaintext: bool,
    /// The HTTP/1 engine every injected sidecar runs (`fast` or `hyper`) unless its pod's
    /// `rollcall.dev/sidecar-http1-engine` annotation says otherwise; absent: the sidecar's
    /// own default. The chart's `sidecar.http1Engine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http1_engine: Option<String>,
    /// The CA bundle (PEM) put in each sidecar's environment when the injector keeps the
    /// roster certificate itself (the default); not part of the file, set per review.
    #[serde(skip)]
    pub controller_ca_pem: Option<String>,
}

/// The projected ServiceAccount token the sidecar presents to the controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenSettings {
    pub audience: String,
    pub expiration_seconds: i64,
}

/// A ConfigMap key holding a PEM CA bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaSource {
    pub config_map: String,
    pub key: String,
}

fn default_pull_policy() -> String {
    "IfNotPresent".into()
}
fn default_admin_address() -> String {
    "0.0.0.0".into()
}
fn default_admin_port() -> u16 {
    15000
}
fn default_log_level() -> String {
    "info".into()
}
fn default_log_format() -> String {
    "json".into()
}

// === impl SidecarSettings ===

impl SidecarSettings {
    /// Parse and check settings given as JSON.
    pub fn from_json(text: &str, origin: &str) -> Result<Self> {
        let invalid = |message: String| Error::InvalidConfig {
            path: origin.to_string(),
            message,
        };
        let settings: Self = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        settings.check().map_err(invalid)?;
        Ok(settings)
    }

    /// Read and check the settings file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadConfig {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// Whether these settings give sidecars a way to trust an `https://` controller, when the
    /// injector keeps the roster certificate (`managed`) or not.
    pub fn check_roster_tls(&self, managed: bool) -> std::result::Result<(), String> {
        let tls = self.controller_url.starts_with("https://");
        match (tls, managed, self.controller_ca.is_some()) {
            (true, _, _) if self.insecure_plaintext => Err(format!(
                "insecurePlaintext is set but controllerURL {:?} is https://",
                self.controller_url
            )),
            (false, false, _) if !self.insecure_plaintext => Err(format!(
                "controllerURL {:?} is plaintext and insecurePlaintext is not set: sidecars would refuse it; use https://, or set the chart's controller.tls.plaintext",
                self.controller_url
            )),
            (true, false, false) => Err(format!(
                "controllerURL {:?} is https:// but sidecars are given no CA: set controllerCA, or let the injector keep the roster certificate (--roster-secret)",
                self.controller_url
            )),
            (false, true, _) => Err(format!(
                "the injector keeps a roster certificate but controllerURL {:?} is not https://",
                self.controller_url
            )),
            (_, true, true) => Err(
                "controllerCA is set and the injector keeps the roster certificate too: choose one"
                    .into(),
            ),
            _ => Ok(()),
        }
    }

    fn check(&self) -> std::result::Result<(), String> {
        if self.image.trim().is_empty() {
            return Err("image is empty".into());
        }
        if !(self.controller_url.starts_with("http://")
            || self.controller_url.starts_with("https://"))
        {
            return Err(format!(
                "controllerURL must start with http:// or https://, got {:?}",
                self.controller_url
            ));
        }
        if self.admin_port == 0 {
            return Err("adminPort must be 1-65535".into());
        }
        if !["json", "text"].contains(&self.log_format.as_str()) {
            return Err(format!(
                "logFormat must be json or text, got {:?}",
                self.log_format
            ));
        }
        if let Some(engine) = &self.http1_engine {
            crate::annotation::parse_http1_engine(engine)
                .map_err(|_| format!("http1Engine must be fast or hyper, got {engine:?}"))?;
        }
        if !(600..=86_400).contains(&self.token.expiration_seconds) {
            return Err(format!(
                "token.expirationSeconds must be 600-86400 (the kubelet's bounds), got {}",
                self.token.expiration_seconds
            ));
        }
        if self.token.audience.is_empty() {
            return Err("token.audience is empty".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{"image": "sidecar:1", "controllerURL": "http://c:8300",
        "token": {"audience": "rollcall", "expirationSeconds": 3600}}"#;

    #[test]
    fn minimal_settings_take_defaults() {
        let s = SidecarSettings::from_json(MINIMAL, "test").unwrap();
        assert_eq!(s.admin_port, 15000);
        assert_eq!(s.image_pull_policy, "IfNotPresent");
        assert_eq!(s.controller_ca, None);
    }

    #[test]
    fn unknown_fields_and_bad_values_are_refused_with_the_field() {
        let unknown = MINIMAL.replacen('{', r#"{"imag": "x", "#, 1);
        let err = SidecarSettings::from_json(&unknown, "test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `imag`"), "{err}");
        let bad = MINIMAL.replace("http://c:8300", "c:8300");
        let err = SidecarSettings::from_json(&bad, "test")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("controllerURL must start with http://"),
            "{err}"
        );
    }

    #[test]
    fn the_http1_engine_default_is_fast_hyper_or_absent() {
        assert_eq!(
            SidecarSettings::from_json(MINIMAL, "test")
                .unwrap()
                .http1_engine,
            None
        );
        let fast = MINIMAL.replacen('{', r#"{"http1Engine": "fast", "#, 1);
        let s = SidecarSettings::from_json(&fast, "test").unwrap();
        assert_eq!(s.http1_engine.as_deref(), Some("fast"));
        let turbo = MINIMAL.replacen('{', r#"{"http1Engine": "turbo", "#, 1);
        let err = SidecarSettings::from_json(&turbo, "test")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(r#"http1Engine must be fast or hyper, got "turbo""#),
            "{err}"
        );
    }

    #[test]
    fn roster_tls_needs_exactly_one_way_for_sidecars_to_trust_the_controller() {
        let plain = SidecarSettings::from_json(MINIMAL, "test").unwrap();
        let tls =
            SidecarSettings::from_json(&MINIMAL.replace("http://", "https://"), "test").unwrap();
        let with_ca = SidecarSettings {
            controller_ca: Some(CaSource {
                config_map: "rollcall-ca".into(),
                key: "ca.crt".into(),
            }),
            ..tls.clone()
        };
        let err = plain.check_roster_tls(false).unwrap_err();
        assert!(err.contains("insecurePlaintext is not set"), "{err}");
        let insecure = SidecarSettings {
            insecure_plaintext: true,
            ..plain.clone()
        };
        assert!(
            insecure.check_roster_tls(false).is_ok(),
            "h2c asked for by name"
        );
        let err = SidecarSettings {
            insecure_plaintext: true,
            ..tls.clone()
        }
        .check_roster_tls(true)
        .unwrap_err();
        assert!(err.contains("is https://"), "{err}");
        assert!(tls.check_roster_tls(true).is_ok(), "the default: managed");
        assert!(
            with_ca.check_roster_tls(false).is_ok(),
            "a CA the chart names"
        );
        let err = tls.check_roster_tls(false).unwrap_err();
        assert!(err.contains("no CA"), "{err}");
        let err = plain.check_roster_tls(true).unwrap_err();
        assert!(err.contains("not https://"), "{err}");
        let err = with_ca.check_roster_tls(true).unwrap_err();
        assert!(err.contains("choose one"), "{err}");
    }
}
