//! The injector's Prometheus metrics, named in one place, labels from small fixed sets.

use prometheus::{Encoder, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

use crate::Result;

#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// `result` = injected | skipped | refused | invalid.
    pub admissions: IntCounterVec,
    /// When the certificate being served expires, Unix seconds.
    pub certificate_expiration: IntGauge,
    /// When the controller's roster certificate this injector keeps expires, Unix seconds.
    pub roster_certificate_expiration: IntGauge,
    /// `what` = certificate | authority | roster.
    pub renewals: IntCounterVec,
}

// === impl Metrics ===

impl Metrics {
    pub fn new() -> Result<Self> {
        let registry = Registry::new();
        let admissions = IntCounterVec::new(
            Opts::new(
                "rollcall_injector_admissions_total",
                "Pod admission reviews answered, by result (injected, skipped, refused, invalid)",
            ),
            &["result"],
        )?;
        let certificate_expiration = IntGauge::new(
            "rollcall_injector_certificate_expiration_timestamp_seconds",
            "When the serving certificate in use expires (Unix time)",
        )?;
        let roster_certificate_expiration = IntGauge::new(
            "rollcall_injector_roster_certificate_expiration_timestamp_seconds",
            "When the controller's roster certificate in its Secret expires (Unix time; 0: not kept by the injector)",
        )?;
        let renewals = IntCounterVec::new(
            Opts::new(
                "rollcall_injector_certificate_renewals_total",
                "Certificates this replica issued, by what (certificate, authority, roster)",
            ),
            &["what"],
        )?;
        registry.register(Box::new(admissions.clone()))?;
        registry.register(Box::new(certificate_expiration.clone()))?;
        registry.register(Box::new(roster_certificate_expiration.clone()))?;
        registry.register(Box::new(renewals.clone()))?;
        for result in ["injected", "skipped", "refused", "invalid"] {
            admissions.with_label_values(&[result]);
        }
        Ok(Self {
            registry,
            admissions,
            certificate_expiration,
            roster_certificate_expiration,
            renewals,
        })
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::warn!(%error, "cannot encode metrics");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}
