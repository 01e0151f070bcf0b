//! Request successes handed over in a batch. The request path counts an endpoint's successes
//! in an atomic instead of sending each one (a message and a wake-up per request is what a busy
//! proxy cannot afford), and hands them over with the endpoint's next failure, which they
//! preceded, or at the next tick. `n` successes mean exactly what `n` calls of `record_request`
//! with a success would, at the moment they are handed over (a success can pass probation, make
//! an `Unknown` endpoint healthy with probes off, or flag an error rate still above its
//! threshold), so they are applied one by one: cheap next to the messages they save.

use std::net::SocketAddr;

use tokio::time::Instant;

use super::{Event, PoolHealth};
use crate::outcome::Verdict;

// === impl PoolHealth ===

impl PoolHealth {
    /// `n` request successes of `addr` in a row.
    pub fn record_successes(&mut self, addr: SocketAddr, n: u64, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        for _ in 0..n {
            events.extend(self.record_request(addr, Verdict::Success, "", now));
        }
        events
    }
}
