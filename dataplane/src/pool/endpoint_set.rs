//! The pool's endpoints by address: one pointer each in a hash set whose entries are found by
//! the address the endpoint already holds. A `HashMap<SocketAddr, Arc<Endpoint>>` kept a second
//! 32-byte copy of every address beside the pointer (about 67 bytes per endpoint with the table's
//! spare room, where this is about 15).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;

use super::endpoint::Endpoint;

#[derive(Default)]
pub(super) struct EndpointSet(HashSet<ByAddr>);

/// An endpoint as a set entry: equal, hashed and looked up by its address.
struct ByAddr(Arc<Endpoint>);

impl Borrow<SocketAddr> for ByAddr {
    fn borrow(&self) -> &SocketAddr {
        self.0.upstream.addr_ref()
    }
}

impl Hash for ByAddr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Borrow::<SocketAddr>::borrow(self).hash(state);
    }
}

impl PartialEq for ByAddr {
    fn eq(&self, other: &Self) -> bool {
        Borrow::<SocketAddr>::borrow(self) == Borrow::<SocketAddr>::borrow(other)
    }
}

impl Eq for ByAddr {}

impl EndpointSet {
    pub(super) fn get(&self, addr: &SocketAddr) -> Option<&Arc<Endpoint>> {
        self.0.get(addr).map(|entry| &entry.0)
    }

    #[cfg(test)]
    pub(super) fn contains_key(&self, addr: &SocketAddr) -> bool {
        self.0.contains(addr)
    }

    /// Add the endpoint `make` makes for `addr` unless there is one: `true` when added.
    pub(super) fn add_with(&mut self, addr: SocketAddr, make: impl FnOnce() -> Endpoint) -> bool {
        if self.0.contains(&addr) {
            return false;
        }
        let endpoint = make();
        debug_assert_eq!(endpoint.addr(), addr);
        self.0.insert(ByAddr(Arc::new(endpoint)))
    }

    pub(super) fn remove(&mut self, addr: &SocketAddr) -> Option<Arc<Endpoint>> {
        self.0.take(addr).map(|entry| entry.0)
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &SocketAddr> + '_ {
        self.0.iter().map(Borrow::borrow)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Arc<Endpoint>> + '_ {
        self.0.iter().map(|entry| &entry.0)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::config::EndpointConfig;
    use crate::metrics::Metrics;
    use crate::pool::Tuning;
    use crate::pool::endpoint::PoolSeries;
    use crate::upstream::IdleConnections;

    fn endpoint(addr: SocketAddr) -> Endpoint {
        let config = EndpointConfig {
            address: addr,
            zone: None,
            weight: 1,
            terminating: false,
        };
        Endpoint::new(
            &PoolSeries::new(&Arc::from("shop/web"), &Metrics::new().unwrap()),
            &config,
            None,
            false,
            &Tuning::default(),
            &IdleConnections::new(4),
            Instant::now(),
        )
    }

    #[test]
    fn endpoints_are_found_kept_and_removed_by_address() {
        let a: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let b: SocketAddr = "[fd00::1]:80".parse().unwrap();
        let mut set = EndpointSet::default();
        assert!(set.add_with(a, || endpoint(a)));
        let first = Arc::clone(set.get(&a).unwrap());
        assert!(
            !set.add_with(a, || panic!("made twice")),
            "the same address is not added twice"
        );
        assert!(
            Arc::ptr_eq(&first, set.get(&a).unwrap()),
            "the endpoint that stays is kept"
        );
        assert!(set.add_with(b, || endpoint(b)));
        assert_eq!(set.len(), 2);
        assert!(set.contains_key(&b));
        let mut keys: Vec<SocketAddr> = set.keys().copied().collect();
        keys.sort();
        assert_eq!(keys, vec![a, b]);
        assert_eq!(set.get(&b).map(|e| e.addr()), Some(b));
        assert!(set.remove(&a).is_some_and(|e| Arc::ptr_eq(&e, &first)));
        assert!(set.get(&a).is_none());
        assert!(set.remove(&a).is_none());
        assert_eq!(set.values().count(), 1);
    }
}
