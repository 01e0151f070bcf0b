//! Recent picks per endpoint and in total over a short sliding window, so a selector can hold
//! every endpoint to a multiple of its fair share. One `ShareTracker` belongs to a pool and
//! outlives the selectors built over it: it keeps the pool's total window, the round-robin
//! cursor (so the rotation continues across rebuilds) and the last hash ring, since the pool
//! rebuilds on every health tick and a ring of tens of thousands of points is worth reusing
//! while the endpoints and weights stay the same. Each endpoint's own window lives in its
//! `EndpointLoad`, which stays with the endpoint for as long as it is in the pool, so a rebuild
//! finds it without a lookup and an endpoint costs no map entry here.
//!
//! A window is a few time buckets, each one `AtomicU64` packing the bucket's tick with its
//! count, so recording a pick is one compare-exchange per counter and reading is a few loads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::ring::Ring;

/// How far back picks are counted by default.
pub const DEFAULT_SHARE_WINDOW: Duration = Duration::from_secs(2);

/// Buckets per window: the window slides in steps of `window / BUCKETS`.
const BUCKETS: u64 = 4;

/// Low bits of a bucket word hold the count, high bits the tick.
const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// Recent picks of one pool in total, and what its selectors share across rebuilds.
#[derive(Debug)]
pub struct ShareTracker {
    epoch: Instant,
    bucket_ms: u64,
    total: PickWindow,
    ring: Mutex<Option<CachedRing>>,
    /// Where round robin is in its cycle.
    round_robin: AtomicU64,
}

/// A ring and the `(address, effective weight)` list it was built from.
type CachedRing = (Vec<(SocketAddr, f64)>, Arc<Ring>);

/// Picks counted in time buckets; see the module header.
#[derive(Debug, Default)]
pub struct PickWindow {
    buckets: [AtomicU64; BUCKETS as usize],
}

// === impl ShareTracker ===

impl ShareTracker {
    /// A tracker over [`DEFAULT_SHARE_WINDOW`].
    pub fn new(now: Instant) -> Self {
        Self::with_window(DEFAULT_SHARE_WINDOW, now)
    }

    /// A tracker over `window` (at least a few milliseconds).
    pub fn with_window(window: Duration, now: Instant) -> Self {
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        Self {
            epoch: now,
            bucket_ms: (window_ms / BUCKETS).max(1),
            total: PickWindow::default(),
            ring: Mutex::new(None),
            round_robin: AtomicU64::new(0),
        }
    }

    /// Picks of every endpoint in the window ending at `now`.
    pub fn recent_total(&self, now: Instant) -> u64 {
        self.total.recent(self.tick(now))
    }

    /// Picks of one endpoint (its window, kept in its `EndpointLoad`) in the window ending at
    /// `now`.
    pub fn recent_picks(&self, picks: &PickWindow, now: Instant) -> u64 {
        picks.recent(self.tick(now))
    }

    /// The ring over `endpoints` (`(address, effective weight)` in candidate order): the last
    /// one when nothing changed, a new one otherwise.
    pub(crate) fn ring(&self, endpoints: Vec<(SocketAddr, f64)>) -> Arc<Ring> {
        let mut cached = self.ring.lock();
        if let Some((built_from, ring)) = cached.as_ref()
            && *built_from == endpoints
        {
            return Arc::clone(ring);
        }
        let ring = Arc::new(Ring::new(&endpoints));
        *cached = Some((endpoints, Arc::clone(&ring)));
        ring
    }

    /// Round robin's cursor, shared by every selector built over this tracker.
    pub(crate) fn round_robin_cursor(&self) -> &AtomicU64 {
        &self.round_robin
    }

    pub(crate) fn tick(&self, now: Instant) -> u64 {
        let ms = u64::try_from(now.saturating_duration_since(self.epoch).as_millis())
            .unwrap_or(u64::MAX);
        ms / self.bucket_ms
    }

    pub(crate) fn total_at(&self, tick: u64) -> u64 {
        self.total.recent(tick)
    }

    /// Count one pick of `endpoint`.
    pub(crate) fn record(&self, endpoint: &PickWindow, tick: u64) {
        endpoint.add(tick);
        self.total.add(tick);
    }
}

// === impl PickWindow ===

impl PickWindow {
    /// Picks in the buckets of the last `BUCKETS` ticks (the current one included).
    pub(crate) fn recent(&self, tick: u64) -> u64 {
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Acquire))
            .filter(|&word| tick.saturating_sub(word >> COUNT_BITS) < BUCKETS)
            .map(|word| word & COUNT_MASK)
            .sum()
    }

    fn add(&self, tick: u64) {
        let bucket = &self.buckets[(tick % BUCKETS) as usize];
        let mut current = bucket.load(Ordering::Acquire);
        loop {
            let stored = current >> COUNT_BITS;
            let next = if stored < tick {
                (tick << COUNT_BITS) | 1
            } else {
                // Same tick, or a newer one already owns this bucket (a caller with a slightly
                // older `now`): count the pick there rather than lose it. Saturate rather than
                // carry into the tick (16 M picks per bucket is far away).
                current + u64::from(current & COUNT_MASK < COUNT_MASK)
            };
            match bucket.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests;
