//! When a leaving endpoint is done: pure, with the clock and the in-flight counts passed in.
//! One owner (the pool's) starts, cancels and finishes drains in turn, so an endpoint that comes
//! back to the roster while its drain is finishing cannot be removed after its return.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

/// Endpoints draining after they left the roster, with when each started.
#[derive(Debug, Default)]
pub struct EndpointDrains {
    leaving: HashMap<SocketAddr, Instant>,
}

/// A drain that is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drained {
    pub addr: SocketAddr,
    /// Requests still in flight, cut by the drain timeout (0 when it ended on its own).
    pub cut: u64,
}

impl EndpointDrains {
    /// `addr` left the roster; `true` when this starts its drain (not already draining).
    pub fn start(&mut self, addr: SocketAddr, now: Instant) -> bool {
        let mut started = false;
        self.leaving.entry(addr).or_insert_with(|| {
            started = true;
            now
        });
        started
    }

    /// `addr` is back in the roster; `true` when it was draining.
    pub fn cancel(&mut self, addr: SocketAddr) -> bool {
        self.leaving.remove(&addr).is_some()
    }

    pub fn is_draining(&self, addr: SocketAddr) -> bool {
        self.leaving.contains_key(&addr)
    }

    pub fn len(&self) -> usize {
        self.leaving.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leaving.is_empty()
    }

    /// Take out the drains that are over at `now`: nothing in flight, or `timeout` passed.
    pub fn finished(
        &mut self,
        now: Instant,
        timeout: Duration,
        in_flight: impl Fn(SocketAddr) -> u64,
    ) -> Vec<Drained> {
        let mut done = Vec::new();
        self.leaving.retain(|addr, since| {
            let busy = in_flight(*addr);
            let expired = now.saturating_duration_since(*since) >= timeout;
            if busy == 0 || expired {
                done.push(Drained {
                    addr: *addr,
                    cut: busy,
                });
                false
            } else {
                true
            }
        });
        done.sort_by_key(|d| d.addr);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(n: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, n], 80))
    }

    const TIMEOUT: Duration = Duration::from_secs(30);

    #[test]
    fn an_idle_endpoint_is_done_at_once_a_busy_one_at_its_timeout() {
        let t0 = Instant::now();
        let mut drains = EndpointDrains::default();
        assert!(drains.start(addr(1), t0));
        assert!(drains.start(addr(2), t0));
        let busy = |a: SocketAddr| u64::from(a == addr(2)) * 3;
        assert_eq!(
            drains.finished(t0, TIMEOUT, busy),
            vec![Drained {
                addr: addr(1),
                cut: 0
            }]
        );
        assert!(drains.finished(t0 + TIMEOUT / 2, TIMEOUT, busy).is_empty());
        assert_eq!(
            drains.finished(t0 + TIMEOUT, TIMEOUT, busy),
            vec![Drained {
                addr: addr(2),
                cut: 3
            }]
        );
        assert!(drains.is_empty());
    }

    #[test]
    fn a_drain_keeps_its_start_and_a_return_cancels_it() {
        let t0 = Instant::now();
        let mut drains = EndpointDrains::default();
        assert!(drains.start(addr(1), t0));
        assert!(!drains.start(addr(1), t0 + TIMEOUT / 2), "already draining");
        assert!(drains.cancel(addr(1)));
        assert!(!drains.cancel(addr(1)));
        assert!(drains.finished(t0 + TIMEOUT, TIMEOUT, |_| 1).is_empty());
    }
}
