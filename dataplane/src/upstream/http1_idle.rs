//! Idle HTTP/1.1 keep-alive connections of one pool, shared by its endpoints, with a pool-wide
//! budget (nginx's `keepalive N`): past it, the connection idle longest, to whichever endpoint,
//! is closed. An idle connection holds hyper's read and write buffers and its request channel
//! (~38 KB measured, `bench/memory.sh`), so without a budget a pool of thousands of endpoints
//! kept one or more per endpoint for the idle timeout: 140 MB after a minute of traffic.
//! Per endpoint, a stack: most recently used on top, so a burst reuses warm connections and the
//! cold ones at the bottom are the first to go. The lock is the pool's and is never held across
//! an await (dropping a sender under it only tells its connection's task to close).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use hyper::client::conn::http1;
use parking_lot::Mutex;
use prometheus::IntCounter;
use tokio::time::Instant;

use super::direct::DirectConn;
use super::{KeepAlive, ProxyBody};
use crate::poll_clock;

/// Idle connections a pool keeps by default, over all its endpoints (Envoy's default
/// `max_connections` per cluster is the same figure).
pub const DEFAULT_MAX_IDLE_PER_POOL: usize = 1024;
/// Idle connections kept per endpoint; more are closed when they come back.
const MAX_IDLE_PER_ENDPOINT: usize = 256;
/// The longest one checkout waits for a popped connection to turn ready, over all it pops. The
/// wait it is for lasts one turn of the connection's task (microseconds; a few milliseconds on
/// a thread busy with other requests), so this bounds what a connection that cannot be used
/// costs the request that pops it: far below a connect timeout, where the old per-connection
/// wait of a whole connect timeout let k such connections cost k of them.
pub(super) const READY_WAIT: Duration = Duration::from_millis(20);

type Sender = http1::SendRequest<ProxyBody>;

/// An idle connection: hyper's (its task watches it) or the sidecar's own (asked whether it is
/// still usable when it is taken or checked).
pub(super) enum IdleConn {
    Hyper(Sender),
    Direct(DirectConn),
}

impl IdleConn {
    /// The endpoint has closed it (or, for the sidecar's own, sent something unasked).
    fn is_closed(&self) -> bool {
        match self {
            IdleConn::Hyper(tx) => tx.is_closed(),
            IdleConn::Direct(conn) => !conn.is_usable(),
        }
    }
}

/// The idle connections of one pool. It also carries the pool's HTTP/2 keep-alive, which every
/// endpoint's new connections get: kept here once per pool, not once per endpoint.
pub struct IdleConnections {
    max_idle: usize,
    keepalive: KeepAlive,
    /// Counts connections closed to stay within `max_idle`.
    evictions: Option<IntCounter>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Numbers the connections in the order they went idle.
    next_seq: u64,
    /// Per endpoint (by the slot of its `IdleKey`), oldest first.
    stacks: Vec<Stack>,
    /// Slots of endpoints that are gone, for the next new one.
    free: Vec<usize>,
    /// Idle connections held, over every stack.
    count: usize,
    /// (seq, slot) of every connection that went idle, oldest first, for finding the one idle
    /// longest without a search. Entries of connections that left the stacks since (checked
    /// out, expired, cleared) are skipped when they reach the front, and dropped in bulk when
    /// they outnumber the live ones (`compact`), so it stays O(count).
    order: VecDeque<(u64, usize)>,
}

/// One endpoint's idle connections, made when its first one goes idle: most endpoints of a
/// wide pool never get a connection from this sidecar, and an empty `VecDeque` in the pool's
/// table is 32 bytes each where this is 8.
#[derive(Default)]
#[allow(clippy::box_collection)] // the box is the point
struct Stack(Option<Box<VecDeque<Idle>>>);

struct Idle {
    seq: u64,
    since: Instant,
    tx: IdleConn,
}

/// One endpoint's share of its pool's idle connections.
pub(super) struct IdleKey {
    set: Arc<IdleConnections>,
    slot: usize,
}

// === impl IdleConnections ===

impl IdleConnections {
    /// A pool's idle set keeping at most `max_idle` connections (at least one).
    pub fn new(max_idle: usize) -> Arc<Self> {
        Self::counted(max_idle, None, KeepAlive::default())
    }

