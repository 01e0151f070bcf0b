//! The per-pool endpoint health machine (docs/design.md, "The endpoint health machine"): probe
//! results and request outcomes in, state transitions and routes out.
//!
//! Pure on purpose: no I/O, no clock reads, no async; every call takes `now`. Each pool's owner
//! task (`crate::pool::owner`) holds its `PoolHealth` alone, with no lock: it feeds it evidence,
//! calls `tick` about once a second, and acts on the returned [`Event`]s. Pool-wide rules live here (the ejection budget of
//! `maxEjectionPercent`, panic mode, who gets routed); one endpoint's bookkeeping lives in
//! `endpoint.rs`; passive detection is `crate::outlier`.
//!
//! Decisions made here (docs/design.md gives the reasons; change them here, and in the tests
//! that pin them):
//! - Creating an endpoint is not a transition (it starts `Unknown`, reason `New`); only state
//!   changes emit `Transition`, exactly one each. Draining → Draining (terminating, then removed)
//!   updates the reason without an event.
//! - Back in the roster, an endpoint resumes the state it drained from, ejection clock included:
//!   a roster flap does not launder an ejection. Evidence about draining endpoints only counts in
//!   the probe totals and the last error.
//! - Slow start applies after probation and to a newcomer joining a pool that already has a
//!   `Healthy` endpoint, from the moment it joins (it is routed while `Unknown`, so its ramp
//!   must already run then); the first roster of a pool starts at full weight.
//! - Probation is earned on real requests while the pool has traffic (a request outcome within
//!   `RECENT_TRAFFIC`): a TCP probe cannot see fast 5xx. An idle pool's probes still count, or
//!   its endpoints would stay on probation until traffic returned.
//! - Probation failures re-eject regardless of `maxEjectionPercent` (probation is already out).
//! - Answered streaks and the error rate are judged against the pool's window of every
//!   endpoint's counted outcomes (`crate::outlier::{streak, relative}`), connection-failure
//!   streaks absolutely; a plain 5xx breaks a gateway streak.
//! - Failing probes do not eject an `Unknown`/`Healthy` endpoint whose real requests succeeded
//!   within the last probe interval, at least a second (`Event::ProbesOverruled`, once per
//!   streak).
//! - A first ejection (multiplier 1 after it) ends early, at `healthyThreshold` consecutive probe
//!   successes, when the probes saw its fault (they caused it, or one failed while ejected);
//!   otherwise, and for repeat offenders, the ejection time is served in full (docs/design.md,
//!   "Probation and slow start").

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use rollcall_api::roster::ProbeVerdict;

use crate::outcome::Verdict;
use crate::outlier::ErrorRateWindow;
use crate::stamp::Stamp;

mod endpoint;
mod endpoint_report;
mod roster;
mod table;
mod types;

pub use endpoint_report::{EndpointReport, Summary, wall_clock};
pub use types::{Event, HealthSettings, Reason, Route, RouteClass, Routes, State};

use endpoint::{Drain, Endpoint};
use table::EndpointTable;

/// A pool whose last request outcome is younger than this has traffic: probation is then
/// earned on requests, not probes.
pub const RECENT_TRAFFIC: Duration = Duration::from_secs(10);

/// Health of every endpoint of one pool, keyed (and listed) by address.
#[derive(Clone, Debug)]
pub struct PoolHealth {
    settings: HealthSettings,
    endpoints: EndpointTable,
    panic: bool,
    /// When the last request outcome (of any endpoint) was recorded.
    last_request: Option<Instant>,
    /// Every outcome the endpoints' detectors counted, pooled: the peers an endpoint's error
    /// rate is judged against (`crate::outlier::relative`).
    window: ErrorRateWindow,
}

// === impl PoolHealth ===

impl PoolHealth {
    pub fn new(settings: HealthSettings) -> Self {
        Self {
            settings,
            endpoints: EndpointTable::default(),
            panic: false,
            last_request: None,
            window: ErrorRateWindow::new(),
        }
    }

    pub fn settings(&self) -> &HealthSettings {
        &self.settings
    }

