//! Fleet health (docs/design.md, "Fleet health"): instead of every sidecar probing every
//! endpoint, each endpoint gets `healthCheck.checkers` checkers among the sidecars that watch
//! its pool (`assign`), their verdicts come in on their report streams, and the controller
//! combines them (`verdict`) into one view per pool that every Watch stream of the pool turns
//! into its sidecar's `FleetHealth` message when it changes (`View::health_for`).
//!
//! This module owns the members (who watches a pool with fleet health on, and where it runs),
//! the votes (each member's latest verdict per endpoint, from its current report stream) and
//! the views. [`run`] recomputes a pool's view at most every `TICK` once something changed
//! (a member came or went, a vote changed, the roster moved) or while an endpoint waits for
//! its first verdict, and publishes it only when it differs, so pushes are coalesced, never per
//! probe.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rollcall_api::policy::HealthCheckType;
use rollcall_api::roster::{FleetHealth, PoolHealth, PoolRef, PoolState, ProbeVerdict};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::crd::{FleetFailing, FleetHealthStatus};
use crate::roster::hub::RosterHub;
use crate::server::sessions::PodKey;
use crate::status::ReportStore;

pub mod assign;
pub mod verdict;

use assign::Candidate;
use verdict::{Input, Standing, Tally};

/// How often a pool's view may be recomputed: the coalescing window of verdict pushes.
pub const TICK: Duration = Duration::from_millis(250);

/// A sidecar taking part in a pool's fleet health: where it runs, for the spread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub pod: PodKey,
    pub node: Option<String>,
    pub zone: Option<String>,
}

/// What one pool's fleet says, as the Watch streams of the pool read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    pub roster_version: u64,
    pub probe_all: bool,
    pub checkers: u32,
    /// The endpoints each member checks.
    pub assigned: HashMap<PodKey, Vec<SocketAddr>>,
    pub unchecked: Vec<SocketAddr>,
    pub pending: Vec<SocketAddr>,
    pub failing: Vec<SocketAddr>,
    pub summary: Summary,
}

/// A pool's fleet health in numbers, for its status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Sidecars taking part.
    pub members: u32,
    /// Endpoints with all their checkers reporting.
    pub fully_checked: u32,
    /// Endpoints with some but not all of their checkers reporting.
    pub partly_checked: u32,
    pub unchecked: u32,
    pub pending: u32,
    /// Each failing endpoint (capped ones included) and its votes.
    pub failing: Vec<(SocketAddr, Tally)>,
    /// Failing endpoints passed on as passing because `maxEjectionPercent` is spent.
    pub capped: u32,
}

#[derive(Debug)]
struct Joined {
    member: Member,
    /// The Watch stream that joined: only it may leave (a newer stream of the pod replaces it).
    stream: u64,
}

#[derive(Debug)]
struct Votes {
    /// The report stream they came on: a newer stream of the pod replaces them.
    stream: u64,
    verdicts: HashMap<SocketAddr, ProbeVerdict>,
}

#[derive(Debug)]
struct PoolFleet {
    members: BTreeMap<PodKey, Joined>,
    votes: HashMap<PodKey, Votes>,
    /// Per endpoint without a verdict: since when.
    silent_since: HashMap<SocketAddr, Instant>,
    /// The last assignment, reused while the roster version and the members stay.
    assignment: Option<Assignment>,
    published: watch::Sender<Option<Arc<View>>>,
    /// Something changed since the view was computed.
    dirty: bool,
}

#[derive(Debug)]
struct Assignment {
    roster_version: u64,
    members: Vec<PodKey>,
    k: usize,
    /// Per roster endpoint (in roster order), its checkers: indices into `members`.
    checkers: Vec<Vec<usize>>,
}

/// Every pool's fleet health.
#[derive(Debug, Default)]
pub struct Fleet {
    pools: Mutex<HashMap<PoolRef, PoolFleet>>,
    next_stream: std::sync::atomic::AtomicU64,
}

/// A member's place in a pool's fleet; it leaves when this is dropped.
pub struct Membership {
    fleet: Arc<Fleet>,
    pool: PoolRef,
    pod: PodKey,
    stream: u64,
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.fleet.leave(&self.pool, &self.pod, self.stream);
    }
}

// === impl Fleet ===

impl Fleet {
    pub fn new() -> Self {
        Self::default()
    }

