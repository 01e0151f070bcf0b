//! The machine's vocabulary: settings, states, reasons, events and routes. Names here end up in
//! JSON, metrics and Kubernetes status, so they are spelled once, in PascalCase.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use rollcall_api::policy::{HealthCheckType, PoolPolicy};
use serde::Serialize;

use crate::outlier::{Limits, Trip};

/// The knobs of one pool's health machine, flattened from its [`PoolPolicy`].
#[derive(Clone, Debug, PartialEq)]
pub struct HealthSettings {
    /// Active probes run; ejected endpoints then need probe evidence to come back.
    pub probes_enabled: bool,
    /// Consecutive probe successes an ejected endpoint needs (with its time served).
    pub healthy_threshold: u32,
    /// Consecutive probe failures that eject.
    pub unhealthy_threshold: u32,
    /// The probe interval: a real request success this recent overrules failing probes.
    pub probe_interval: Duration,
    /// 0 disables.
    pub consecutive_gateway_errors: u32,
    /// 0 disables.
    pub consecutive_5xx: u32,
    /// Fraction (0.2 = 20%); 0 disables.
    pub error_rate_threshold: f64,
    pub error_rate_window: Duration,
    pub error_rate_min_requests: u32,
    pub base_ejection: Duration,
    pub max_ejection: Duration,
    /// 0–100; 0 never ejects.
    pub max_ejection_percent: u32,
    /// Consecutive successes on probation that make an endpoint healthy.
    pub probation_successes: u32,
    /// Fraction; below this eligible share the pool panics.
    pub panic_threshold: f64,
    /// 0 disables slow start.
    pub slow_start_window: Duration,
}

/// Where an endpoint stands: the protocol's type, so what the machine decides is what the
/// report says without a mapping.
pub use rollcall_api::roster::EndpointState as State;

/// Why an endpoint is in its state (or why an ejection was suppressed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Reason {
    New,
    /// A probe succeeded: Unknown → Healthy, or an ejected endpoint's probes have passed.
    ProbeSucceeded,
    /// With probes disabled, a request succeeded: Unknown → Healthy.
    RequestSucceeded,
    ProbeFailures,
    ConsecutiveGatewayErrors,
    Consecutive5xx,
    ErrorRate,
    ProbationFailed,
    ProbationPassed,
    /// With probes disabled, the ejection time alone has passed.
    EjectionExpired,
    Terminating,
    RemovedFromRoster,
    BackInRoster,
}

/// What changed, for logs, metrics, reports and Kubernetes Events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Transition {
        endpoint: SocketAddr,
        from: State,
        to: State,
        reason: Reason,
    },
    PanicEntered,
    PanicExited,
    /// The endpoint tripped `reason` but ejecting it would exceed `maxEjectionPercent`.
    EjectionSuppressed {
        endpoint: SocketAddr,
        reason: Reason,
    },
    /// Probes reached `unhealthyThreshold` but real requests to the endpoint kept succeeding
    /// within the probe interval: a broken health check is not a broken endpoint. Once per
    /// streak of failing probes.
    ProbesOverruled {
        endpoint: SocketAddr,
    },
}

/// How the balancer may use an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RouteClass {
    Normal,
    /// Offered only the pool's probation traffic share.
    Probation,
    /// Terminating but maybe still serving: use only when nothing else can.
    TerminatingFallback,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    pub addr: SocketAddr,
    pub class: RouteClass,
    /// Slow-start factor on the endpoint's weight, 0.1..=1.0.
    pub weight_factor: f64,
}

/// What the balancer may use now, sorted by address.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Routes {
    pub panic: bool,
    pub endpoints: Vec<Route>,
}

// === impl HealthSettings ===

impl HealthSettings {
    pub fn from_policy(p: &PoolPolicy) -> Self {
        let hc = &p.health_check;
        let od = &p.outlier_detection;
        Self {
            probes_enabled: hc.kind != HealthCheckType::None,
            healthy_threshold: hc.healthy_threshold,
            unhealthy_threshold: hc.unhealthy_threshold,
            probe_interval: hc.interval.get(),
            consecutive_gateway_errors: od.consecutive_gateway_errors,
            consecutive_5xx: od.consecutive_5xx,
            error_rate_threshold: od.error_rate.threshold.fraction(),
            error_rate_window: od.error_rate.window.get(),
            error_rate_min_requests: od.error_rate.min_requests,
            base_ejection: od.base_ejection_time.get(),
            max_ejection: od.max_ejection_time.get(),
            max_ejection_percent: od.max_ejection_percent,
            probation_successes: od.probation.successes,
            panic_threshold: p.panic_threshold.fraction(),
            slow_start_window: p.slow_start.window.get(),
        }
    }

    pub(super) fn limits(&self) -> Limits {
        Limits {
            consecutive_gateway_errors: self.consecutive_gateway_errors,
            consecutive_5xx: self.consecutive_5xx,
            error_rate_threshold: self.error_rate_threshold,
            error_rate_window: self.error_rate_window,
            error_rate_min_requests: self.error_rate_min_requests,
        }
    }

    /// Length of the `n`-th ejection: `base × n`, capped at `max`.
    pub fn ejection_time(&self, n: u32) -> Duration {
        self.base_ejection.saturating_mul(n).min(self.max_ejection)
    }

    /// How many of `total` non-draining endpoints may be out (ejected or on probation).
    pub fn max_out(&self, total: usize) -> usize {
        match self.max_ejection_percent.min(100) {
            0 => 0,
            pct => (total * pct as usize / 100).max(1),
        }
    }

    /// Thresholds below 1 would make "consecutive" meaningless; treat them as 1.
    pub(super) fn unhealthy_probes(&self) -> u32 {
        self.unhealthy_threshold.max(1)
    }

    /// How recent a real request success must be to overrule failing probes: the probe
    /// interval, at least a second (fast re-probing after a failure must not shrink it).
    pub(super) fn overrule_window(&self) -> Duration {
        self.probe_interval.max(Duration::from_secs(1))
    }

    pub(super) fn healthy_probes(&self) -> u32 {
        self.healthy_threshold.max(1)
    }

    pub(super) fn probation_needed(&self) -> u32 {
        self.probation_successes.max(1)
    }
}

impl Default for HealthSettings {
    fn default() -> Self {
        Self::from_policy(&PoolPolicy::default())
    }
}

// === impl Reason ===

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "New",
            Self::ProbeSucceeded => "ProbeSucceeded",
            Self::RequestSucceeded => "RequestSucceeded",
            Self::ProbeFailures => "ProbeFailures",
            Self::ConsecutiveGatewayErrors => "ConsecutiveGatewayErrors",
            Self::Consecutive5xx => "Consecutive5xx",
            Self::ErrorRate => "ErrorRate",
            Self::ProbationFailed => "ProbationFailed",
            Self::ProbationPassed => "ProbationPassed",
            Self::EjectionExpired => "EjectionExpired",
            Self::Terminating => "Terminating",
            Self::RemovedFromRoster => "RemovedFromRoster",
            Self::BackInRoster => "BackInRoster",
        }
    }
}

impl From<Trip> for Reason {
    fn from(t: Trip) -> Self {
        match t {
            Trip::ConsecutiveGatewayErrors => Self::ConsecutiveGatewayErrors,
            Trip::Consecutive5xx => Self::Consecutive5xx,
            Trip::ErrorRate => Self::ErrorRate,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
