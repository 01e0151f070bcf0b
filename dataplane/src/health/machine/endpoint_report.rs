//! What the sidecar says about its endpoints: one serializable record per endpoint (the
//! `/endpoints` JSON, later the gRPC health report) and a per-state summary for status.
//! Times are seconds relative to `now`; the one `Instant` is skipped by serde and can be turned
//! into wall-clock time with [`wall_clock`].

use std::net::SocketAddr;
use std::time::SystemTime;

use rollcall_api::roster::ProbeVerdict;
use serde::Serialize;
use tokio::time::Instant;

use super::endpoint::Endpoint;
use super::{HealthSettings, Reason, State};

/// One endpoint as seen by this sidecar.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointReport {
    pub address: SocketAddr,
    pub state: State,
    pub reason: Reason,
    /// When the endpoint entered `state`; see [`EndpointReport::since_wall_clock`].
    #[serde(skip)]
    pub since: Instant,
    pub seconds_in_state: u64,
    /// Ejections that still lengthen the next one (`n`; decays while healthy).
    pub ejection_multiplier: u32,
    /// Ejections over the endpoint's lifetime in this sidecar.
    pub ejections_total: u64,
    /// Time left to serve, while ejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ejection_remaining_seconds: Option<u64>,
    pub consecutive_probe_failures: u32,
    pub consecutive_probe_successes: u32,
    pub consecutive_gateway_errors: u32,
    pub consecutive_5xx: u32,
    /// Consecutive successes so far on probation.
    pub probation_successes: u32,
    pub window_requests: u64,
    pub window_failures: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_since_last_error: Option<u64>,
    /// Tripped, but ejecting it would have exceeded `maxEjectionPercent`.
    pub ejection_suppressed: bool,
    pub probe_successes_total: u64,
    pub probe_failures_total: u64,
    pub weight_factor: f64,
    /// What this sidecar's own probes say of it (its vote as a fleet-health checker); absent
    /// when it does not probe it or they have not said yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_verdict: Option<ProbeVerdict>,
}

/// Endpoints per state, for the pool's status line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub total: usize,
    pub unknown: usize,
    pub healthy: usize,
    pub ejected: usize,
    pub probation: usize,
    pub draining: usize,
}

// === impl EndpointReport ===

impl EndpointReport {
    pub(super) fn new(
        address: SocketAddr,
        ep: &Endpoint,
        settings: &HealthSettings,
        now: Instant,
    ) -> Self {
        let secs = |at: Instant| now.saturating_duration_since(at).as_secs();
        let window = ep.detector.window_counts(settings.error_rate_window, now);
        Self {
            address,
            state: ep.state,
            reason: ep.reason,
            since: ep.since.instant(),
            seconds_in_state: secs(ep.since.instant()),
            ejection_multiplier: ep.multiplier,
            ejections_total: u64::from(ep.ejections_total),
            ejection_remaining_seconds: ep
                .ejected_until
                .filter(|_| ep.state == State::Ejected)
                .map(|until| until.instant().saturating_duration_since(now).as_secs()),
            consecutive_probe_failures: ep.probe_fail.get(),
            consecutive_probe_successes: ep.probe_ok,
            consecutive_gateway_errors: ep.detector.consecutive_gateway_errors(),
            consecutive_5xx: ep.detector.consecutive_5xx(),
            probation_successes: ep.probation_ok,
            window_requests: window.requests,
            window_failures: window.failures,
            last_error: ep.last_error.as_deref().map(|(d, _)| d.clone()),
            seconds_since_last_error: ep.last_error.as_deref().map(|(_, at)| secs(*at)),
            ejection_suppressed: ep.suppressed,
            probe_successes_total: u64::from(ep.probe_successes),
            probe_failures_total: u64::from(ep.probe_failures),
            weight_factor: ep.weight_factor(settings.slow_start_window, now),
            probe_verdict: ep.own_verdict,
        }
    }

    /// `since` as wall-clock time, given the same moment read from both clocks.
    pub fn since_wall_clock(&self, now: Instant, wall_now: SystemTime) -> SystemTime {
        wall_clock(self.since, now, wall_now)
    }
}

/// Convert a tokio `Instant` to wall-clock time, given `now` on both clocks.
pub fn wall_clock(at: Instant, now: Instant, wall_now: SystemTime) -> SystemTime {
    if at <= now {
        let ago = now.duration_since(at);
        wall_now.checked_sub(ago).unwrap_or(SystemTime::UNIX_EPOCH)
    } else {
        let ahead = at.duration_since(now);
        wall_now.checked_add(ahead).unwrap_or(wall_now)
    }
}

// === impl Summary ===

impl Summary {
    pub(super) fn count(&mut self, state: State) {
        self.total += 1;
        match state {
            State::Unknown => self.unknown += 1,
            State::Healthy => self.healthy += 1,
            State::Ejected => self.ejected += 1,
            State::Probation => self.probation += 1,
            State::Draining => self.draining += 1,
        }
    }
}
