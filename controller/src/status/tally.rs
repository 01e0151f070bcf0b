//! Running totals of what the sidecars report about one pool, kept up to date as each report
//! arrives, so a pool's status costs O(endpoints) to compute however many sidecars report (a
//! fleet of 1,000 sidecars on a 10,000-endpoint pool would otherwise mean 10 million records
//! cloned and re-counted per status pass).
//!
//! Compact by construction: every address the pool's reports name gets a slot once; a
//! sidecar's report is its state per slot (`SlotStates`: the state most slots have plus the
//! exceptions, or one byte per slot when the exceptions are many) plus the details of the
//! endpoints it ejects, the only ones the status lists. Per slot, the counts of each state over
//! the reporters that count (fresh ones) and the set of those ejecting it. A slot no report
//! names any more is freed and reused, so churn of pod addresses does not grow the tally.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;

use rollcall_api::roster::{EndpointHealth, EndpointState, PoolHealth, Refusal};

use super::slot_states::SlotStates;
use super::store::StreamId;
use crate::FastMap;

/// The states in slot-code order: code `i + 1` is `STATES[i]`, code 0 means "not reported".
pub const STATES: [EndpointState; 5] = [
    EndpointState::Healthy,
    EndpointState::Unknown,
    EndpointState::Probation,
    EndpointState::Draining,
    EndpointState::Ejected,
];

const EJECTED: u8 = 5;

fn code(state: EndpointState) -> u8 {
    match state {
        EndpointState::Healthy => 1,
        EndpointState::Unknown => 2,
        EndpointState::Probation => 3,
        EndpointState::Draining => 4,
        EndpointState::Ejected => EJECTED,
    }
}

/// What one sidecar says about an endpoint it ejects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ejecting {
    pub reason: String,
    pub since_unix_ms: u64,
    pub last_error: Option<String>,
}

impl Ejecting {
    fn of(e: &EndpointHealth) -> Self {
        Self {
            reason: e.reason.clone(),
            since_unix_ms: e.since_unix_ms,
            last_error: e.last_error.clone(),
        }
    }
}

/// One reporter's latest report, compact.
#[derive(Debug)]
struct Reporter {
    roster_version: u64,
    /// A newer roster it refused, and why.
    refused: Option<Refusal>,
    panic: bool,
    /// State code per slot (0: not reported).
    states: SlotStates,
    /// Details of the endpoints it ejects, by slot.
    ejected: FastMap<u32, Ejecting>,
    /// Whether it counts in the totals (its stream is fresh).
    counted: bool,
}

/// The totals of one pool.
#[derive(Debug, Default)]
pub struct PoolTally {
    slots: FastMap<SocketAddr, u32>,
    /// The address of each slot (meaningless while the slot is free).
    addrs: Vec<SocketAddr>,
    /// Reporters (counted or not) naming each slot; 0 means the slot is free.
    refs: Vec<u32>,
    free: Vec<u32>,
    /// Per slot, how many counted reporters see it in each state (index `code - 1`).
    counts: Vec<[u32; 5]>,
    /// Per slot, the counted reporters ejecting it.
    ejecting: FastMap<u32, BTreeSet<StreamId>>,
    reporters: BTreeMap<StreamId, Reporter>,
    /// Complete reports arriving in parts (`ReportChanges`), applied when the last is in.
    pending: HashMap<StreamId, Reporter>,
}

/// What the counted reporters say about one endpoint.
#[derive(Debug)]
pub struct EndpointTally<'a> {
    /// How many see it in each of [`STATES`].
    pub counts: [u32; 5],
    tally: &'a PoolTally,
    slot: u32,
}

// === impl PoolTally ===

impl PoolTally {
    /// Record `health` as `id`'s complete report (it replaces the previous one) and count it.
    /// Returns whether anything the status is computed from changed.
    pub fn record(&mut self, id: StreamId, health: &PoolHealth) -> bool {
        let mut states = SlotStates::default();
        let mut ejected = FastMap::default();
        for e in &health.endpoints {
            let slot = self.slot_for(e.addr);
            states.set(slot, code(e.state));
            if e.state == EndpointState::Ejected {
                ejected.insert(slot, Ejecting::of(e));
            } else if !ejected.is_empty() {
                // A duplicate address: the last entry wins, as it would in a map.
                ejected.remove(&slot);
            }
        }
        let new = Reporter {
            roster_version: health.roster_version,
            refused: health.refused.clone(),
            panic: health.panic,
            states: states.compacted(),
            ejected,
            counted: true,
        };
        for (slot, _) in new.states.occupied() {
            self.refs[slot as usize] += 1;
        }
        let old = self.reporters.remove(&id);
        let changed = old
            .as_ref()
            .is_none_or(|old| !same_report(old, &new) || !old.counted);
        if let Some(old) = &old {
            if old.counted {
                self.contribute(id, old, false);
            }
            self.release_all(old);
        }
        self.contribute(id, &new, true);
        self.reporters.insert(id, new);
        changed
    }

