//! The certificates' I/O: read the Secret, renew what `plan` says is due (a new CA goes into
//! the webhook's `caBundle` before the Secret starts handing out certificates it signed),
//! write the Secret back with optimistic concurrency (replicas racing to renew: one wins, the
//! others read its result next round), and serve whatever the Secret holds.
//!
//! In `External` mode (cert-manager) the Secret and the bundle belong to someone else: the
//! injector only reads and serves. Key material is never logged.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::issue::{self, Issued};
use super::plan::{self, Plan};
use super::roster::{self, RosterCertificate, Trust};
use super::{
    CA_CERT, CA_KEY, CertResolver, Material, PREVIOUS_CA_CERT, PREVIOUS_CA_KEY, TLS_CERT, TLS_KEY,
};
use crate::metrics::Metrics;
use crate::{Error, Result};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "rollcall-injector";

/// Who owns the certificates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The injector creates and renews them.
    SelfManaged {
        ca_validity: Duration,
        cert_validity: Duration,
    },
    /// Someone else (cert-manager) fills the Secret and the bundle.
    External,
}

/// Everything the certificate loop needs.
pub struct CertStore {
    pub secrets: Api<Secret>,
    pub webhooks: Api<MutatingWebhookConfiguration>,
    pub secret: String,
    pub webhook: String,
    pub names: Vec<String>,
    pub mode: Mode,
    pub resolver: Arc<CertResolver>,
    pub metrics: Metrics,
    /// The controller's roster certificate, issued from this CA (self-managed mode only).
    pub roster: Option<RosterCertificate>,
    /// Where the CA bundle injected sidecars trust is published for the webhook.
    pub trust: Trust,
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

fn read(secret: &Secret) -> Material {
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|s| !s.trim().is_empty())
    };
    Material {
        ca_cert: get(CA_CERT),
        ca_key: get(CA_KEY),
        previous_ca_cert: get(PREVIOUS_CA_CERT),
        previous_ca_key: get(PREVIOUS_CA_KEY),
        cert: get(TLS_CERT),
        key: get(TLS_KEY),
    }
}

fn write(secret: &mut Secret, m: &Material) {
    let mut data = BTreeMap::new();
    for (key, value) in [
        (CA_CERT, &m.ca_cert),
        (CA_KEY, &m.ca_key),
        (PREVIOUS_CA_CERT, &m.previous_ca_cert),
        (PREVIOUS_CA_KEY, &m.previous_ca_key),
        (TLS_CERT, &m.cert),
        (TLS_KEY, &m.key),
    ] {
        if let Some(v) = value {
            data.insert(key.to_string(), ByteString(v.clone().into_bytes()));
        }
    }
    secret.data = Some(data);
    secret.string_data = None;
}

/// The previous CA with its validity, when the material keeps one that parses.
fn previous_ca(material: &Material) -> Option<(&str, plan::Validity)> {
    material
        .previous_ca_cert
        .as_deref()
        .and_then(|pem| issue::validity(pem).ok().map(|v| (pem, v)))
}

/// The CAs a client of this material must trust at `now` (current, then previous).
fn trusted_bundle(material: &Material, now: i64) -> Option<String> {
    let ca = material.ca_cert.as_deref()?;
    Some(plan::bundle(ca, previous_ca(material), now))
}

// === impl CertStore ===

impl CertStore {
    /// One round: read, renew if due, keep the bundle right, publish the sidecars' trust,
    /// serve, then keep the controller's roster certificate (its failure does not stop the
    /// webhook serving).
    pub async fn sync(&self, now: i64) -> Result<()> {
        let material = self.sync_webhook(now).await?;
        if let (Some(roster), Mode::SelfManaged { cert_validity, .. }) = (&self.roster, self.mode) {
            self.sync_roster(roster, &material, now, cert_validity)
                .await?;
        }
        Ok(())
    }

    async fn get_secret(&self, name: &str) -> Result<Secret> {
        self.secrets.get(name).await.map_err(|e| match e {
            kube::Error::Api(s) if s.code == 404 => Error::Certificate(format!(
                "Secret {name} not found in the injector's namespace (the chart creates it)"
            )),
            e => Error::Kube(e),
        })
    }

    /// The webhook's round; returns the material it serves from.
    async fn sync_webhook(&self, now: i64) -> Result<Material> {
        let mut secret = self.get_secret(&self.secret).await?;
        let stored = read(&secret);
        let material = match self.mode {
            Mode::External => stored,
            Mode::SelfManaged {
                ca_validity,
                cert_validity,
            } => {
                let plan = plan::plan(&issue::facts(&stored), &self.names, now);
                let renewed = self.renew(&stored, plan, now, ca_validity, cert_validity)?;
                match renewed {
                    None => {
                        self.ensure_bundle(&stored, now).await?;
                        stored
                    }
                    Some(material) => {
                        self.ensure_bundle(&material, now).await?;
                        write(&mut secret, &material);
                        let params = PostParams {
                            field_manager: Some(FIELD_MANAGER.into()),
                            ..Default::default()
                        };
                        self.secrets.replace(&self.secret, &params, &secret).await?;
                        tracing::info!(secret = %self.secret, ?plan, "renewed the webhook's certificate");
                        material
                    }
                }
            }
        };
        // Published before the webhook first serves, so no pod is injected without it.
        if self.roster.is_some()
            && let Some(bundle) = trusted_bundle(&material, now)
            && self.trust.load().as_deref() != Some(&bundle)
        {
            self.trust.store(Some(Arc::new(bundle)));
            tracing::info!("injected sidecars now trust the current CA bundle");
        }
        let (Some(cert), Some(key)) = (&material.cert, &material.key) else {
            return Err(Error::Certificate(format!(
                "Secret {} holds no tls.crt and tls.key yet",
                self.secret
            )));
        };
        if self.resolver.load(cert, key)? {
            let validity = issue::validity(cert)?;
            self.metrics.certificate_expiration.set(validity.not_after);
            tracing::info!(
                not_after = validity.not_after,
                "serving the certificate from the Secret"
            );
        }
        Ok(material)
    }

