//! One endpoint's passive detector: folds in request verdicts (`crate::outcome::Verdict`) and
//! says when one of the three passive rules (consecutive gateway errors, consecutive 5xx, error
//! rate) has tripped.
//!
//! Rules, as Envoy's outlier detection has them: a 4xx is the client's problem and is invisible
//! here (it neither counts nor breaks a streak, nor enters the error rate); a gateway error
//! (connect refused/reset/timeout, 502/503/504) counts as a 5xx too; a plain 5xx breaks a
//! gateway-error streak, because "consecutive" means nothing else happened in between.
//!
//! The error rate is judged against the endpoint's peers (`relative.rs`), so `record` also
//! counts each verdict in the pool's own window: the sum of every routed endpoint's requests,
//! this one's included.

use std::time::Duration;

use tokio::time::Instant;

use super::{Consecutive, ErrorRateWindow, RecentOutcomes, WindowCounts, relative};
use crate::outcome::Verdict;

/// Which passive rule tripped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trip {
    ConsecutiveGatewayErrors,
    Consecutive5xx,
    ErrorRate,
}

/// The passive rules' knobs. Zero disables a rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub consecutive_gateway_errors: u32,
    pub consecutive_5xx: u32,
    /// A fraction (0.2 for 20%); ejects when the window's failure share is strictly above it.
    pub error_rate_threshold: f64,
    pub error_rate_window: Duration,
    pub error_rate_min_requests: u32,
}

/// Streaks and window of one endpoint.
#[derive(Clone, Debug, Default)]
pub struct Detector {
    gateway: Consecutive,
    server: Consecutive,
    window: ErrorRateWindow,
    recent: RecentOutcomes,
}

// === impl Detector ===

impl Detector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Fold one verdict in; returns the first rule that has tripped, checked in the order
    /// gateway errors, 5xx, error rate. The streaks are not reset here: the caller decides what
    /// a trip means (an ejection, or a suppressed one) and calls [`Detector::reset`]. `pool` is
    /// the pool's window: every verdict counted here is counted there too.
    pub fn record(
        &mut self,
        verdict: Verdict,
        limits: &Limits,
        pool: &mut ErrorRateWindow,
        now: Instant,
    ) -> Option<Trip> {
        match verdict {
            Verdict::ClientError | Verdict::NotTheEndpoint => return None,
            Verdict::Success => {
                self.gateway.reset();
                self.server.reset();
            }
            Verdict::ServerError => {
                self.gateway.reset();
                self.server.failure();
            }
            Verdict::GatewayError => {
                self.gateway.failure();
                self.server.failure();
            }
        }
        let window = limits.error_rate_window;
        self.window.record(verdict.is_failure(), window, now);
        pool.record(verdict.is_failure(), window, now);
        self.recent.push(verdict.is_failure());
        if self.gateway.reached(limits.consecutive_gateway_errors) {
            Some(Trip::ConsecutiveGatewayErrors)
        } else if self.server.reached(limits.consecutive_5xx) {
            Some(Trip::Consecutive5xx)
        } else if verdict.is_failure() && self.rate_trips(limits, pool, now) {
            Some(Trip::ErrorRate)
        } else {
            None
        }
    }

    /// The error-rate rule; only a failure can make it trip, so successes never pay for it.
    fn rate_trips(&self, limits: &Limits, pool: &ErrorRateWindow, now: Instant) -> bool {
        let window = limits.error_rate_window;
        let own = self.window.counts(window, now);
        if own.requests
            < u64::from(relative::relative_min_requests(
                limits.error_rate_min_requests,
            ))
        {
            return false;
        }
        let all = pool.counts(window, now);
        let peers = WindowCounts {
            requests: all.requests.saturating_sub(own.requests),
            failures: all.failures.saturating_sub(own.failures),
        };
        let recent = self
            .recent
            .counts(relative::recent_len(limits.error_rate_min_requests));
        relative::trips(own, recent, peers, limits)
    }

    /// Forget streaks and window: after an ejection (or a suppressed one) the endpoint has to
    /// trip again from scratch.
    pub fn reset(&mut self) {
        self.gateway.reset();
        self.server.reset();
        self.window.clear();
        self.recent.clear();
    }

    /// Release buckets that left the window.
    pub fn expire(&mut self, window: Duration, now: Instant) {
        self.window.expire(window, now);
    }

    pub fn consecutive_gateway_errors(&self) -> u32 {
        self.gateway.get()
    }

    pub fn consecutive_5xx(&self) -> u32 {
        self.server.get()
    }

    pub fn window_counts(&self, window: Duration, now: Instant) -> WindowCounts {
        self.window.counts(window, now)
    }
}

#[cfg(test)]
mod tests;
