//! Prometheus metrics, every name in one place and every label from a small fixed set (never
//! an object name). Exposed as text by the `/metrics` endpoint.

use prometheus::core::Collector;
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

use crate::{Error, Result};

#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// `result` = ok | error.
    pub reconciles: IntCounterVec,
    pub reconcile_seconds: Histogram,
    /// New roster versions published.
    pub roster_versions: IntCounter,
    /// Roster messages sent to sidecars.
    pub roster_pushes: IntCounter,
    /// Time from a Watch stream's start to its snapshot being handed to the transport.
    pub snapshot_seconds: Histogram,
    /// Time from a roster version's publication to its hand-over to one sidecar's stream.
    pub push_latency_seconds: Histogram,
    /// Open Watch streams.
    pub connected_sidecars: IntGauge,
    /// `result` = accepted | ignored | invalid.
    pub reports: IntCounterVec,
    /// `result` = ok | conflict | error | timeout.
    pub status_writes: IntCounterVec,
    /// Status writes that had to wait for a slot under the overall bound.
    pub status_writes_paced: IntCounter,
    /// Status passes run (a pool's reports aggregated); at most about one per pool per second.
    pub status_passes: IntCounter,
    /// Events not recorded because their pool spent its Event budget.
    pub events_dropped: IntCounter,
    /// Roster requests by how admission ended, `result` = accepted | no_token | refused |
    /// unavailable | throttled | too_many_connections (`server::gate`).
    pub authentications: IntCounterVec,
    /// TokenReviews sent, `result` = authenticated | refused | error | timeout.
    pub token_reviews: IntCounterVec,
    pub token_review_seconds: Histogram,
    /// SubjectAccessReviews sent, `result` = allowed | denied | error | timeout.
    pub access_reviews: IntCounterVec,
    pub access_review_seconds: Histogram,
    /// Answers served from the review caches, `cache` = token | access, `result` = hit | miss.
    pub review_cache: IntCounterVec,
    /// Connections closed as soon as they were accepted, `reason` = source_unauthenticated
    /// (its address holds its share of connections not yet authenticated) | unauthenticated
    /// (all addresses together hold every place) (`server::throttle`).
    pub connections_refused: IntCounterVec,
    /// Request messages refused before they were read, `reason` = too_large.
    pub messages_refused: IntCounterVec,
    /// Streams the controller ended for a reason of its own, `reason` = max_age |
    /// token_expired | access_withdrawn.
    pub streams_ended: IntCounterVec,
}