    /// The same, counting the connections closed to stay within the budget in `evictions`.
    /// The pool's endpoints' new HTTP/2 connections get `keepalive`.
    pub fn counted(
        max_idle: usize,
        evictions: Option<IntCounter>,
        keepalive: KeepAlive,
    ) -> Arc<Self> {
        Arc::new(Self {
            max_idle: max_idle.max(1),
            keepalive,
            evictions,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// A key for a new endpoint of the pool.
    pub(super) fn key(self: &Arc<Self>) -> IdleKey {
        let mut inner = self.inner.lock();
        let slot = match inner.free.pop() {
            Some(slot) => slot,
            None => {
                inner.stacks.push(Stack::default());
                inner.stacks.len() - 1
            }
        };
        IdleKey {
            set: Arc::clone(self),
            slot,
        }
    }

    /// Idle connections held now, over every endpoint.
    pub fn len(&self) -> usize {
        self.inner.lock().count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Close connections idle for longer than `max_idle` and ones their endpoint closed.
    pub fn expire(&self, max_idle: Duration, now: Instant) {
        let mut inner = self.inner.lock();
        for stack in inner.stacks.iter_mut().filter_map(|s| s.0.as_deref_mut()) {
            stack.retain(|idle| {
                !idle.tx.is_closed() && now.saturating_duration_since(idle.since) < max_idle
            });
        }
        inner.count = inner.stacks.iter().map(Stack::len).sum();
        inner.compact();
    }
}

impl Inner {
    /// Close the pool's oldest idle connection.
    fn close_oldest(&mut self) {
        while let Some((seq, slot)) = self.order.pop_front() {
            // Every entry older than this one has left `order`, so a live connection with this
            // number is the oldest of its stack.
            let Some(stack) = self.stacks[slot].0.as_deref_mut() else {
                continue;
            };
            if stack.front().is_some_and(|idle| idle.seq == seq) {
                stack.pop_front();
                self.count -= 1;
                return;
            }
        }
    }

    /// Close the idle connections of the endpoint in `slot`.
    fn clear(&mut self, slot: usize) {
        let cleared = std::mem::take(&mut self.stacks[slot]);
        self.count -= cleared.len();
        self.compact();
    }

    /// Drop `order`'s entries of connections no longer idle once they outnumber the live ones.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.count + 64 {
            return;
        }
        let mut live: Vec<(u64, usize)> = self
            .stacks
            .iter()
            .enumerate()
            .filter_map(|(slot, stack)| Some((slot, stack.0.as_deref()?)))
            .flat_map(|(slot, stack)| stack.iter().map(move |idle| (idle.seq, slot)))
            .collect();
        live.sort_unstable();
        self.order = live.into();
    }
}

// === impl Stack ===

impl Stack {
    fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |stack| stack.len())
    }
}

// === impl IdleKey ===

impl IdleKey {
    /// A live idle connection of this endpoint, if any, waiting at most `wait` in all, however
    /// many connections are popped. A connection comes back the moment its response body ends,
    /// a hair before its task marks it ready for the next request: that instant is worth a
    /// wait, so a popped connection that is not ready yet gets what is left of `wait` (pass
    /// [`READY_WAIT`] or less). One still not ready then cannot be used now (it is still writing
    /// an upload its endpoint answered early, and the rest is not coming or not taken) and
    /// leaves the pool; a dead one fails `ready` at once; the next is tried, and once the time
    /// is spent only connections ready that instant are taken.
    /// The sidecar's own connections are ready whenever they are idle: only whether the
    /// endpoint closed them is asked.
    pub(super) async fn checkout(&self, wait: Duration) -> Option<IdleConn> {
        // Read the clock only when a connection has to be waited for.
        let mut deadline = None;
        loop {
            let idle = self.pop_newest()?;
            if idle.is_closed() {
                continue;
            }
            let mut tx = match idle {
                IdleConn::Hyper(tx) => tx,
                direct @ IdleConn::Direct(_) => return Some(direct),
            };
            if tx.is_ready() {
                return Some(IdleConn::Hyper(tx));
            }
            let deadline = *deadline.get_or_insert_with(|| poll_clock::now() + wait);
            if let Ok(Ok(())) = tokio::time::timeout_at(deadline, tx.ready()).await {
                return Some(IdleConn::Hyper(tx));
            }
        }
    }

    fn pop_newest(&self) -> Option<IdleConn> {
        let mut inner = self.set.inner.lock();
        let idle = inner.stacks[self.slot].0.as_deref_mut()?.pop_back()?;
        inner.count -= 1;
        Some(idle.tx)
    }

    /// Keep a connection whose response ended for the next request. Past the endpoint's or
    /// the pool's budget, the oldest idle connection (this endpoint's, resp. the pool's) is
    /// closed to make room.
    pub(super) fn put(&self, tx: IdleConn, now: Instant) {
        if tx.is_closed() {
            return;
        }
        let mut guard = self.set.inner.lock();
        let inner = &mut *guard;
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let stack = inner.stacks[self.slot].0.get_or_insert_default();
        if stack.len() >= MAX_IDLE_PER_ENDPOINT {
            stack.pop_front();
            inner.count -= 1;
        }
        stack.push_back(Idle {
            seq,
            since: now,
            tx,
        });
        inner.count += 1;
        inner.order.push_back((seq, self.slot));
        if inner.count > self.set.max_idle {
            inner.close_oldest();
            if let Some(evictions) = &self.set.evictions {
                evictions.inc();
            }
        }
        inner.compact();
    }

    /// The pool's HTTP/2 keep-alive.
    pub(super) fn keepalive(&self) -> KeepAlive {
        self.set.keepalive
    }

    /// Close this endpoint's idle connections.
    pub(super) fn clear(&self) {
        self.set.inner.lock().clear(self.slot);
    }

    /// This endpoint's idle connections.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.set.inner.lock().stacks[self.slot].len()
    }
}

impl Drop for IdleKey {
    /// An endpoint that is gone keeps no idle connections in its pool's budget, and its slot
    /// goes to the next new endpoint.
    fn drop(&mut self) {
        let mut inner = self.set.inner.lock();
        inner.clear(self.slot);
        inner.free.push(self.slot);
    }
}

#[cfg(test)]
#[path = "http1_idle_tests.rs"]
mod tests;
