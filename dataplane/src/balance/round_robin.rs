//! Smooth weighted round robin, nginx's algorithm: every pick adds each peer's weight to its
//! running score, the highest score wins and gives back the sum of the weights. Over one cycle
//! every peer gets exactly its weight's worth of picks, spread out rather than in runs (weights
//! 5, 1, 1 give a a b a c a a). Skipped peers (already tried by this request, or over their
//! share cap) neither gain nor pay this round.
//!
//! The scores live with the pool's per-endpoint state (`ShareTracker`), not in the selector:
//! the pool rebuilds its selector on every health tick, and a rotation that restarted from zero
//! each time would send a quiet pool's every request to the same first peer. The lock only
//! keeps one selector's picks from interleaving; a pick is O(endpoints).

use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::Mutex;

/// Effective weights are fractional (slow start); scores are integers in these units so the
/// cycle is exact.
const WEIGHT_UNITS: f64 = 1000.0;

#[derive(Debug)]
pub(crate) struct SmoothRoundRobin {
    weights: Vec<i64>,
    lock: Mutex<()>,
}

// === impl SmoothRoundRobin ===

impl SmoothRoundRobin {
    pub(crate) fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let weights = weights
            .into_iter()
            .map(|w| (w * WEIGHT_UNITS).round().max(1.0) as i64)
            .collect();
        Self {
            weights,
            lock: Mutex::new(()),
        }
    }

    /// The next peer among those `skip` lets through, or `None` when it skips them all.
    /// `score(i)` is peer `i`'s running score.
    pub(crate) fn next<'a>(
        &self,
        score: impl Fn(usize) -> &'a AtomicI64,
        skip: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let _turn = self.lock.lock();
        let mut total = 0;
        let mut best: Option<(usize, i64)> = None;
        for (i, weight) in self.weights.iter().enumerate() {
            if skip(i) {
                continue;
            }
            let current = score(i).fetch_add(*weight, Ordering::Relaxed) + weight;
            total += weight;
            // Strictly greater: on a tie the earlier peer wins, as in nginx.
            if best.is_none_or(|(_, top)| current > top) {
                best = Some((i, current));
            }
        }
        let (best, _) = best?;
        score(best).fetch_sub(total, Ordering::Relaxed);
        Some(best)
    }
}

#[cfg(test)]
mod tests;
