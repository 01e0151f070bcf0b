//! A pool's part in fleet health (docs/design.md, "Fleet health"): which endpoints this sidecar
//! probes itself, and the fleet's verdict on the others. Pure: the owner feeds it the
//! controller's messages and the time, and asks it who to probe, what to feed the health
//! machine, and when.
//!
//! - Without a fleet message (not asked, a controller that predates it, `probe_all`, or one for
//!   another roster version than the pool runs) the sidecar probes every endpoint: `Everyone`.
//! - With one, it probes its assigned and the unchecked endpoints (and any endpoint that joined
//!   after the message, until the controller speaks of it), and takes the fleet's verdict
//!   on the rest as probe evidence: at once when it changes, then once per probe interval, as
//!   its own probes would arrive (so a failing check its own traffic overruled still ejects once
//!   that traffic stops). A pending endpoint gets no evidence either way.
//! - Static stability: once the stream is lost the assignment stands for two probe intervals
//!   (a reconnect within them changes nothing), then the sidecar probes everything itself until
//!   a message arrives again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use rollcall_api::roster::FleetHealth;
use tokio::time::Instant;

/// Why this sidecar probes an endpoint itself: the `role` label of
/// `rollcall_fleet_probes_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// It is one of the endpoint's checkers.
    Assigned,
    /// No checker has given a verdict for two probe intervals.
    Unchecked,
    /// The controller has been unreachable for two probe intervals.
    Fallback,
    /// No fleet health for this pool: every sidecar probes every endpoint.
    Everyone,
}

/// All `Role` labels.
pub const ROLES: [&str; 4] = ["assigned", "unchecked", "fallback", "everyone"];

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Self::Assigned => "assigned",
            Self::Unchecked => "unchecked",
            Self::Fallback => "fallback",
            Self::Everyone => "everyone",
        }
    }
}

/// The fleet's verdict on an endpoint this sidecar does not probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Passing,
    Failing,
}

/// What the followed message says of one endpoint it knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
    Assigned,
    Unchecked,
    Pending,
    Failing,
    Passing,
}

/// The followed message, by endpoint: the pool's endpoints when it was followed (the ones it
/// speaks of; one that came later, a newer roster before the controller's word on it, is
/// probed here) and what it says of each. One lookup per endpoint and question.
#[derive(Debug, Default)]
struct Assignment {
    standing: HashMap<SocketAddr, Standing>,
}

#[derive(Debug, Default)]
enum Mode {
    #[default]
    Everyone,
    Assigned(Assignment),
    /// The stream was lost with this assignment; it stands until `until`.
    Lost {
        assignment: Assignment,
        until: Instant,
    },
    /// Lost for longer than two probe intervals: everything is probed here.
    Fallback,
}

/// One pool's fleet-health state.
#[derive(Debug, Default)]
pub struct FleetState {
    mode: Mode,
    /// Per endpoint not probed here: the verdict last fed to the machine, when the next is due,
    /// and the pass of `due` that last saw it (older entries are gone from the pool).
    fed: HashMap<SocketAddr, (Verdict, Instant, u64)>,
    /// `due` passes so far.
    passes: u64,
    /// The earliest moment a verdict is due again, unless something changes first.
    next_due: Option<Instant>,
    /// A message was followed (or the mode changed) since the last `due`.
    changed: bool,
}

/// A verdict to feed the health machine now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feed {
    pub addr: SocketAddr,
    pub verdict: Verdict,
}

impl FleetState {
    /// The controller's word for this pool, about its endpoints `known` (the roster it was
    /// computed for): `None` when there is none to follow.
    pub fn follow(
        &mut self,
        fleet: Option<&FleetHealth>,
        known: impl IntoIterator<Item = SocketAddr>,
    ) {
        self.changed = true;
        self.mode = match fleet {
            Some(f) if !f.probe_all => {
                let mut standing: HashMap<SocketAddr, Standing> =
                    known.into_iter().map(|a| (a, Standing::Passing)).collect();
                let mut mark = |addrs: &[SocketAddr], what: Standing| {
                    for addr in addrs {
                        if let Some(s) = standing.get_mut(addr) {
                            *s = what;
                        }
                    }
                };
                mark(&f.failing, Standing::Failing);
                mark(&f.pending, Standing::Pending);
                mark(&f.unchecked, Standing::Unchecked);
                mark(&f.assigned, Standing::Assigned);
                Mode::Assigned(Assignment { standing })
            }
            _ => Mode::Everyone,
        };
    }

