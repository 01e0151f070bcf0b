//! One endpoint's record: its state and everything the machine remembers to move it on.
//! The pool-level rules (ejection budget, panic) live in `machine.rs`; this file only knows
//! how a single endpoint changes state and what it keeps while doing so.

use std::net::SocketAddr;
use std::time::Duration;

use rollcall_api::roster::ProbeVerdict;
use tokio::time::Instant;

use super::{Event, HealthSettings, Reason, State};
use crate::outlier::{Consecutive, Detector};
use crate::stamp::Stamp;

/// Longest error detail kept, in characters: enough for "connect: connection refused (os
/// error 111)", too short to carry a request body by accident.
const MAX_DETAIL: usize = 200;
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Why a draining endpoint is draining.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Drain {
    /// Still in the roster, `terminating`: a last-resort route.
    Terminating,
    /// Gone from the roster: never routed.
    Removed,
}

#[derive(Clone, Debug)]
pub(super) struct Endpoint {
    pub state: State,
    pub reason: Reason,
    pub since: Stamp,
    /// Set while draining, with the state to return to if the endpoint comes back.
    pub drain: Option<(Drain, State)>,
    pub probe_ok: u32,
    pub probe_fail: Consecutive,
    pub detector: Detector,
    pub probation_ok: u32,
    /// `n`: ejections that still weigh on the next ejection's length (decays while healthy).
    pub multiplier: u32,
    pub ejections_total: u32,
    pub ejected_until: Option<Stamp>,
    /// Start of the healthy stretch that is currently earning a decay of `multiplier`.
    pub decay_from: Option<Stamp>,
    pub suppressed: bool,
    /// Start of the slow-start ramp: joining a pool that was already serving, or passing
    /// probation.
    pub slow_start_from: Option<Stamp>,
    /// Boxed: most endpoints of a large pool never fail, and in place it is 40 bytes each.
    pub last_error: Option<Box<(String, Instant)>>,
    pub probe_successes: u32,
    pub probe_failures: u32,
    /// When a real request last succeeded.
    pub last_request_ok: Option<Stamp>,
    /// The current streak of failing probes has been overruled by real requests (and said so).
    pub probes_overruled: bool,
    /// Probes have seen the fault behind the current ejection (it was theirs, or one failed
    /// since): only then does their recovery prove anything.
    pub probes_saw_fault: bool,
    /// What this sidecar's own probes say, debounced as the thresholds debounce ejection:
    /// failing after `unhealthyThreshold` failures in a row, passing at the first success
    /// before any verdict and after `healthyThreshold` successes once failing. Its vote as a
    /// fleet-health checker.
    pub own_verdict: Option<ProbeVerdict>,
}

// === impl Endpoint ===

impl Endpoint {
    /// A new endpoint; `ramp` when it joins a pool that is already serving.
    pub fn new(ramp: bool, now: Instant) -> Self {
        Self {
            state: State::Unknown,
            reason: Reason::New,
            since: Stamp::at(now),
            drain: None,
            probe_ok: 0,
            probe_fail: Consecutive::default(),
            detector: Detector::new(),
            probation_ok: 0,
            multiplier: 0,
            ejections_total: 0,
            ejected_until: None,
            decay_from: None,
            suppressed: false,
            slow_start_from: ramp.then(|| Stamp::at(now)),
            last_error: None,
            probe_successes: 0,
            probe_failures: 0,
            last_request_ok: None,
            probes_overruled: false,
            probes_saw_fault: false,
            own_verdict: None,
        }
    }

    /// Move to `to`, emitting exactly one transition; a no-op when already there.
    pub fn set_state(
        &mut self,
        addr: SocketAddr,
        to: State,
        reason: Reason,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        if self.state == to {
            return;
        }
        events.push(Event::Transition {
            endpoint: addr,
            from: self.state,
            to,
            reason,
        });
        self.decay_from = (to == State::Healthy).then(|| Stamp::at(now));
        self.state = to;
        self.reason = reason;
        self.since = Stamp::at(now);
    }

    /// Turn healthy. From probation the ramp starts now; a newcomer's ramp, begun when it
    /// joined, carries on.
    pub fn become_healthy(
        &mut self,
        addr: SocketAddr,
        reason: Reason,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        if reason == Reason::ProbationPassed {
            self.slow_start_from = Some(Stamp::at(now));
        }
        self.suppressed = false;
        self.set_state(addr, State::Healthy, reason, now, events);
    }