/// A counter family with the label names `labels`, registered with the `rollcall_controller_`
/// prefix.
fn counter_vec(name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec> {
    IntCounterVec::new(
        Opts::new(format!("rollcall_controller_{name}"), help),
        labels,
    )
    .map_err(Error::Metrics)
}

/// A latency histogram for calls to the API server (1 ms to 10 s).
fn api_call_seconds(name: &str, help: &str) -> Result<Histogram> {
    Histogram::with_opts(
        HistogramOpts::new(format!("rollcall_controller_{name}"), help)
            .buckets(vec![0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0]),
    )
    .map_err(Error::Metrics)
}

// === impl Metrics ===

impl Metrics {
    pub fn new() -> Result<Self> {
        let registry = Registry::new();
        let prefix = |n: &str| format!("rollcall_controller_{n}");
        let reconciles = IntCounterVec::new(
            Opts::new(prefix("reconciles_total"), "Reconciliations by result"),
            &["result"],
        )
        .map_err(Error::Metrics)?;
        let reconcile_seconds = Histogram::with_opts(HistogramOpts::new(
            prefix("reconcile_duration_seconds"),
            "Time spent in one reconciliation",
        ))
        .map_err(Error::Metrics)?;
        let roster_versions =
            IntCounter::new(prefix("roster_versions_total"), "Roster versions published")
                .map_err(Error::Metrics)?;
        let roster_pushes = IntCounter::new(
            prefix("roster_pushes_total"),
            "Roster messages sent to sidecars",
        )
        .map_err(Error::Metrics)?;
        let snapshot_seconds = Histogram::with_opts(
            HistogramOpts::new(
                prefix("roster_snapshot_duration_seconds"),
                "Time from a Watch request to its snapshot being sent",
            )
            .buckets(vec![0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0]),
        )
        .map_err(Error::Metrics)?;
        let push_latency_seconds = Histogram::with_opts(
            HistogramOpts::new(
                prefix("roster_push_latency_seconds"),
                "Time from a roster version's publication to its hand-over to a sidecar stream",
            )
            .buckets(vec![0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0]),
        )
        .map_err(Error::Metrics)?;
        let connected_sidecars = IntGauge::new(prefix("connected_sidecars"), "Open Watch streams")
            .map_err(Error::Metrics)?;
        let reports = IntCounterVec::new(
            Opts::new(
                prefix("reports_total"),
                "Health reports received, by result",
            ),
            &["result"],
        )
        .map_err(Error::Metrics)?;
        let status_writes = IntCounterVec::new(
            Opts::new(
                prefix("status_writes_total"),
                "BackendPool status writes, by result",
            ),
            &["result"],
        )
        .map_err(Error::Metrics)?;
        let status_writes_paced = IntCounter::new(
            prefix("status_writes_paced_total"),
            "BackendPool status writes held back by the bound on writes over all pools",
        )
        .map_err(Error::Metrics)?;
        let status_passes = IntCounter::new(
            prefix("status_passes_total"),
            "BackendPool status computations (every fresh report of a pool aggregated)",
        )
        .map_err(Error::Metrics)?;
        let events_dropped = IntCounter::new(
            prefix("events_dropped_total"),
            "Kubernetes Events not recorded because their pool spent its Event budget",
        )
        .map_err(Error::Metrics)?;
        let authentications = counter_vec(
            "authentications_total",
            "Roster requests by how their admission ended (before any of the body is read)",
            &["result"],
        )?;
        let token_reviews = counter_vec(
            "token_reviews_total",
            "TokenReviews sent to the API server, by result",
            &["result"],
        )?;
        let token_review_seconds =
            api_call_seconds("token_review_duration_seconds", "Time one TokenReview took")?;
        let access_reviews = counter_vec(
            "access_reviews_total",
            "SubjectAccessReviews sent to the API server, by result",
            &["result"],
        )?;
        let access_review_seconds = api_call_seconds(
            "access_review_duration_seconds",
            "Time one SubjectAccessReview took",
        )?;
        let review_cache = counter_vec(
            "review_cache_total",
            "Token and access answers looked up in the controller's caches, by result",
            &["cache", "result"],
        )?;
        let connections_refused = counter_vec(
            "connections_refused_total",
            "Roster connections closed as soon as they were accepted, by reason",
            &["reason"],
        )?;
        let messages_refused = counter_vec(
            "messages_refused_total",
            "Request messages refused before they were read, by reason",
            &["reason"],
        )?;
        let streams_ended = counter_vec(
            "streams_ended_total",
            "Roster streams the controller ended for a reason of its own, by reason",
            &["reason"],
        )?;
        let m = Self {
            registry,
            reconciles,
            reconcile_seconds,
            roster_versions,
            roster_pushes,
            snapshot_seconds,
            push_latency_seconds,
            connected_sidecars,
            reports,
            status_writes,
            status_writes_paced,
            status_passes,
            events_dropped,
            authentications,
            token_reviews,
            token_review_seconds,
            access_reviews,
            access_review_seconds,
            review_cache,
            connections_refused,
            messages_refused,
            streams_ended,
        };
        let collectors: [Box<dyn Collector>; 21] = [
            Box::new(m.reconciles.clone()),
            Box::new(m.reconcile_seconds.clone()),
            Box::new(m.roster_versions.clone()),
            Box::new(m.roster_pushes.clone()),
            Box::new(m.snapshot_seconds.clone()),
            Box::new(m.push_latency_seconds.clone()),
            Box::new(m.connected_sidecars.clone()),
            Box::new(m.reports.clone()),
            Box::new(m.status_writes.clone()),
            Box::new(m.status_writes_paced.clone()),
            Box::new(m.status_passes.clone()),
            Box::new(m.events_dropped.clone()),
            Box::new(m.authentications.clone()),
            Box::new(m.token_reviews.clone()),
            Box::new(m.token_review_seconds.clone()),
            Box::new(m.access_reviews.clone()),
            Box::new(m.access_review_seconds.clone()),
            Box::new(m.review_cache.clone()),
            Box::new(m.connections_refused.clone()),
            Box::new(m.messages_refused.clone()),
            Box::new(m.streams_ended.clone()),
        ];
        for c in collectors {
            m.registry.register(c).map_err(Error::Metrics)?;
        }
        Ok(m)
    }

    /// The text exposition format.
    pub fn render(&self) -> Result<String> {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .map_err(Error::Metrics)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_labels_bounded() {
        let m = Metrics::new().unwrap();
        m.reconciles.with_label_values(&["ok"]).inc();
        m.reports.with_label_values(&["accepted"]).inc();
        m.status_writes.with_label_values(&["ok"]).inc();
        let text = m.render().unwrap();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("rollcall_controller_"), "{line}");
        }
        assert!(text.contains("rollcall_controller_reconciles_total{result=\"ok\"} 1"));
    }
}