    /// The stream to the controller ended at `now`: the assignment stands for `grace` (two
    /// probe intervals), unless a message comes first.
    pub fn lost(&mut self, now: Instant, grace: Duration) {
        self.mode = match std::mem::take(&mut self.mode) {
            Mode::Assigned(assignment) => Mode::Lost {
                assignment,
                until: now + grace,
            },
            other => other,
        };
    }

    /// When the grace after a lost stream runs out, while it runs: the owner wakes then, not at
    /// its next tick.
    pub fn fallback_at(&self) -> Option<Instant> {
        match self.mode {
            Mode::Lost { until, .. } => Some(until),
            _ => None,
        }
    }

    /// Whether the grace after a lost stream ran out at `now` (everything is probed here from
    /// then on). `true` once, when it happens.
    pub fn expire(&mut self, now: Instant) -> bool {
        if matches!(self.mode, Mode::Lost { until, .. } if now >= until) {
            self.mode = Mode::Fallback;
            self.fed.clear();
            self.changed = true;
            return true;
        }
        false
    }

    /// Why this sidecar probes `addr` itself, or `None` when it takes the fleet's verdict.
    pub fn probes(&self, addr: SocketAddr) -> Option<Role> {
        let assignment = match &self.mode {
            Mode::Everyone => return Some(Role::Everyone),
            Mode::Fallback => return Some(Role::Fallback),
            Mode::Assigned(a) | Mode::Lost { assignment: a, .. } => a,
        };
        match assignment.standing.get(&addr) {
            Some(Standing::Assigned) => Some(Role::Assigned),
            // Unknown to the message: it joined since; probed here until the controller speaks.
            Some(Standing::Unchecked) | None => Some(Role::Unchecked),
            Some(Standing::Pending | Standing::Failing | Standing::Passing) => None,
        }
    }

    /// The fleet's verdict on `addr`, when it is not probed here and not pending.
    fn verdict(&self, addr: SocketAddr) -> Option<Verdict> {
        let (Mode::Assigned(a) | Mode::Lost { assignment: a, .. }) = &self.mode else {
            return None;
        };
        match a.standing.get(&addr)? {
            Standing::Failing => Some(Verdict::Failing),
            Standing::Passing => Some(Verdict::Passing),
            Standing::Assigned | Standing::Unchecked | Standing::Pending => None,
        }
    }

    /// The verdicts to feed the machine at `now` for `endpoints`: each one that changed, and
    /// each one whose `interval` since it was last fed has passed. Cheap when nothing is due:
    /// called on every tick of every pool.
    pub fn due(
        &mut self,
        endpoints: impl IntoIterator<Item = SocketAddr>,
        now: Instant,
        interval: Duration,
    ) -> Vec<Feed> {
        if !self.changed && self.next_due.is_none_or(|at| now < at) {
            return Vec::new();
        }
        self.changed = false;
        self.passes += 1;
        let pass = self.passes;
        let mut feeds = Vec::new();
        let mut next_due: Option<Instant> = None;
        for addr in endpoints {
            let Some(verdict) = self.verdict(addr) else {
                continue;
            };
            let next = match self.fed.get(&addr) {
                Some(&(last, next, _)) if last == verdict && now < next => next,
                _ => {
                    feeds.push(Feed { addr, verdict });
                    now + interval
                }
            };
            self.fed.insert(addr, (verdict, next, pass));
            next_due = Some(next_due.map_or(next, |at: Instant| at.min(next)));
        }
        self.fed.retain(|_, entry| entry.2 == pass);
        self.next_due = next_due;
        feeds
    }
}

#[cfg(test)]
mod tests;