    /// Config reload: every endpoint keeps its state, counters and ejection; the new knobs apply
    /// from the next call on. A panic change caused by a new threshold is reported by the next
    /// `tick` (or event), so a caller with nowhere to put events here loses none.
    pub fn set_settings(&mut self, settings: HealthSettings) {
        self.settings = settings;
    }

    /// Stop tracking an endpoint (once drained, or at its drain timeout). Forgetting one that
    /// was not draining may change panic mode; the next `tick` (or event) reports it.
    pub fn forget(&mut self, addr: SocketAddr) {
        self.endpoints.remove(&addr);
    }

    /// One active probe result. Probes count in every state but `Draining`: they eject,
    /// admit, build the evidence an ejected endpoint needs, and count on probation.
    pub fn record_probe(
        &mut self,
        addr: SocketAddr,
        ok: bool,
        detail: &str,
        now: Instant,
    ) -> Vec<Event> {
        let unhealthy = self.settings.unhealthy_probes();
        let healthy = self.settings.healthy_probes();
        if let Some(ep) = self.endpoints.get_mut(&addr) {
            ep.judge_own_probe(ok, unhealthy, healthy);
        }
        self.probe_evidence(addr, ok, 1, detail, now)
    }

    /// The fleet's verdict on an endpoint this sidecar does not probe itself (fleet health), as
    /// probe evidence: the checkers behind it have seen a whole run of probes, so a failing
    /// verdict counts as `unhealthyThreshold` failures in a row and a passing one as
    /// `healthyThreshold` successes. Everything else is as for a probe of its own: real requests
    /// that succeed still overrule a failing health check, and the ejection budget holds.
    pub fn record_fleet_verdict(
        &mut self,
        addr: SocketAddr,
        passing: bool,
        detail: &str,
        now: Instant,
    ) -> Vec<Event> {
        let run = if passing {
            self.settings.healthy_probes()
        } else {
            self.settings.unhealthy_probes()
        };
        self.probe_evidence(addr, passing, run, detail, now)
    }

    /// What this sidecar's own probes say of `addr`, for the fleet (`None` before they say
    /// anything, or once it stopped probing it: [`PoolHealth::forget_own_probes`]).
    pub fn own_probe_verdict(&self, addr: SocketAddr) -> Option<ProbeVerdict> {
        self.endpoints.get(&addr).and_then(|ep| ep.own_verdict)
    }

    /// This sidecar stopped probing `addr` (another checks it for the fleet): what its own
    /// probes said no longer stands.
    pub fn forget_own_probes(&mut self, addr: SocketAddr) {
        if let Some(ep) = self.endpoints.get_mut(&addr) {
            ep.own_verdict = None;
        }
    }

    /// Probe evidence worth `run` results in a row, all `ok` or all failing.
    fn probe_evidence(
        &mut self,
        addr: SocketAddr,
        ok: bool,
        run: u32,
        detail: &str,
        now: Instant,
    ) -> Vec<Event> {
        let mut events = Vec::new();
        // Only a failure can trip an ejection; the pool-wide count is O(endpoints), so it is
        // not paid on every success.
        let may_eject = !ok && self.may_eject();
        let traffic = self.has_traffic(now);
        let s = &self.settings;
        let Some(ep) = self.endpoints.get_mut(&addr) else {
            return events;
        };
        ep.decay(s.base_ejection, now);
        if ok {
            ep.probe_successes = ep.probe_successes.saturating_add(1);
        } else {
            ep.probe_failures = ep.probe_failures.saturating_add(1);
            ep.note_error(detail, now);
        }
        if ep.state == State::Draining {
            return events;
        }
        if ok {
            ep.probe_ok = ep.probe_ok.saturating_add(run);
            ep.probe_fail.reset();
            ep.probes_overruled = false;
        } else {
            ep.probe_ok = 0;
            for _ in 0..run.max(1) {
                ep.probe_fail.failure();
            }
            if ep.state == State::Ejected {
                ep.probes_saw_fault = true;
            }
        }
        match (ep.state, ok) {
            (State::Unknown | State::Healthy, true) => {
                ep.suppressed = false;
                if ep.state == State::Unknown {
                    ep.become_healthy(addr, Reason::ProbeSucceeded, now, &mut events);
                }
            }
            (State::Unknown | State::Healthy, false) => {
                // Sensor faults never cost capacity: a failing health check on an endpoint
                // that answers real requests is the check's problem.
                if ep.probe_fail.reached(s.unhealthy_probes()) {
                    if ep.served_within(s.overrule_window(), now) {
                        if !ep.probes_overruled {
                            ep.probes_overruled = true;
                            events.push(Event::ProbesOverruled { endpoint: addr });
                        }
                    } else {
                        let reason = Reason::ProbeFailures;
                        trip(ep, addr, reason, may_eject, s, now, &mut events);
                    }
                }
            }
            (State::Ejected, _) => ep.try_readmit(addr, s, now, &mut events),
            // With traffic flowing, probation is earned on requests (see the module header).
            (State::Probation, true) if !traffic => {
                probation_success(ep, addr, s, now, &mut events);
            }
            (State::Probation, true) => {}
            (State::Probation, false) => {
                ep.eject(addr, Reason::ProbationFailed, s, now, &mut events);
            }
            (State::Draining, _) => {}
        }
        // Panic depends only on states, and every state change is an event.
        if !events.is_empty() {
            self.update_panic(&mut events);
        }
        events
    }