    /// One part of a complete report that arrives in parts: `first` starts it, the parts
    /// gather aside (holding their slots), and with `last` the whole replaces `id`'s previous
    /// report as `record` would. Returns whether anything the status is computed from changed
    /// (only ever on the last part).
    pub fn record_part(
        &mut self,
        id: StreamId,
        part: &PoolHealth,
        first: bool,
        last: bool,
    ) -> bool {
        if first && let Some(stale) = self.pending.remove(&id) {
            self.release_all(&stale);
        }
        let mut pending = self.pending.remove(&id).unwrap_or_else(|| Reporter {
            roster_version: 0,
            refused: None,
            panic: false,
            // Gathered in the compact form: a fleet's first reports all arrive in parts at
            // once, and one byte per slot for each of them was the controller's peak.
            states: SlotStates::default(),
            ejected: FastMap::default(),
            counted: false,
        });
        pending.roster_version = part.roster_version;
        pending.refused.clone_from(&part.refused);
        pending.panic = part.panic;
        for e in &part.endpoints {
            let slot = self.slot_for(e.addr);
            let index = slot as usize;
            if pending.states.get(slot) == 0 {
                self.refs[index] += 1;
            }
            pending.states.set(slot, code(e.state));
            if e.state == EndpointState::Ejected {
                pending.ejected.insert(slot, Ejecting::of(e));
            } else if !pending.ejected.is_empty() {
                pending.ejected.remove(&slot);
            }
        }
        if !last {
            self.pending.insert(id, pending);
            return false;
        }
        pending.counted = true;
        pending.states = std::mem::take(&mut pending.states).compacted();
        let old = self.reporters.remove(&id);
        let changed = old
            .as_ref()
            .is_none_or(|old| !same_report(old, &pending) || !old.counted);
        if let Some(old) = &old {
            if old.counted {
                self.contribute(id, old, false);
            }
            self.release_all(old);
        }
        self.contribute(id, &pending, true);
        self.reporters.insert(id, pending);
        changed
    }

    /// Whether `id` is in the middle of a complete report in parts.
    pub fn in_parts(&self, id: StreamId) -> bool {
        self.pending.contains_key(&id)
    }

    /// Whether `id` has a complete report here (changes can apply onto it).
    pub fn has_report(&self, id: StreamId) -> bool {
        self.reporters.contains_key(&id)
    }

    fn release_all(&mut self, reporter: &Reporter) {
        for (slot, _) in reporter.states.occupied() {
            self.release_ref(slot as usize);
        }
    }

    /// Apply `changes` onto `id`'s previous report (`ReportChanges`): the listed endpoints
    /// replace their entries, the `removed` ones are dropped, the pool's fields are replaced.
    /// Costs O(entries in `changes`), not O(endpoints). Returns whether anything the status is
    /// computed from changed.
    pub fn record_changes(&mut self, id: StreamId, changes: &PoolHealth) -> bool {
        let Some(mut reporter) = self.reporters.remove(&id) else {
            // Nothing reported before: the changes are the whole report.
            return self.record(id, changes);
        };
        let mut changed = reporter.roster_version != changes.roster_version
            || reporter.refused != changes.refused
            || reporter.panic != changes.panic
            || !reporter.counted;
        reporter.roster_version = changes.roster_version;
        reporter.refused.clone_from(&changes.refused);
        reporter.panic = changes.panic;
        // Entries apply to the totals one by one while the reporter counts; one that did not
        // count (quiet until now) is added whole afterwards.
        let counting = reporter.counted;
        for addr in &changes.removed {
            let Some(&slot) = self.slots.get(addr) else {
                continue;
            };
            changed |= self.set_state(id, &mut reporter, slot, 0, counting);
        }
        for e in &changes.endpoints {
            let slot = self.slot_for(e.addr);
            changed |= self.set_state(id, &mut reporter, slot, code(e.state), counting);
            if e.state == EndpointState::Ejected {
                let details = Ejecting::of(e);
                if reporter.ejected.get(&slot) != Some(&details) {
                    reporter.ejected.insert(slot, details);
                    changed = true;
                }
            }
        }
        if !counting {
            reporter.counted = true;
            self.contribute(id, &reporter, true);
        }
        self.reporters.insert(id, reporter);
        changed
    }

    /// Set one slot of `reporter` to `new` (0: not reported), keeping the slot's references and
    /// (when `counting`) its totals. Returns whether the state changed.
    fn set_state(
        &mut self,
        id: StreamId,
        reporter: &mut Reporter,
        slot: u32,
        new: u8,
        counting: bool,
    ) -> bool {
        let index = slot as usize;
        let old = reporter.states.get(slot);
        if old == new {
            return false;
        }
        reporter.states.set(slot, new);
        if new != EJECTED && !reporter.ejected.is_empty() {
            reporter.ejected.remove(&slot);
        }
        if counting {
            if old != 0 {
                self.count(id, slot, old, false);
            }
            if new != 0 {
                self.count(id, slot, new, true);
            }
        }
        match (old, new) {
            (0, _) => self.refs[index] += 1,
            (_, 0) => self.release_ref(index),
            _ => {}
        }
        true
    }

