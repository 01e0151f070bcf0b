//! The health machine's endpoint records, one per address, in address order: one vector
//! searched by halving, not a B-tree. A pool's records are most of an idle sidecar's memory
//! with a wide pool; a B-tree filled by inserts keeps about half of each node spare, and
//! packing it afterwards (or building it packed) needs a second full copy for a moment, which
//! the allocator keeps resident after it is freed. Here a first roster's records become the
//! table as they are, and later arrivals are merged in one pass.
//!
//! Forgetting an endpoint leaves its slot vacant (a drained pool is forgotten one endpoint at
//! a time, and closing each gap at once would move the whole tail every time); the vacant
//! slots go when they outnumber the live ones (and number more than 16) or at the next merge.
//! An address whose slot is vacant comes back into it.

use std::net::SocketAddr;

use super::endpoint::Endpoint;

/// Vacant slots tolerated before a sweep, whatever the table's size.
const SWEEP_AFTER: usize = 16;

#[derive(Clone, Debug, Default)]
pub(super) struct EndpointTable {
    /// Sorted by address, each address once; `None` is a forgotten endpoint's slot.
    slots: Vec<(SocketAddr, Option<Endpoint>)>,
    vacant: usize,
}

impl EndpointTable {
    pub fn len(&self) -> usize {
        self.slots.len() - self.vacant
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn find(&self, addr: &SocketAddr) -> Result<usize, usize> {
        self.slots.binary_search_by(|(a, _)| a.cmp(addr))
    }

    pub fn get(&self, addr: &SocketAddr) -> Option<&Endpoint> {
        let i = self.find(addr).ok()?;
        self.slots[i].1.as_ref()
    }

    pub fn get_mut(&mut self, addr: &SocketAddr) -> Option<&mut Endpoint> {
        let i = self.find(addr).ok()?;
        self.slots[i].1.as_mut()
    }

    /// The record of `addr`, made with `make` if it has none: in its vacant slot if it had
    /// one, else inserted in place (one move of the tail; a whole roster uses
    /// [`Self::merge`]).
    pub fn get_or_insert_with(
        &mut self,
        addr: SocketAddr,
        make: impl FnOnce() -> Endpoint,
    ) -> &mut Endpoint {
        let i = match self.find(&addr) {
            Ok(i) => {
                if self.slots[i].1.is_none() {
                    self.vacant -= 1;
                }
                i
            }
            Err(i) => {
                // Exactly one more: doubling would leave up to a table's worth spare.
                self.slots.reserve_exact(1);
                self.slots.insert(i, (addr, None));
                i
            }
        };
        self.slots[i].1.get_or_insert_with(make)
    }

    /// Whether `addr` has a slot, live or vacant (so that [`Self::get_or_insert_with`] finds
    /// it without moving anything).
    pub fn has_slot(&self, addr: &SocketAddr) -> bool {
        self.find(addr).is_ok()
    }

    /// Add records for addresses that have no slot, sorted by address and each once (the
    /// caller's guarantee; checked in debug builds). In place, from the back: vacant slots are
    /// dropped first, the table grows by exactly the arrivals (no second copy of it, however
    /// few arrive), and each record moves once.
    pub fn merge(&mut self, mut arrivals: Vec<(SocketAddr, Option<Endpoint>)>) {
        debug_assert!(arrivals.windows(2).all(|w| w[0].0 < w[1].0));
        debug_assert!(arrivals.iter().all(|(a, _)| !self.has_slot(a)));
        if arrivals.is_empty() {
            return;
        }
        if self.slots.is_empty() {
            self.slots = arrivals;
            self.vacant = self.slots.iter().filter(|(_, e)| e.is_none()).count();
            return;
        }
        if self.vacant > 0 {
            self.slots.retain(|(_, e)| e.is_some());
        }
        let mut old = self.slots.len();
        let mut end = old + arrivals.len();
        self.slots.reserve_exact(arrivals.len());
        // Placeholders to be overwritten; below `end`, `old..end` always holds placeholders.
        self.slots
            .extend(arrivals.iter().map(|(addr, _)| (*addr, None)));
        while let Some(arrival) = arrivals.pop() {
            while old > 0 && self.slots[old - 1].0 > arrival.0 {
                self.slots.swap(old - 1, end - 1);
                old -= 1;
                end -= 1;
            }
            self.slots[end - 1] = arrival;
            end -= 1;
        }
        self.vacant = self.slots.iter().filter(|(_, e)| e.is_none()).count();
    }

    /// Forget `addr`'s record; its slot stays, vacant, until the next sweep.
    pub fn remove(&mut self, addr: &SocketAddr) -> Option<Endpoint> {
        let i = self.find(addr).ok()?;
        let gone = self.slots[i].1.take()?;
        self.vacant += 1;
        if self.vacant > SWEEP_AFTER && self.vacant > self.len() {
            self.sweep();
        }
        Some(gone)
    }

    fn sweep(&mut self) {
        self.slots.retain(|(_, e)| e.is_some());
        self.slots.shrink_to_fit();
        self.vacant = 0;
    }

    /// Every record, in address order.
    pub fn iter(&self) -> impl Iterator<Item = (&SocketAddr, &Endpoint)> {
        self.slots
            .iter()
            .filter_map(|(a, e)| e.as_ref().map(|e| (a, e)))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&SocketAddr, &mut Endpoint)> {
        self.slots
            .iter_mut()
            .filter_map(|(a, e)| e.as_mut().map(|e| (&*a, e)))
    }

    pub fn values(&self) -> impl Iterator<Item = &Endpoint> {
        self.slots.iter().filter_map(|(_, e)| e.as_ref())
    }

    #[cfg(test)]
    fn slot_count(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    fn addr(n: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, (n >> 8) as u8, n as u8], 8080))
    }

    fn record() -> Endpoint {
        Endpoint::new(false, Instant::now())
    }

    fn keys(table: &EndpointTable) -> Vec<SocketAddr> {
        table.iter().map(|(a, _)| *a).collect()
    }

    #[test]
    fn merges_keep_address_order_and_size_the_table_exactly() {
        let mut table = EndpointTable::default();
        table.merge((0..10).map(|n| (addr(n * 2), Some(record()))).collect());
        assert_eq!(table.len(), 10);
        table.merge((0..10).map(|n| (addr(n * 2 + 1), Some(record()))).collect());
        assert_eq!(keys(&table), (0..20).map(addr).collect::<Vec<_>>());
        assert_eq!(
            table.slots.capacity(),
            20,
            "no spare capacity after a merge"
        );
        assert!(table.get(&addr(7)).is_some());
        assert!(table.get(&addr(20)).is_none());
    }

    #[test]
    fn forgotten_slots_are_reused_by_their_address_and_swept_when_they_outnumber_the_rest() {
        let mut table = EndpointTable::default();
        table.merge((0..100).map(|n| (addr(n), Some(record()))).collect());
        assert!(table.remove(&addr(5)).is_some());
        assert!(table.remove(&addr(5)).is_none(), "forgotten once");
        assert_eq!(table.len(), 99);
        assert!(table.get(&addr(5)).is_none());
        assert!(table.has_slot(&addr(5)), "the slot stays until a sweep");
        assert_eq!(table.slot_count(), 100);
        table.get_or_insert_with(addr(5), record);
        assert_eq!(table.len(), 100);
        assert_eq!(table.slot_count(), 100, "back in its own slot");

        for n in 0..50 {
            table.remove(&addr(n));
        }
        assert_eq!(table.slot_count(), 100, "half vacant: not yet swept");
        table.remove(&addr(50));
        assert_eq!(
            table.slot_count(),
            49,
            "swept once vacant slots outnumber live ones"
        );
        assert_eq!(keys(&table), (51..100).map(addr).collect::<Vec<_>>());
    }

    #[test]
    fn a_few_arrivals_grow_the_table_by_exactly_them() {
        let mut table = EndpointTable::default();
        table.merge((0..50).map(|n| (addr(n * 2), Some(record()))).collect());
        let before = table.slots.capacity();
        table.merge(vec![(addr(41), Some(record()))]);
        assert_eq!(table.slots.capacity(), before + 1);
        table.merge(vec![(addr(1), Some(record())), (addr(200), Some(record()))]);
        assert_eq!(table.slots.capacity(), before + 3);
        let mut expected: Vec<SocketAddr> = (0..50).map(|n| addr(n * 2)).collect();
        expected.extend([addr(1), addr(41), addr(200)]);
        expected.sort();
        assert_eq!(keys(&table), expected);
        assert_eq!(table.len(), 53);
    }

    #[test]
    fn merging_into_a_table_of_vacant_slots_and_after_a_sweep() {
        let mut table = EndpointTable::default();
        table.merge((0..40).map(|n| (addr(n), Some(record()))).collect());
        for n in 0..40 {
            table.remove(&addr(n));
        }
        assert_eq!(table.len(), 0);
        assert!(table.is_empty());
        table.merge(vec![(addr(100), Some(record()))]);
        assert_eq!(keys(&table), vec![addr(100)]);
        assert_eq!(table.slot_count(), 1, "the swept and vacant slots are gone");
        table.get_or_insert_with(addr(5), record);
        table.merge(vec![(addr(3), Some(record())), (addr(7), Some(record()))]);
        assert_eq!(keys(&table), vec![addr(3), addr(5), addr(7), addr(100)]);
    }

    #[test]
    fn a_merge_drops_vacant_slots_and_single_inserts_land_in_order() {
        let mut table = EndpointTable::default();
        table.merge((0..10).map(|n| (addr(n * 10), Some(record()))).collect());
        table.remove(&addr(30));
        table.get_or_insert_with(addr(15), record);
        assert_eq!(table.slot_count(), 11);
        table.merge(vec![(addr(1), Some(record())), (addr(99), Some(record()))]);
        assert_eq!(
            table.slot_count(),
            12,
            "the vacant slot went with the merge"
        );
        let expected: Vec<SocketAddr> = [0, 1, 10, 15, 20, 40, 50, 60, 70, 80, 90, 99]
            .into_iter()
            .map(addr)
            .collect();
        assert_eq!(keys(&table), expected);
        let mut seen = 0;
        for (_, ep) in table.iter_mut() {
            ep.probe_ok += 1;
            seen += 1;
        }
        assert_eq!(seen, 12);
        assert!(table.values().all(|ep| ep.probe_ok == 1));
    }
}
