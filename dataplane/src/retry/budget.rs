//! The retry budget: retries may be at most `percent` of the requests seen over a sliding window,
//! plus `minPerSecond` so a quiet pool can still retry. It is what keeps a partial failure from
//! becoming a total one: when every try fails, retries stop multiplying the load.
//!
//! Shared by every request of a pool without a lock: ten one-second buckets per count, each one
//! `AtomicU64` packing the bucket's second with its count, so counting is one compare-exchange
//! and reading is ten loads. Time is passed in. Two retries racing for the last unit of budget
//! may both get it; the budget is a rate limit, not an exact count.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

const BUCKETS: u64 = 10;
const BUCKET: Duration = Duration::from_secs(1);
const COUNT_BITS: u32 = 32;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

#[derive(Debug)]
pub struct RetryBudget {
    percent: AtomicU32,
    min_per_second: AtomicU32,
    start: Instant,
    requests: Window,
    retries: Window,
}

/// Counts per one-second bucket over the last `BUCKETS` seconds.
#[derive(Debug, Default)]
struct Window {
    buckets: [AtomicU64; BUCKETS as usize],
}

// === impl RetryBudget ===

impl RetryBudget {
    pub fn new(percent: u32, min_per_second: u32, now: Instant) -> Self {
        Self {
            percent: AtomicU32::new(percent),
            min_per_second: AtomicU32::new(min_per_second),
            start: now,
            requests: Window::default(),
            retries: Window::default(),
        }
    }

    pub fn set_limits(&self, percent: u32, min_per_second: u32) {
        self.percent.store(percent, Ordering::Relaxed);
        self.min_per_second.store(min_per_second, Ordering::Relaxed);
    }

    fn second(&self, now: Instant) -> u64 {
        let ms = now.saturating_duration_since(self.start).as_millis();
        u64::try_from(ms / BUCKET.as_millis()).unwrap_or(u64::MAX >> COUNT_BITS)
    }

    /// A request arrived.
    pub fn record_request(&self, now: Instant) {
        self.requests.add(self.second(now));
    }

    /// Take one retry from the budget if there is one left.
    pub fn try_retry(&self, now: Instant) -> bool {
        let second = self.second(now);
        let percent = u64::from(self.percent.load(Ordering::Relaxed));
        let floor = u64::from(self.min_per_second.load(Ordering::Relaxed));
        let allowed = self.requests.total(second) * percent / 100 + floor * BUCKETS;
        if self.retries.total(second) < allowed {
            self.retries.add(second);
            true
        } else {
            false
        }
    }
}

// === impl Window ===

impl Window {
    fn add(&self, second: u64) {
        let bucket = &self.buckets[(second % BUCKETS) as usize];
        let mut current = bucket.load(Ordering::Acquire);
        loop {
            let next = if current >> COUNT_BITS == second {
                current + u64::from(current & COUNT_MASK < COUNT_MASK)
            } else if current >> COUNT_BITS > second {
                // A caller with a newer `now` already took this bucket over: count it there.
                current + u64::from(current & COUNT_MASK < COUNT_MASK)
            } else {
                (second << COUNT_BITS) | 1
            };
            match bucket.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    fn total(&self, second: u64) -> u64 {
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Acquire))
            .filter(|word| {
                let at = word >> COUNT_BITS;
                at <= second && at + BUCKETS > second
            })
            .map(|word| word & COUNT_MASK)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_allows_retries_on_a_quiet_pool_then_stops() {
        let now = Instant::now();
        let b = RetryBudget::new(20, 1, now);
        // 1 per second over a 10 s window.
        for _ in 0..10 {
            assert!(b.try_retry(now));
        }
        assert!(!b.try_retry(now));
    }

    #[test]
    fn retries_are_capped_at_the_percent_of_requests() {
        let now = Instant::now();
        let b = RetryBudget::new(20, 0, now);
        for _ in 0..100 {
            b.record_request(now);
        }
        let granted = (0..100).filter(|_| b.try_retry(now)).count();
        assert_eq!(granted, 20);
    }

    #[test]
    fn the_window_slides_and_old_retries_are_forgotten() {
        let t0 = Instant::now();
        let b = RetryBudget::new(0, 1, t0);
        while b.try_retry(t0) {}
        assert!(!b.try_retry(t0 + Duration::from_secs(9)));
        assert!(b.try_retry(t0 + Duration::from_secs(10)));
    }

    #[test]
    fn new_limits_apply_at_once() {
        let now = Instant::now();
        let b = RetryBudget::new(0, 0, now);
        assert!(!b.try_retry(now));
        b.set_limits(0, 1);
        assert!(b.try_retry(now));
    }
}