    /// Count `id`'s report in the totals or leave it out (its stream went quiet past the
    /// freshness limit, or spoke again). Returns whether that changed anything.
    pub fn set_counted(&mut self, id: StreamId, counted: bool) -> bool {
        if self.reporters.get(&id).is_none_or(|r| r.counted == counted) {
            return false;
        }
        let Some(mut reporter) = self.reporters.remove(&id) else {
            return false;
        };
        self.contribute(id, &reporter, counted);
        reporter.counted = counted;
        self.reporters.insert(id, reporter);
        true
    }

    /// Forget `id`'s report (its stream ended). Returns whether it had one.
    pub fn remove(&mut self, id: StreamId) -> bool {
        if let Some(pending) = self.pending.remove(&id) {
            self.release_all(&pending);
        }
        let Some(old) = self.reporters.remove(&id) else {
            return false;
        };
        if old.counted {
            self.contribute(id, &old, false);
        }
        self.release_all(&old);
        true
    }

    /// The reporters, counted or not.
    pub fn reporter_ids(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.reporters.keys().copied()
    }

    /// Whether nobody reports on the pool any more.
    pub fn is_empty(&self) -> bool {
        self.reporters.is_empty() && self.pending.is_empty()
    }

    /// Counted reporters.
    pub fn reporting(&self) -> u32 {
        self.counted().count() as u32
    }

    /// The roster version each counted reporter runs.
    pub fn roster_versions(&self) -> impl Iterator<Item = u64> + '_ {
        self.counted().map(|r| r.roster_version)
    }

    /// What the counted reporters that refused a roster say about it.
    pub fn refusals(&self) -> impl Iterator<Item = &Refusal> + '_ {
        self.counted().filter_map(|r| r.refused.as_ref())
    }

    /// Counted reporters that route in panic mode.
    pub fn panicking(&self) -> u32 {
        self.counted().filter(|r| r.panic).count() as u32
    }

    /// What the counted reporters say about `addr`; `None` when no report names it.
    pub fn endpoint(&self, addr: &SocketAddr) -> Option<EndpointTally<'_>> {
        let slot = *self.slots.get(addr)?;
        Some(EndpointTally {
            counts: self.counts[slot as usize],
            tally: self,
            slot,
        })
    }

    /// Slots in use: the distinct addresses the reports name (for the memory figures).
    pub fn addresses(&self) -> usize {
        self.slots.len()
    }

    fn counted(&self) -> impl Iterator<Item = &Reporter> + '_ {
        self.reporters.values().filter(|r| r.counted)
    }

    fn slot_for(&mut self, addr: SocketAddr) -> u32 {
        if let Some(slot) = self.slots.get(&addr) {
            return *slot;
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.addrs[slot as usize] = addr;
                slot
            }
            None => {
                self.refs.push(0);
                self.counts.push([0; 5]);
                self.addrs.push(addr);
                (self.refs.len() - 1) as u32
            }
        };
        self.slots.insert(addr, slot);
        slot
    }

    fn release_ref(&mut self, slot: usize) {
        self.refs[slot] -= 1;
        if self.refs[slot] == 0 {
            self.slots.remove(&self.addrs[slot]);
            self.free.push(slot as u32);
        }
    }

    /// Add (`add`) or take away a reporter's states from the per-slot totals.
    fn contribute(&mut self, id: StreamId, reporter: &Reporter, add: bool) {
        for (slot, state) in reporter.states.occupied() {
            self.count(id, slot, state, add);
        }
    }

    /// Add or take away one reporter's `state` of one slot.
    fn count(&mut self, id: StreamId, slot: u32, state: u8, add: bool) {
        let count = &mut self.counts[slot as usize][usize::from(state - 1)];
        if add {
            *count += 1;
        } else {
            *count -= 1;
        }
        if state == EJECTED {
            if add {
                self.ejecting.entry(slot).or_default().insert(id);
            } else if let Some(set) = self.ejecting.get_mut(&slot) {
                set.remove(&id);
                if set.is_empty() {
                    self.ejecting.remove(&slot);
                }
            }
        }
    }
}

fn same_report(a: &Reporter, b: &Reporter) -> bool {
    a.roster_version == b.roster_version
        && a.refused == b.refused
        && a.panic == b.panic
        && a.ejected == b.ejected
        && a.states.same(&b.states)
}

// === impl EndpointTally ===

impl EndpointTally<'_> {
    /// Counted reporters that report the endpoint at all.
    pub fn seen(&self) -> u32 {
        self.counts.iter().sum()
    }

    /// What each counted reporter that ejects it says, in stream order.
    pub fn ejecting(&self) -> impl Iterator<Item = &Ejecting> + '_ {
        self.tally
            .ejecting
            .get(&self.slot)
            .into_iter()
            .flatten()
            .filter_map(|id| self.tally.reporters.get(id)?.ejected.get(&self.slot))
    }
}

#[cfg(test)]
#[path = "tally_tests.rs"]
mod tests;
