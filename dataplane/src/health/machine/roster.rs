//! Roster changes in the health machine: endpoints joining (a newcomer to a serving pool ramps
//! up from the moment it joins), turning `terminating`, leaving and coming back. A whole roster
//! applies in one pass with one panic evaluation, however large it is.

use std::collections::HashSet;
use std::net::SocketAddr;

use tokio::time::Instant;

use super::endpoint::{Drain, Endpoint};
use super::{Event, PoolHealth, Reason, State};

// === impl PoolHealth ===

impl PoolHealth {
    /// The endpoint is in the roster. New ones start `Unknown` (eligible); `terminating` ones
    /// drain; a draining one that is back and not terminating returns to the state it left.
    pub fn upsert(&mut self, addr: SocketAddr, terminating: bool, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        let serving = self.serving();
        self.upsert_one(addr, terminating, serving, now, &mut events);
        self.update_panic(&mut events);
        events
    }

    /// A whole roster, `(address, terminating)`: every listed endpoint is upserted, every other
    /// one removed. One pass, and one panic evaluation, however large the roster.
    pub fn apply_roster(&mut self, roster: &[(SocketAddr, bool)], now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        let serving = self.serving();
        let before = self.endpoints.len();
        for (addr, terminating) in roster {
            self.upsert_one(*addr, *terminating, serving, now, &mut events);
        }
        self.compact_after_arrivals(before);
        let listed: HashSet<SocketAddr> = roster.iter().map(|(a, _)| *a).collect();
        let gone: Vec<SocketAddr> = self
            .endpoints
            .keys()
            .filter(|a| !listed.contains(a))
            .copied()
            .collect();
        for addr in gone {
            self.remove_one(addr, now, &mut events);
        }
        self.update_panic(&mut events);
        events
    }

    /// Some endpoint is `Healthy`: a newcomer joins a pool that is already serving.
    fn serving(&self) -> bool {
        self.endpoints.values().any(|e| e.state == State::Healthy)
    }

    fn upsert_one(
        &mut self,
        addr: SocketAddr,
        terminating: bool,
        serving: bool,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        // A newcomer to a pool that is already serving ramps up from now; the first roster of a
        // pool (nothing proven healthy yet) starts at full weight.
        let ep = self
            .endpoints
            .entry(addr)
            .or_insert_with(|| Endpoint::new(serving, now));
        match (ep.drain, terminating) {
            (None, true) => {
                ep.drain = Some((Drain::Terminating, ep.state));
                ep.set_state(addr, State::Draining, Reason::Terminating, now, events);
            }
            (Some((Drain::Removed, resume)), true) => {
                ep.drain = Some((Drain::Terminating, resume));
                ep.reason = Reason::Terminating;
            }
            (Some((_, resume)), false) => {
                ep.drain = None;
                ep.set_state(addr, resume, Reason::BackInRoster, now, events);
            }
            (None, false) | (Some((Drain::Terminating, _)), true) => {}
        }
    }

    /// A B-tree filled by inserting addresses in order splits every node it fills and leaves
    /// the left half behind: about half of each node is spare, some 240 bytes per endpoint.
    /// When a roster brought many endpoints at once (the first one, above all), rebuild the
    /// map from its sorted entries, which packs every node but the last. Contents and order
    /// are unchanged; a few arrivals are left to ordinary inserts.
    fn compact_after_arrivals(&mut self, before: usize) {
        let arrived = self.endpoints.len().saturating_sub(before);
        if arrived > 64 && arrived * 4 > self.endpoints.len() {
            self.endpoints = std::mem::take(&mut self.endpoints).into_iter().collect();
        }
    }

    /// The endpoint left the roster: it drains (never routed again) until [`Self::forget`].
    pub fn remove(&mut self, addr: SocketAddr, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        self.remove_one(addr, now, &mut events);
        self.update_panic(&mut events);
        events
    }

    fn remove_one(&mut self, addr: SocketAddr, now: Instant, events: &mut Vec<Event>) {
        let Some(ep) = self.endpoints.get_mut(&addr) else {
            return;
        };
        match ep.drain {
            None => {
                ep.drain = Some((Drain::Removed, ep.state));
                ep.set_state(
                    addr,
                    State::Draining,
                    Reason::RemovedFromRoster,
                    now,
                    events,
                );
            }
            Some((Drain::Terminating, resume)) => {
                ep.drain = Some((Drain::Removed, resume));
                ep.reason = Reason::RemovedFromRoster;
            }
            Some((Drain::Removed, _)) => {}
        }
    }
}
