//! The sidecar's Prometheus metrics, named in one place. Labels are bounded: `pool` and
//! `endpoint` come from the configuration (an endpoint's series are removed when it leaves),
//! everything else is a small fixed set of words; request data never becomes a label.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Latency buckets in seconds, from sub-millisecond proxying to multi-second timeouts.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub struct Metrics {
    registry: Registry,
    /// Requests answered to the application, by final outcome.
    pub requests: IntCounterVec,
    /// Tries sent to endpoints, by outcome: a retried request counts once per try.
    pub attempts: IntCounterVec,
    pub request_duration: HistogramVec,
    /// 1 for the endpoint's current state, 0 for the others.
    pub endpoint_state: IntGaugeVec,
    pub ejections: IntCounterVec,
    /// Ejections that max-ejection-percent refused.
    pub ejections_suppressed: IntCounterVec,
    /// Probe-failure ejections not made because real requests kept succeeding.
    pub probe_overrules: IntCounterVec,
    pub probes: IntCounterVec,
    pub fleet_probes: IntCounterVec,
    pub fleet_verdicts: IntCounterVec,
    pub panic: IntGaugeVec,
    pub fleet_fallback: IntGaugeVec,
    pub retries: IntCounterVec,
    /// Idle connections closed because the pool's idle budget was full.
    pub idle_evictions: IntCounterVec,
    pub config_reloads: IntCounterVec,
    /// Roster messages from the controller, by what became of them.
    pub roster_updates: IntCounterVec,
    /// 1 while a roster stream to the controller is open.
    pub controller_connected: prometheus::IntGauge,
    /// Access log lines dropped, by reason (`full`, `write_error`).
    pub access_log_dropped: IntCounterVec,
    /// Request verdicts the pool's owner had no room for, by pool.
    pub verdicts_dropped: IntCounterVec,
    /// Client connections the fast HTTP/1 engine handed to hyper's server, by pool and reason.
    pub http1_handoffs: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
                let c = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let requests = counter(
            "rollcall_requests_total",
            "Requests answered to the application, by pool and outcome",
            &["pool", "outcome"],
        )?;
        let attempts = counter(
            "rollcall_attempts_total",
            "Tries sent to endpoints, by pool, endpoint and outcome",
            &["pool", "endpoint", "outcome"],
        )?;
        let ejections = counter(
            "rollcall_ejections_total",
            "Endpoint ejections, by pool, endpoint and reason",
            &["pool", "endpoint", "reason"],
        )?;
        let ejections_suppressed = counter(
            "rollcall_ejections_suppressed_total",
            "Ejections refused because the pool was at maxEjectionPercent",
            &["pool", "endpoint"],
        )?;
        let probe_overrules = counter(
            "rollcall_probe_overrules_total",
            "Probe-failure ejections not made because the endpoint's real requests kept succeeding, by pool",
            &["pool"],
        )?;
        let probes = counter(
            "rollcall_probes_total",
            "Active probe results, by pool, endpoint and result",
            &["pool", "endpoint", "result"],
        )?;
        let fleet_probes = counter(
            "rollcall_fleet_probes_total",
            "Active probes sent, by pool and why this sidecar probes the endpoint itself (fleet health): assigned, unchecked, fallback or everyone",
            &["pool", "role"],
        )?;
        let fleet_verdicts = counter(
            "rollcall_fleet_verdicts_total",
            "The fleet's verdicts fed to the health machine as probe evidence, by pool and verdict",
            &["pool", "verdict"],
        )?;
        let retries = counter(
            "rollcall_retries_total",
            "Tries beyond the first, by pool and reason",
            &["pool", "reason"],
        )?;
        let idle_evictions = counter(
            "rollcall_idle_connection_evictions_total",
            "Idle keep-alive connections closed because the pool held --max-idle-connections, by pool",
            &["pool"],
        )?;
        let config_reloads = counter(
            "rollcall_config_reloads_total",
            "Config file reloads, by result (applied, refused, error)",
            &["result"],
        )?;
        let roster_updates = counter(
            "rollcall_roster_updates_total",
            "Roster messages from the controller, by result (applied, unchanged, superseded, refused, gone, stale, unrequested, malformed)",
            &["result"],
        )?;
        let access_log_dropped = counter(
            "rollcall_access_log_dropped_total",
            "Access log lines dropped, by reason (full: the writer fell behind; write_error)",
            &["reason"],
        )?;
        let verdicts_dropped = counter(
            "rollcall_verdicts_dropped_total",
            "Request verdicts dropped because the pool's health owner had a full queue (it fell behind the request path)",
            &["pool"],
        )?;
        let http1_handoffs = counter(
            "rollcall_http1_handoffs_total",
            "Client connections the fast HTTP/1 engine (--http1-engine fast) handed to hyper's server, by pool and reason (http2, upgrade)",
            &["pool", "reason"],
        )?;
        let controller_connected = prometheus::IntGauge::new(
            "rollcall_controller_connected",
            "1 while a roster stream to the controller is open",
        )?;
        registry.register(Box::new(controller_connected.clone()))?;
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "rollcall_request_duration_seconds",
                "Time from request received to response headers sent, by pool",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["pool"],
        )?;
        registry.register(Box::new(request_duration.clone()))?;
        let endpoint_state = IntGaugeVec::new(
            Opts::new(
                "rollcall_endpoint_state",
                "1 for the state each endpoint is in; one series per endpoint, none before its first transition",
            ),
            &["pool", "endpoint", "state"],
        )?;
        registry.register(Box::new(endpoint_state.clone()))?;
        let panic = IntGaugeVec::new(
            Opts::new(
                "rollcall_pool_panic",
                "1 while the pool routes to every endpoint because too few are eligible",
            ),
            &["pool"],
        )?;
        registry.register(Box::new(panic.clone()))?;
        let fleet_fallback = IntGaugeVec::new(
            Opts::new(
                "rollcall_fleet_fallback",
                "1 while the pool probes every endpoint itself because the controller has been unreachable for two probe intervals (fleet health)",
            ),
            &["pool"],
        )?;
        registry.register(Box::new(fleet_fallback.clone()))?;
        Ok(Self {
            registry,
            requests,
            attempts,
            request_duration,
            endpoint_state,
            ejections,
            ejections_suppressed,
            probe_overrules,
            probes,
            fleet_probes,
            fleet_verdicts,
            http1_handoffs,
            panic,
            fleet_fallback,
            retries,
            idle_evictions,
            config_reloads,
            roster_updates,
            controller_connected,
            access_log_dropped,
            verdicts_dropped,
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

    /// Drop every series of an endpoint that left, so label sets stay bounded. The label
    /// values besides pool and endpoint are small fixed sets, so each combination is removed.
    pub fn forget_endpoint(&self, pool: &str, endpoint: &str) {
        for outcome in ATTEMPT_OUTCOMES {
            let _ = self
                .attempts
                .remove_label_values(&[pool, endpoint, outcome]);
        }
        for result in PROBE_RESULTS {
            let _ = self.probes.remove_label_values(&[pool, endpoint, result]);
        }
        for reason in EJECTION_REASONS {
            let _ = self
                .ejections
                .remove_label_values(&[pool, endpoint, reason]);
        }
        for state in STATES {
            let _ = self
                .endpoint_state
                .remove_label_values(&[pool, endpoint, state]);
        }
        let _ = self
            .ejections_suppressed
            .remove_label_values(&[pool, endpoint]);
    }

    /// Drop the pool-level series of a pool that was removed (its endpoints are forgotten one
    /// by one as they drain).
    pub fn forget_pool(&self, pool: &str) {
        for outcome in REQUEST_OUTCOMES {
            let _ = self.requests.remove_label_values(&[pool, outcome]);
        }
        for reason in RETRY_REASONS {
            let _ = self.retries.remove_label_values(&[pool, reason]);
        }
        let _ = self.probe_overrules.remove_label_values(&[pool]);
        let _ = self.idle_evictions.remove_label_values(&[pool]);
        let _ = self.panic.remove_label_values(&[pool]);
        let _ = self.request_duration.remove_label_values(&[pool]);
        let _ = self.verdicts_dropped.remove_label_values(&[pool]);
        let _ = self.fleet_fallback.remove_label_values(&[pool]);
        for role in crate::pool::fleet::ROLES {
            let _ = self.fleet_probes.remove_label_values(&[pool, role]);
        }
        for verdict in ["passing", "failing"] {
            let _ = self.fleet_verdicts.remove_label_values(&[pool, verdict]);
        }
    }
}

/// `outcome` of `rollcall_requests_total`.
pub const REQUEST_OUTCOMES: &[&str] = &[
    "success",
    "client_error",
    "server_error",
    "gateway_error",
    "no_endpoint",
    "timeout",
    "client_gone",
];
/// `outcome` of `rollcall_attempts_total`.
pub const ATTEMPT_OUTCOMES: &[&str] = &[
    "success",
    "client_error",
    "server_error",
    "gateway_error",
    "connect_failure",
    "timeout",
    "cancelled",
];
/// `result` of `rollcall_probes_total`.
pub const PROBE_RESULTS: &[&str] = &["success", "failure"];
/// `reason` of `rollcall_retries_total`.
pub const RETRY_REASONS: &[&str] = &[
    "connect_failure",
    "dead_pooled_connection",
    "reset",
    "timeout",
    "status",
];
/// `reason` of `rollcall_ejections_total`.
pub const EJECTION_REASONS: &[&str] = &[
    "ProbeFailures",
    "ConsecutiveGatewayErrors",
    "Consecutive5xx",
    "ErrorRate",
    "ProbationFailed",
];
/// `state` of `rollcall_endpoint_state`.
pub const STATES: &[&str] = &["Unknown", "Healthy", "Ejected", "Probation", "Draining"];