    /// Keep the roster Secret holding a certificate from the current CA and the bundle.
    async fn sync_roster(
        &self,
        roster: &RosterCertificate,
        material: &Material,
        now: i64,
        validity: Duration,
    ) -> Result<()> {
        let (Some(cert), Some(key), Some(bundle)) = (
            &material.ca_cert,
            &material.ca_key,
            trusted_bundle(material, now),
        ) else {
            return Err(Error::Certificate(
                "no CA to issue the roster certificate from".into(),
            ));
        };
        let current = Issued {
            cert: cert.clone(),
            key: key.clone(),
        };
        let previous = match (&material.previous_ca_cert, &material.previous_ca_key) {
            (Some(cert), Some(key)) => Some(Issued {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        };
        let authority = roster::signer(&current, previous.as_ref(), now, validity);
        let mut secret = self.get_secret(&roster.secret).await?;
        let stored = read(&secret);
        let Some(desired) =
            roster::desired(authority, &bundle, &stored, &roster.names, now, validity)?
        else {
            if let Some(cert) = &stored.cert {
                let validity = issue::validity(cert)?;
                self.metrics
                    .roster_certificate_expiration
                    .set(validity.not_after);
            }
            return Ok(());
        };
        write(&mut secret, &desired);
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        self.secrets
            .replace(&roster.secret, &params, &secret)
            .await?;
        if desired.cert != stored.cert {
            self.metrics.renewals.with_label_values(&["roster"]).inc();
        }
        if let Some(cert) = &desired.cert {
            let validity = issue::validity(cert)?;
            self.metrics
                .roster_certificate_expiration
                .set(validity.not_after);
            tracing::info!(secret = %roster.secret, not_after = validity.not_after,
                "wrote the controller's roster certificate");
        }
        Ok(())
    }

    /// The material after carrying out `plan`, or `None` when nothing changes.
    fn renew(
        &self,
        stored: &Material,
        plan: Plan,
        now: i64,
        ca_validity: Duration,
        cert_validity: Duration,
    ) -> Result<Option<Material>> {
        let (ca, previous) = match plan {
            Plan::Keep => return Ok(None),
            Plan::RenewCertificate => match (&stored.ca_cert, &stored.ca_key) {
                (Some(cert), Some(key)) => (
                    Issued {
                        cert: cert.clone(),
                        key: key.clone(),
                    },
                    (
                        stored.previous_ca_cert.clone(),
                        stored.previous_ca_key.clone(),
                    ),
                ),
                _ => return Err(Error::Certificate("no CA to renew from".into())),
            },
            Plan::NewAuthority => {
                self.metrics
                    .renewals
                    .with_label_values(&["authority"])
                    .inc();
                let old = stored
                    .ca_cert
                    .clone()
                    .filter(|pem| issue::validity(pem).is_ok_and(|v| v.valid_at(now)));
                let old_key = old.as_ref().and(stored.ca_key.clone());
                (issue::new_authority(now, ca_validity)?, (old, old_key))
            }
        };
        let ca_end = issue::validity(&ca.cert)?.not_after;
        let leaf = issue::serving_certificate(&ca, ca_end, &self.names, now, cert_validity)?;
        self.metrics
            .renewals
            .with_label_values(&["certificate"])
            .inc();
        Ok(Some(Material {
            ca_cert: Some(ca.cert),
            ca_key: Some(ca.key),
            previous_ca_cert: previous.0,
            previous_ca_key: previous.1,
            cert: Some(leaf.cert),
            key: Some(leaf.key),
        }))
    }

    /// Make every webhook of the configuration trust the material's CA (and the previous one
    /// while it is valid).
    async fn ensure_bundle(&self, material: &Material, now: i64) -> Result<()> {
        let Some(ca) = &material.ca_cert else {
            return Ok(());
        };
        let desired = plan::bundle(ca, previous_ca(material), now).into_bytes();
        let config = self.webhooks.get(&self.webhook).await?;
        let mut operations = Vec::new();
        for (index, hook) in config.webhooks.iter().flatten().enumerate() {
            if hook.client_config.ca_bundle.as_ref().map(|b| &b.0) != Some(&desired) {
                operations.push(json!({"op": "add",
                    "path": format!("/webhooks/{index}/clientConfig/caBundle"),
                    "value": ByteString(desired.clone())}));
            }
        }
        if operations.is_empty() {
            return Ok(());
        }
        // Only against the version read: a concurrent edit makes this fail and retry.
        operations.insert(
            0,
            json!({"op": "test", "path": "/metadata/resourceVersion",
                                    "value": config.metadata.resource_version}),
        );
        let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(operations))
            .map_err(|e| Error::Certificate(format!("building the caBundle patch: {e}")))?;
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        self.webhooks
            .patch(&self.webhook, &params, &Patch::Json::<()>(patch))
            .await?;
        tracing::info!(webhook = %self.webhook, "wrote the CA into the webhook's caBundle");
        Ok(())
    }

    /// Sync every `every` until `shutdown`; after a failure, again in `retry`.
    pub async fn run(self, every: Duration, retry: Duration, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let wait = match self.sync(now_unix()).await {
                Ok(()) => every,
                Err(error) => {
                    tracing::warn!(%error, "certificate sync failed; retrying");
                    retry
                }
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