    /// A stream id for `join` and `record`: one per Watch or Report stream.
    pub fn stream_id(&self) -> u64 {
        self.next_stream
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// `member`'s Watch stream `stream` takes part in `pool`'s fleet health (replacing an older
    /// stream of the same pod). The receiver holds the pool's view, `None` until there is one.
    pub fn join(
        self: &Arc<Self>,
        pool: &PoolRef,
        member: Member,
        stream: u64,
    ) -> (Membership, watch::Receiver<Option<Arc<View>>>) {
        let pod = member.pod.clone();
        let rx = {
            let mut pools = self.pools.lock();
            let entry = pools.entry(pool.clone()).or_insert_with(|| PoolFleet {
                members: BTreeMap::new(),
                votes: HashMap::new(),
                silent_since: HashMap::new(),
                assignment: None,
                published: watch::Sender::new(None),
                dirty: true,
            });
            entry.members.insert(pod.clone(), Joined { member, stream });
            entry.dirty = true;
            entry.published.subscribe()
        };
        let membership = Membership {
            fleet: Arc::clone(self),
            pool: pool.clone(),
            pod,
            stream,
        };
        (membership, rx)
    }

    fn leave(&self, pool: &PoolRef, pod: &PodKey, stream: u64) {
        let mut pools = self.pools.lock();
        let Some(entry) = pools.get_mut(pool) else {
            return;
        };
        if entry.members.get(pod).is_some_and(|j| j.stream == stream) {
            entry.members.remove(pod);
            entry.dirty = true;
        }
        if entry.members.is_empty() {
            pools.remove(pool);
        }
    }

    /// Take the verdicts a report (complete, or changes) of report stream `stream` of `pod`
    /// carries about `health.pool`. Ignored for a pool nobody takes fleet health on.
    pub fn record(&self, pod: &PodKey, stream: u64, health: &PoolHealth) {
        let mut pools = self.pools.lock();
        let Some(entry) = pools.get_mut(&health.pool) else {
            return;
        };
        if !entry.votes.contains_key(pod) {
            // A pod that reports no probe verdict (not a checker here) takes no room.
            if health.endpoints.iter().all(|e| e.probe.is_none()) {
                return;
            }
            let fresh = Votes {
                stream,
                verdicts: HashMap::new(),
            };
            entry.votes.insert(pod.clone(), fresh);
        }
        let Some(votes) = entry.votes.get_mut(pod) else {
            return;
        };
        let mut changed = false;
        // A newer stream of the pod, or a complete report, starts over.
        if votes.stream != stream || health.complete {
            changed |= !votes.verdicts.is_empty();
            votes.stream = stream;
            votes.verdicts.clear();
        }
        for addr in &health.removed {
            changed |= votes.verdicts.remove(addr).is_some();
        }
        for e in &health.endpoints {
            let before = match e.probe {
                Some(v) => votes.verdicts.insert(e.addr, v),
                None => votes.verdicts.remove(&e.addr),
            };
            changed |= before != e.probe;
        }
        if changed {
            entry.dirty = true;
        }
    }

    /// Report stream `stream` of `pod` ended: its verdicts no longer count anywhere.
    pub fn forget_votes(&self, pod: &PodKey, stream: u64) {
        for entry in self.pools.lock().values_mut() {
            if entry.votes.get(pod).is_some_and(|v| v.stream == stream) {
                entry.votes.remove(pod);
                entry.dirty = true;
            }
        }
    }

    /// The pool's current view, when any sidecar takes part in its fleet health.
    pub fn view(&self, pool: &PoolRef) -> Option<Arc<View>> {
        self.pools.lock().get(pool)?.published.borrow().clone()
    }

    /// Recompute the views of the pools that need it against the rosters `hub` serves.
    /// Returns the pools whose view changed.
    pub fn refresh(&self, hub: &RosterHub, now: Instant) -> Vec<PoolRef> {
        let mut changed = Vec::new();
        let mut pools = self.pools.lock();
        for (pool, entry) in pools.iter_mut() {
            let current = hub.current(pool);
            let version = current.as_ref().map(|p| p.update.version);
            let stale_roster =
                entry.published.borrow().as_ref().map(|v| v.roster_version) != version;
            if !entry.dirty && !stale_roster && entry.silent_since.is_empty() {
                continue;
            }
            entry.dirty = false;
            let view = current.as_ref().and_then(|p| match &p.update.state {
                PoolState::Roster(roster) => Some(entry.compute(p.update.version, roster, now)),
                PoolState::Unavailable { .. } => None,
            });
            let modified = entry.published.send_if_modified(|old| {
                let same = match (old.as_deref(), view.as_ref()) {
                    (Some(a), Some(b)) => a == b,
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    *old = view.map(Arc::new);
                }
                !same
            });
            if modified {
                changed.push(pool.clone());
            }
        }
        changed
    }
}

// === impl PoolFleet ===

impl PoolFleet {
    fn compute(
        &mut self,
        version: u64,
        roster: &rollcall_api::roster::Roster,
        now: Instant,
    ) -> View {
        let hc = &roster.policy.health_check;
        let k = hc.checkers as usize;
        let members = self.members.len();
        let mut view = View {
            roster_version: version,
            checkers: hc.checkers,
            summary: Summary {
                members: u32::try_from(members).unwrap_or(u32::MAX),
                ..Summary::default()
            },
            ..View::default()
        };
        if k == 0 || members <= k || hc.kind == HealthCheckType::None {
            view.probe_all = true;
            self.silent_since.clear();
            self.assignment = None;
            return view;
        }
        let keys: Vec<PodKey> = self.members.keys().cloned().collect();
        let reuse = self
            .assignment
            .as_ref()
            .is_some_and(|a| a.roster_version == version && a.k == k && a.members == keys);
        if !reuse {
            let candidates: Vec<Candidate> = self
                .members
                .values()
                .map(|j| Candidate {
                    key: format!("{}/{}", j.member.pod.0, j.member.pod.1),
                    node: j.member.node.clone(),
                    zone: j.member.zone.clone(),
                })
                .collect();
            let addrs: Vec<SocketAddr> = roster.endpoints.iter().map(|e| e.addr).collect();
            self.assignment = Some(Assignment {
                roster_version: version,
                members: keys,
                k,
                checkers: assign::assign(&addrs, &candidates, k),
            });
        }
        let Some(assignment) = &self.assignment else {
            return view;
        };
        let mut silent_since = HashMap::new();
        let mut inputs = Vec::with_capacity(roster.endpoints.len());
        for (endpoint, checkers) in roster.endpoints.iter().zip(&assignment.checkers) {
            let addr = endpoint.addr;
            let pods = checkers.iter().map(|&i| &assignment.members[i]);
            for pod in pods.clone() {
                view.assigned.entry(pod.clone()).or_default().push(addr);
            }
            let tally = Tally::of(checkers.iter().map(|&i| &assignment.members[i]), |pod| {
                self.votes
                    .get(pod)
                    .and_then(|v| v.verdicts.get(&addr))
                    .copied()
            });
            let silent_for = if tally.voters == 0 {
                let since = *self.silent_since.get(&addr).unwrap_or(&now);
                silent_since.insert(addr, since);
                now.saturating_duration_since(since)
            } else {
                Duration::ZERO
            };
            if tally.voters > 0 && tally.voters as usize >= checkers.len() {
                view.summary.fully_checked += 1;
            } else if tally.voters > 0 {
                view.summary.partly_checked += 1;
            }
            inputs.push(Input {
                addr,
                tally,
                silent_for,
            });
        }
        self.silent_since = silent_since;
        let unchecked_after = hc.interval.get() * 2;
        let max_failing = verdict::max_failing(
            roster.endpoints.len(),
            roster.policy.outlier_detection.max_ejection_percent,
        );
        let standings = verdict::decide(&inputs, max_failing, unchecked_after);
        for (input, standing) in inputs.iter().zip(standings) {
            match standing {
                Standing::Passing => {}
                Standing::Failing => {
                    view.failing.push(input.addr);
                    view.summary.failing.push((input.addr, input.tally));
                }
                Standing::FailingCapped => {
                    view.summary.capped += 1;
                    view.summary.failing.push((input.addr, input.tally));
                }
                Standing::Pending => view.pending.push(input.addr),
                Standing::Unchecked => view.unchecked.push(input.addr),
            }
        }
        view.summary.unchecked = u32::try_from(view.unchecked.len()).unwrap_or(u32::MAX);
        view.summary.pending = u32::try_from(view.pending.len()).unwrap_or(u32::MAX);
        view
    }
}

// === impl View ===

impl View {
    /// The `FleetHealth` message of `pod`.
    pub fn health_for(&self, pod: &PodKey) -> FleetHealth {
        FleetHealth {
            roster_version: self.roster_version,
            probe_all: self.probe_all,
            checkers: self.checkers,
            assigned: self.assigned.get(pod).cloned().unwrap_or_default(),
            unchecked: self.unchecked.clone(),
            pending: self.pending.clone(),
            failing: self.failing.clone(),
        }
    }
}

/// Failing endpoints a status lists at most.
const STATUS_FAILING: usize = 20;

/// The pool's fleet health as its status shows it.
pub fn status(view: &View) -> FleetHealthStatus {
    let summary = &view.summary;
    let mut failing: Vec<FleetFailing> = summary
        .failing
        .iter()
        .map(|(addr, tally)| FleetFailing {
            address: addr.to_string(),
            failing: tally.failing,
            of: tally.voters,
        })
        .collect();
    failing.sort_by(|a, b| a.address.cmp(&b.address));
    failing.truncate(STATUS_FAILING);
    FleetHealthStatus {
        checkers: view.checkers,
        sidecars: summary.members,
        probe_all: view.probe_all,
        fully_checked: summary.fully_checked,
        partly_checked: summary.partly_checked,
        pending: summary.pending,
        unchecked: summary.unchecked,
        failing,
        capped: summary.capped,
    }
}

/// Keep every pool's view current until `closed` resolves: at most every `TICK`, and only
/// for pools where something changed or a verdict is awaited.
/// A pool whose view changed has its status recomputed (`reports`).
pub async fn run(
    fleet: Arc<Fleet>,
    hub: Arc<RosterHub>,
    reports: Arc<ReportStore>,
    closed: impl Future<Output = ()>,
) {
    tokio::pin!(closed);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut closed => return,
            _ = tick.tick() => {
                for pool in fleet.refresh(&hub, Instant::now()) {
                    reports.touch(pool);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
