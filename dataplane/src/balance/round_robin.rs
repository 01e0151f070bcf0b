//! Smooth weighted round robin without a lock. The order of one whole cycle is computed when the
//! selector is built (off the request path, by the pool's owner), and a pick is one atomic step
//! of the pool's cursor through it: O(1), whatever the number of endpoints.
//!
//! The cycle is nginx's smooth order (weights 5, 1, 1 give a a b a c a a): every step adds each
//! peer's weight to its running score, the highest score wins and gives back the sum. Over one
//! cycle every peer gets exactly its weight's worth of picks, spread out rather than in runs.
//! Building it costs O(cycle × peers), so for large pools whose weights differ the cycle is built
//! earliest-deadline-first instead (Envoy's weighted round robin): the same picks per cycle, in
//! O(cycle × log peers), interleaved a little less evenly. Equal weights give `0, 1, …, n-1`
//! either way.
//!
//! The cursor belongs to the pool (`ShareTracker`), not the selector: the pool rebuilds its
//! selector on every health change, and a rotation that restarted from zero each time would send
//! a quiet pool's every request to the same first peer. A pick that must skip peers (already
//! tried by this request, or over their share cap) walks on to the next allowed one and moves the
//! cursor past what it skipped, unless another pick moved it first.

use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Effective weights are fractional (slow start); they are turned into integers in these units
/// (then divided by their greatest common divisor) so the cycle is exact.
const WEIGHT_UNITS: f64 = 1000.0;

/// Longest cycle kept; longer ones are scaled down (proportions kept to within one pick).
const MAX_CYCLE: u64 = 65_536;

/// Above this many score updates the cycle is built earliest-deadline-first.
const SMOOTH_WORK: u64 = 1 << 22;

/// One cycle of peer indices.
#[derive(Debug)]
pub(crate) struct Schedule {
    order: Vec<u32>,
}

// === impl Schedule ===

impl Schedule {
    pub(crate) fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let weights = integer_weights(weights);
        let peers = weights.len() as u64;
        let cycle: u64 = weights.iter().sum();
        let order = if weights.windows(2).all(|w| w[0] == w[1]) {
            (0..weights.len())
                .filter_map(|i| u32::try_from(i).ok())
                .collect()
        } else if cycle.saturating_mul(peers) <= SMOOTH_WORK {
            smooth(&weights)
        } else {
            earliest_deadline_first(&weights)
        };
        Self { order }
    }

    #[cfg(test)]
    pub(crate) fn cycle(&self) -> &[u32] {
        &self.order
    }

    /// The next peer `skip` lets through, stepping `cursor`; `None` when it skips them all.
    pub(crate) fn next(&self, cursor: &AtomicU64, skip: impl Fn(usize) -> bool) -> Option<usize> {
        let len = self.order.len() as u64;
        if len == 0 {
            return None;
        }
        let start = cursor.fetch_add(1, Ordering::Relaxed);
        for step in 0..len {
            let peer = self.order[((start.wrapping_add(step)) % len) as usize] as usize;
            if skip(peer) {
                continue;
            }
            if step > 0 {
                // Consume the skipped positions, unless another pick already moved on.
                let _ = cursor.compare_exchange(
                    start.wrapping_add(1),
                    start.wrapping_add(1 + step),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            return Some(peer);
        }
        None
    }
}

/// Integer weights in `WEIGHT_UNITS`, reduced by their gcd, the cycle capped at `MAX_CYCLE`.
fn integer_weights(weights: impl IntoIterator<Item = f64>) -> Vec<u64> {
    let mut units: Vec<u64> = weights
        .into_iter()
        .map(|w| {
            let w = if w.is_finite() { w } else { 1.0 };
            (w * WEIGHT_UNITS).round().clamp(1.0, 1e12) as u64
        })
        .collect();
    let divisor = units.iter().copied().fold(0, gcd).max(1);
    for w in &mut units {
        *w /= divisor;
    }
    let cycle: u64 = units.iter().sum();
    if cycle > MAX_CYCLE {
        for w in &mut units {
            let scaled = u128::from(*w) * u128::from(MAX_CYCLE) / u128::from(cycle);
            *w = u64::try_from(scaled).unwrap_or(u64::MAX).max(1);
        }
    }
    units
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// nginx's smooth weighted round robin over one cycle.
fn smooth(weights: &[u64]) -> Vec<u32> {
    let total: i64 = weights.iter().map(|&w| w as i64).sum();
    let mut scores = vec![0i64; weights.len()];
    let mut order = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for (i, &w) in weights.iter().enumerate() {
            scores[i] += w as i64;
            // Strictly greater: on a tie the earlier peer wins, as in nginx.
            if scores[i] > scores[best] {
                best = i;
            }
        }
        scores[best] -= total;
        order.extend(u32::try_from(best).ok());
    }
    order
}

/// The `k`-th pick of peer `i` is due at `(k + ½) / wᵢ`; picks go in order of due time.
fn earliest_deadline_first(weights: &[u64]) -> Vec<u32> {
    let total: u64 = weights.iter().sum();
    let mut due: BinaryHeap<Reverse<Due>> = weights
        .iter()
        .enumerate()
        .filter_map(|(i, &w)| {
            Some(Reverse(Due {
                num: 1,
                den: 2 * w,
                peer: u32::try_from(i).ok()?,
            }))
        })
        .collect();
    let mut order = Vec::with_capacity(total as usize);
    while (order.len() as u64) < total {
        let Some(Reverse(next)) = due.pop() else {
            break;
        };
        order.push(next.peer);
        due.push(Reverse(Due {
            num: next.num + 2,
            ..next
        }));
    }
    order
}

/// A due time `num / den`, then the peer, for the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Due {
    num: u64,
    den: u64,
    peer: u32,
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        let a = u128::from(self.num) * u128::from(other.den);
        let b = u128::from(other.num) * u128::from(self.den);
        a.cmp(&b).then(self.peer.cmp(&other.peer))
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests;
