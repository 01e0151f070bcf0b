//! Roster changes in the health machine: endpoints joining (a newcomer to a serving pool ramps
//! up from the moment it joins), turning `terminating`, leaving and coming back. A whole roster
//! applies in one pass with one panic evaluation, however large it is.

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
    /// one removed. One pass, and one panic evaluation, however large the roster. Endpoints
    /// the table has a slot for are updated in roster order; newcomers are made in address
    /// order and merged in at once (an address listed twice is joined twice, in roster order).
    pub fn apply_roster(&mut self, roster: &[(SocketAddr, bool)], now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        let serving = self.serving();
        let mut arriving: Vec<usize> = Vec::new();
        for (i, (addr, terminating)) in roster.iter().enumerate() {
            if self.endpoints.has_slot(addr) {
                self.upsert_one(*addr, *terminating, serving, now, &mut events);
            } else {
                arriving.push(i);
            }
        }
        arriving.sort_unstable_by_key(|&i| (roster[i].0, i));
        let distinct = arriving
            .windows(2)
            .filter(|w| roster[w[0]].0 != roster[w[1]].0)
            .count()
            + usize::from(!arriving.is_empty());
        let mut arrivals: Vec<(SocketAddr, Option<Endpoint>)> = Vec::with_capacity(distinct);
        for i in arriving {
            let (addr, terminating) = roster[i];
            if arrivals.last().is_none_or(|(last, _)| *last != addr) {
                arrivals.push((addr, None));
            }
            if let Some((_, slot)) = arrivals.last_mut() {
                let ep = slot.get_or_insert_with(|| Endpoint::new(serving, now));
                join(ep, addr, terminating, now, &mut events);
            }
        }
        self.endpoints.merge(arrivals);

        let mut listed: Vec<SocketAddr> = roster.iter().map(|(a, _)| *a).collect();
        listed.sort_unstable();
        let gone: Vec<SocketAddr> = self
            .endpoints
            .iter()
            .map(|(a, _)| *a)
            .filter(|a| listed.binary_search(a).is_err())
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
        let ep = self
            .endpoints
            .get_or_insert_with(addr, || Endpoint::new(serving, now));
        join(ep, addr, terminating, now, events);
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

/// `ep` is listed in the roster, `terminating` or not. A newcomer to a pool that is already
/// serving ramps up from now (`Endpoint::new`'s `ramp`); the first roster of a pool (nothing
/// proven healthy yet) starts at full weight.
fn join(
    ep: &mut Endpoint,
    addr: SocketAddr,
    terminating: bool,
    now: Instant,
    events: &mut Vec<Event>,
) {
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