    /// One real request's verdict. Ignored while `Ejected` (routed only in panic) or
    /// `Draining`; a 4xx never counts, and what was not the endpoint's doing is not evidence.
    pub fn record_request(
        &mut self,
        addr: SocketAddr,
        verdict: Verdict,
        detail: &str,
        now: Instant,
    ) -> Vec<Event> {
        let mut events = Vec::new();
        if verdict == Verdict::NotTheEndpoint {
            return events;
        }
        self.last_request = Some(now);
        let may_eject = verdict.is_failure() && self.may_eject();
        // Whether a streak has peers to be judged against (only a failure can trip).
        let alone = verdict.is_failure() && self.alone(addr);
        let s = &self.settings;
        let Some(ep) = self.endpoints.get_mut(&addr) else {
            return events;
        };
        ep.decay(s.base_ejection, now);
        if verdict.is_failure() {
            ep.note_error(detail, now);
        } else if verdict == Verdict::Success {
            ep.last_request_ok = Some(Stamp::at(now));
        }
        match ep.state {
            State::Ejected | State::Draining => return events,
            State::Probation => match verdict {
                Verdict::Success => probation_success(ep, addr, s, now, &mut events),
                Verdict::ClientError | Verdict::NotTheEndpoint => {}
                Verdict::ServerError | Verdict::GatewayError | Verdict::ConnectionFailure => {
                    ep.eject(addr, Reason::ProbationFailed, s, now, &mut events);
                }
            },
            State::Unknown | State::Healthy => {
                if verdict == Verdict::Success {
                    ep.suppressed = false;
                    if ep.state == State::Unknown && !s.probes_enabled {
                        ep.become_healthy(addr, Reason::RequestSucceeded, now, &mut events);
                    }
                }
                if let Some(t) =
                    ep.detector
                        .record(verdict, &s.limits(), &mut self.window, alone, now)
                {
                    trip(ep, addr, t.into(), may_eject, s, now, &mut events);
                }
            }
        }
        // Panic depends only on states, and every state change is an event.
        if !events.is_empty() {
            self.update_panic(&mut events);
        }
        events
    }

    /// Whether the pool has seen request outcomes lately (probation then needs real ones).
    pub fn has_traffic(&self, now: Instant) -> bool {
        self.last_request
            .is_some_and(|at| now.saturating_duration_since(at) < RECENT_TRAFFIC)
    }

    /// Periodic upkeep: ejections that have been served, decay of the ejection multiplier,
    /// error-window memory, and panic mode.
    pub fn tick(&mut self, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        let s = &self.settings;
        self.window.expire(s.error_rate_window, now);
        for (addr, ep) in self.endpoints.iter_mut() {
            ep.decay(s.base_ejection, now);
            ep.detector.expire(s.error_rate_window, now);
            ep.try_readmit(*addr, s, now, &mut events);
        }
        self.update_panic(&mut events);
        events
    }

