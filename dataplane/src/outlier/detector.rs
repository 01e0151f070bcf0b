//! One endpoint's passive detector: folds in request verdicts (`crate::outcome::Verdict`) and
//! says when one of the three passive rules (consecutive gateway errors, consecutive 5xx, error
//! rate) has tripped.
//!
//! Rules, as Envoy's outlier detection has them: a 4xx is the client's problem and is invisible
//! here (it neither counts nor breaks a streak, nor enters the error rate); a gateway error
//! (502/503/504, or a connection-level failure) counts as a 5xx too; a plain 5xx breaks a
//! gateway-error streak, because "consecutive" means nothing else happened in between.
//!
//! What is judged against the peers and what is not: a streak of *answers* (502/503/504, other
//! 5xx) trips only when it is longer than the peers' own failure share makes likely
//! (`streak.rs`), and the error rate only when it sets the endpoint apart (`relative.rs`), so an
//! overload every endpoint shows ejects nobody. A connection-level failure (refused, timed
//! out, reset, not HTTP: what Envoy calls locally originated) is the endpoint's own however the
//! peers fare: `limit` of those in a row trip at once, as they always did. Both judgements use
//! the pool's window (the sum of every routed endpoint's requests, this one's included) without
//! this endpoint's own counts, so `record` counts each verdict there too.

use std::time::Duration;

use tokio::time::Instant;

use super::{Consecutive, ErrorRateWindow, RecentOutcomes, WindowCounts, relative, streak};
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
    /// Connection-level failures in a row; any answer breaks it.
    connection: Consecutive,
    /// Gateway errors in a row, answered or connection-level.
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
    /// the pool's window: every verdict counted here is counted there too. `alone`: no other
    /// endpoint of the pool is counted (so no peer can be compared with); consulted only when a
    /// failure.
    pub fn record(
        &mut self,
        verdict: Verdict,
        limits: &Limits,
        pool: &mut ErrorRateWindow,
        alone: bool,
        now: Instant,
    ) -> Option<Trip> {
        match verdict {
            Verdict::ClientError | Verdict::NotTheEndpoint => return None,
            Verdict::Success => {
                self.connection.reset();
                self.gateway.reset();
                self.server.reset();
            }
            Verdict::ServerError => {
                self.connection.reset();
                self.gateway.reset();
                self.server.failure();
            }
            Verdict::GatewayError => {
                self.connection.reset();
                self.gateway.failure();
                self.server.failure();
            }
            Verdict::ConnectionFailure => {
                self.connection.failure();
                self.gateway.failure();
                self.server.failure();
            }
        }
        let window = limits.error_rate_window;
        self.window.record(verdict.is_failure(), window, now);
        pool.record(verdict.is_failure(), window, now);
        self.recent.push(verdict.is_failure());
        if !verdict.is_failure() {
            return None;
        }
        let (gateway, server) = (limits.consecutive_gateway_errors, limits.consecutive_5xx);
        // The peers' counts are needed only once a streak has reached its configured limit.
        let needed = (self.gateway.reached(gateway) || self.server.reached(server)).then(|| {
            let peers = (!alone).then(|| self.peers(limits, pool, now));
            (
                streak::needed(gateway, peers),
                streak::needed(server, peers),
            )
        });
        let (gateway_run, server_run) = needed.unwrap_or((u32::MAX, u32::MAX));
        let unlike_peers =
            |run: Consecutive, limit: u32, needed: u32| run.reached(limit) && run.get() >= needed;
        if self.connection.reached(gateway) || unlike_peers(self.gateway, gateway, gateway_run) {
            Some(Trip::ConsecutiveGatewayErrors)
        } else if self.connection.reached(server) || unlike_peers(self.server, server, server_run) {
            Some(Trip::Consecutive5xx)
        } else if self.rate_trips(limits, pool, alone, now) {
            Some(Trip::ErrorRate)
        } else {
            None
        }
    }

    /// The other endpoints' counts in the window: the pool's without this one's.
    fn peers(&self, limits: &Limits, pool: &ErrorRateWindow, now: Instant) -> WindowCounts {
        let window = limits.error_rate_window;
        let own = self.window.counts(window, now);
        let all = pool.counts(window, now);
        WindowCounts {
            requests: all.requests.saturating_sub(own.requests),
            failures: all.failures.saturating_sub(own.failures),
        }
    }

    /// The error-rate rule; only a failure can make it trip, so successes never pay for it.
    fn rate_trips(
        &self,
        limits: &Limits,
        pool: &ErrorRateWindow,
        alone: bool,
        now: Instant,
    ) -> bool {
        let window = limits.error_rate_window;
        let own = self.window.counts(window, now);
        if own.requests
            < u64::from(relative::relative_min_requests(
                limits.error_rate_min_requests,
            ))
        {
            return false;
        }
        let recent = self
            .recent
            .counts(relative::recent_len(limits.error_rate_min_requests));
        let peers = (!alone).then(|| self.peers(limits, pool, now));
        relative::trips(own, recent, peers, limits)
    }

    /// Forget streaks and window: after an ejection (or a suppressed one) the endpoint has to
    /// trip again from scratch.
    pub fn reset(&mut self) {
        self.connection.reset();
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
