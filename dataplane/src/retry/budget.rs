//! The retry budget: retries may be at most `percent` of the requests seen over a sliding window,
//! plus `minPerSecond` so a quiet pool can still retry. It is what keeps a partial failure from
//! becoming a total one: when every try fails, retries stop multiplying the load. Pure, with the
//! time passed in; ten one-second buckets make the window.

use std::time::Duration;

use tokio::time::Instant;

const BUCKETS: usize = 10;
const BUCKET: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct RetryBudget {
    percent: u32,
    min_per_second: u32,
    start: Instant,
    /// (bucket number, requests, retries)
    buckets: [(u64, u64, u64); BUCKETS],
}

impl RetryBudget {
    pub fn new(percent: u32, min_per_second: u32, now: Instant) -> Self {
        Self {
            percent,
            min_per_second,
            start: now,
            buckets: [(0, 0, 0); BUCKETS],
        }
    }

    pub fn set_limits(&mut self, percent: u32, min_per_second: u32) {
        self.percent = percent;
        self.min_per_second = min_per_second;
    }

    fn slot(&mut self, now: Instant) -> &mut (u64, u64, u64) {
        let n = (now.saturating_duration_since(self.start).as_millis() / BUCKET.as_millis()) as u64;
        let slot = &mut self.buckets[(n % BUCKETS as u64) as usize];
        if slot.0 != n {
            *slot = (n, 0, 0);
        }
        slot
    }

    fn totals(&self, now: Instant) -> (u64, u64) {
        let n = (now.saturating_duration_since(self.start).as_millis() / BUCKET.as_millis()) as u64;
        self.buckets
            .iter()
            .filter(|b| b.0 + BUCKETS as u64 > n && b.0 <= n)
            .fold((0, 0), |(r, t), b| (r + b.1, t + b.2))
    }

    /// A request arrived.
    pub fn record_request(&mut self, now: Instant) {
        self.slot(now).1 += 1;
    }

    /// Take one retry from the budget if there is one left.
    pub fn try_retry(&mut self, now: Instant) -> bool {
        let (requests, retries) = self.totals(now);
        let allowed = requests * u64::from(self.percent) / 100
            + u64::from(self.min_per_second) * BUCKETS as u64;
        if retries < allowed {
            self.slot(now).2 += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_allows_retries_on_a_quiet_pool_then_stops() {
        let now = Instant::now();
        let mut b = RetryBudget::new(20, 1, now);
        // 1 per second over a 10 s window.
        for _ in 0..10 {
            assert!(b.try_retry(now));
        }
        assert!(!b.try_retry(now));
    }

    #[test]
    fn retries_are_capped_at_the_percent_of_requests() {
        let now = Instant::now();
        let mut b = RetryBudget::new(20, 0, now);
        for _ in 0..100 {
            b.record_request(now);
        }
        let granted = (0..100).filter(|_| b.try_retry(now)).count();
        assert_eq!(granted, 20);
    }

    #[test]
    fn the_window_slides_and_old_retries_are_forgotten() {
        let t0 = Instant::now();
        let mut b = RetryBudget::new(0, 1, t0);
        while b.try_retry(t0) {}
        assert!(!b.try_retry(t0 + Duration::from_secs(9)));
        assert!(b.try_retry(t0 + Duration::from_secs(10)));
    }
}