    /// Eject for `reason`; the `n`-th ejection lasts `base × n` (capped).
    pub fn eject(
        &mut self,
        addr: SocketAddr,
        reason: Reason,
        settings: &HealthSettings,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        self.multiplier = self.multiplier.saturating_add(1);
        self.ejections_total = self.ejections_total.saturating_add(1);
        // An absurd configured maximum must not overflow the clock: a year is forever here.
        let time = settings.ejection_time(self.multiplier).min(YEAR);
        self.ejected_until = Some(Stamp::at(now.checked_add(time).unwrap_or(now)));
        self.reset_evidence();
        self.suppressed = false;
        self.probes_overruled = false;
        self.probes_saw_fault = reason == Reason::ProbeFailures;
        self.slow_start_from = None;
        self.set_state(addr, State::Ejected, reason, now, events);
    }

    /// Forget streaks and the error window, so the endpoint has to trip again from scratch.
    pub fn reset_evidence(&mut self) {
        self.probe_ok = 0;
        self.probe_fail.reset();
        self.detector.reset();
        self.probation_ok = 0;
    }

    /// Ejected → Probation once the time is served and, with probes on, they agree. A first
    /// ejection (none still weighing on the multiplier) whose fault the probes saw ends early,
    /// as soon as `healthyThreshold` probes pass: recovery is proven, waiting longer only costs
    /// capacity. A repeat offender serves its growing time.
    pub fn try_readmit(
        &mut self,
        addr: SocketAddr,
        settings: &HealthSettings,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        let served = self
            .ejected_until
            .is_none_or(|until| now >= until.instant());
        let proven = settings.probes_enabled
            && self.probes_saw_fault
            && self.multiplier <= 1
            && self.probe_ok >= settings.healthy_probes();
        if self.state != State::Ejected || !(served || proven) {
            return;
        }
        let reason = if !settings.probes_enabled {
            Reason::EjectionExpired
        } else if self.probe_ok >= settings.healthy_probes() {
            Reason::ProbeSucceeded
        } else {
            return;
        };
        self.ejected_until = None;
        self.set_state(addr, State::Probation, reason, now, events);
    }

    /// Whether a real request succeeded less than `window` ago: the endpoint serves, whatever
    /// its health check says.
    pub fn served_within(&self, window: Duration, now: Instant) -> bool {
        self.last_request_ok
            .is_some_and(|ok| now.saturating_duration_since(ok.instant()) < window)
    }

    /// One of this sidecar's own probes came back `ok` (its streaks already counted): update
    /// what its probes say, with `unhealthy` and `healthy` the thresholds.
    pub fn judge_own_probe(&mut self, ok: bool, unhealthy: u32, healthy: u32) {
        self.own_verdict = match (self.own_verdict, ok) {
            (None | Some(ProbeVerdict::Passing), true) => Some(ProbeVerdict::Passing),
            // Counted before this result: it is one more of the run.
            (Some(ProbeVerdict::Failing), true) if self.probe_ok + 1 >= healthy => {
                Some(ProbeVerdict::Passing)
            }
            (verdict, true) => verdict,
            (_, false) if self.probe_fail.get() + 1 >= unhealthy => Some(ProbeVerdict::Failing),
            (verdict, false) => verdict,
        };
    }

    /// Take one step off `multiplier` for every full `base` spent healthy.
    pub fn decay(&mut self, base: Duration, now: Instant) {
        let Some(from) = self.decay_from.map(Stamp::instant) else {
            return;
        };
        if self.state != State::Healthy || self.multiplier == 0 {
            return;
        }
        if base.is_zero() {
            self.multiplier = 0;
            return;
        }
        let steps = now.saturating_duration_since(from).as_nanos() / base.as_nanos();
        let steps = u32::try_from(steps)
            .unwrap_or(u32::MAX)
            .min(self.multiplier);
        self.multiplier -= steps;
        self.decay_from = Some(Stamp::at(from + base.saturating_mul(steps)));
    }

    /// Slow-start factor: 0.1 → 1.0 linearly over `window` from the start of the ramp, for an
    /// endpoint routed normally (`Unknown` or `Healthy`).
    pub fn weight_factor(&self, window: Duration, now: Instant) -> f64 {
        let routed = matches!(self.state, State::Unknown | State::Healthy);
        match self.slow_start_from {
            Some(from) if routed && !window.is_zero() => {
                let done = now.saturating_duration_since(from.instant()).as_secs_f64()
                    / window.as_secs_f64();
                (0.1 + 0.9 * done).min(1.0)
            }
            _ => 1.0,
        }
    }

    pub fn note_error(&mut self, detail: &str, now: Instant) {
        self.last_error = Some(Box::new((sanitize(detail), now)));
    }
}

/// Keep an error detail printable and short. Callers pass what went wrong ("connection
/// refused", "HTTP 503"), never headers or bodies; this is the backstop, not the filter.
pub(super) fn sanitize(detail: &str) -> String {
    let clean: String = detail
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_DETAIL)
        .collect();
    clean.trim().to_owned()
}