    /// Who the balancer may use now. In panic every non-draining endpoint is `Normal`.
    pub fn routes(&self, now: Instant) -> Routes {
        let window = self.settings.slow_start_window;
        let endpoints = self
            .endpoints
            .iter()
            .filter_map(|(addr, ep)| {
                let class = match (ep.state, ep.drain) {
                    (State::Draining, Some((Drain::Terminating, _))) => {
                        RouteClass::TerminatingFallback
                    }
                    (State::Draining, _) => return None,
                    (State::Ejected | State::Probation, _) if self.panic => RouteClass::Normal,
                    (State::Ejected, _) => return None,
                    (State::Probation, _) => RouteClass::Probation,
                    (State::Unknown | State::Healthy, _) => RouteClass::Normal,
                };
                Some(Route {
                    addr: *addr,
                    class,
                    weight_factor: ep.weight_factor(window, now),
                })
            })
            .collect();
        Routes {
            panic: self.panic,
            endpoints,
        }
    }

    pub fn panic(&self) -> bool {
        self.panic
    }

    pub fn state(&self, addr: SocketAddr) -> Option<State> {
        self.endpoints.get(&addr).map(|e| e.state)
    }

    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    pub fn reports(&self, now: Instant) -> Vec<EndpointReport> {
        self.endpoints
            .iter()
            .map(|(addr, ep)| EndpointReport::new(*addr, ep, &self.settings, now))
            .collect()
    }

    pub fn summary(&self) -> Summary {
        let mut summary = Summary::default();
        for ep in self.endpoints.values() {
            summary.count(ep.state);
        }
        summary
    }

    /// Whether the pool has no endpoint but `addr` that is not draining (ejected peers count:
    /// the last one standing must not fall back to absolute streaks).
    fn alone(&self, addr: SocketAddr) -> bool {
        !self
            .endpoints
            .iter()
            .any(|(a, e)| *a != addr && e.state != State::Draining)
    }

    /// Whether one more endpoint may go out without exceeding `maxEjectionPercent`.
    fn may_eject(&self) -> bool {
        let (total, out) = self
            .endpoints
            .values()
            .fold((0, 0), |(t, o), e| match e.state {
                State::Draining => (t, o),
                s => (t + 1, o + usize::from(s.is_out())),
            });
        out < self.settings.max_out(total)
    }

    fn update_panic(&mut self, events: &mut Vec<Event>) {
        let (total, eligible) =
            self.endpoints
                .values()
                .fold((0u32, 0u32), |(t, e), ep| match ep.state {
                    State::Draining => (t, e),
                    s => (t + 1, e + u32::from(s.is_eligible())),
                });
        let panic =
            total > 0 && f64::from(eligible) / f64::from(total) < self.settings.panic_threshold;
        if panic != self.panic {
            self.panic = panic;
            events.push(if panic {
                Event::PanicEntered
            } else {
                Event::PanicExited
            });
        }
    }
}

/// A rule tripped on an eligible endpoint: eject it, or flag it when the budget is spent.
fn trip(
    ep: &mut Endpoint,
    addr: SocketAddr,
    reason: Reason,
    may_eject: bool,
    s: &HealthSettings,
    now: Instant,
    events: &mut Vec<Event>,
) {
    if may_eject {
        ep.eject(addr, reason, s, now, events);
    } else {
        ep.suppressed = true;
        ep.reset_evidence();
        events.push(Event::EjectionSuppressed {
            endpoint: addr,
            reason,
        });
    }
}

fn probation_success(
    ep: &mut Endpoint,
    addr: SocketAddr,
    s: &HealthSettings,
    now: Instant,
    events: &mut Vec<Event>,
) {
    ep.probation_ok = ep.probation_ok.saturating_add(1);
    if ep.probation_ok >= s.probation_needed() {
        ep.probation_ok = 0;
        ep.become_healthy(addr, Reason::ProbationPassed, now, events);
    }
}

#[cfg(test)]
mod tests;
