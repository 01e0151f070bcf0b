//! The error-rate sliding window: requests and failures over the last `window`, in time buckets.
//!
//! Ten buckets per window keep memory constant however busy an endpoint is; the price is that a
//! request stays counted for between `window` and `window + window / 10`. The window length is
//! passed in on every call rather than stored, so a config reload takes effect at once and no
//! copy of the setting can go stale.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Buckets per window: the window's resolution.
const BUCKETS: u32 = 10;
/// Narrowest bucket, so a tiny window cannot make a bucket per request.
const MIN_BUCKET: Duration = Duration::from_millis(1);

/// Requests and failures currently inside the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCounts {
    pub requests: u64,
    pub failures: u64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    start: Instant,
    requests: u64,
    failures: u64,
}

/// Sliding count of requests and failures. A zero window records nothing.
#[derive(Clone, Debug, Default)]
pub struct ErrorRateWindow {
    /// Made with the first bucket and dropped with the last: every endpoint's detector has a
    /// window, and most endpoints of a wide pool get no request from a given sidecar (an
    /// empty deque in place is 32 bytes each, the box 8).
    #[allow(
        clippy::box_collection,
        reason = "the box keeps an empty window to one word"
    )]
    buckets: Option<Box<VecDeque<Bucket>>>,
}

// === impl WindowCounts ===

impl WindowCounts {
    /// Failures over requests, 0 when there were none.
    pub fn rate(self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.failures as f64 / self.requests as f64
        }
    }
}

// === impl ErrorRateWindow ===

impl ErrorRateWindow {
    pub fn new() -> Self {
        Self::default()
    }

    fn width(window: Duration) -> Duration {
        (window / BUCKETS).max(MIN_BUCKET)
    }

    /// A bucket is still in the window while any part of it is newer than `now - window`.
    fn live(bucket: &Bucket, window: Duration, now: Instant) -> bool {
        now.saturating_duration_since(bucket.start) < window.saturating_add(Self::width(window))
    }

    /// Count one request that was (`failed`) or was not a failure.
    pub fn record(&mut self, failed: bool, window: Duration, now: Instant) {
        if window.is_zero() {
            return;
        }
        self.expire(window, now);
        let width = Self::width(window);
        let buckets = self.buckets.get_or_insert_with(Box::default);
        let fresh = match buckets.back() {
            Some(last) => now.saturating_duration_since(last.start) >= width,
            None => true,
        };
        if fresh {
            buckets.push_back(Bucket {
                start: now,
                requests: 0,
                failures: 0,
            });
        }
        if let Some(last) = buckets.back_mut() {
            last.requests = last.requests.saturating_add(1);
            last.failures = last.failures.saturating_add(u64::from(failed));
        }
    }

    /// Drop buckets that have left the window (memory only; `counts` ignores them anyway).
    pub fn expire(&mut self, window: Duration, now: Instant) {
        let Some(buckets) = self.buckets.as_mut() else {
            return;
        };
        while let Some(front) = buckets.front() {
            if Self::live(front, window, now) {
                break;
            }
            buckets.pop_front();
        }
        if buckets.is_empty() {
            self.buckets = None;
        }
    }

    /// What is inside the window at `now`.
    pub fn counts(&self, window: Duration, now: Instant) -> WindowCounts {
        if window.is_zero() {
            return WindowCounts::default();
        }
        self.buckets
            .iter()
            .flat_map(|buckets| buckets.iter())
            .filter(|b| Self::live(b, window, now))
            .fold(WindowCounts::default(), |acc, b| WindowCounts {
                requests: acc.requests + b.requests,
                failures: acc.failures + b.failures,
            })
    }

    /// Forget everything (after an ejection the endpoint starts with a clean slate).
    pub fn clear(&mut self) {
        self.buckets = None;
    }

    #[cfg(test)]
    fn holds_storage(&self) -> bool {
        self.buckets.is_some()
    }

    #[cfg(test)]
    fn bucket_count(&self) -> usize {
        self.buckets.as_ref().map_or(0, |b| b.len())
    }
}

/// One endpoint's last (up to 64) counted outcomes, however old: what it did lately, not
/// diluted by the successes of the rest of the window.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecentOutcomes {
    /// Newest in bit 0; a set bit is a failure.
    bits: u64,
    len: u8,
}

impl RecentOutcomes {
    pub fn push(&mut self, failed: bool) {
        self.bits = (self.bits << 1) | u64::from(failed);
        self.len = self.len.saturating_add(1).min(64);
    }

    /// Requests and failures among the last `last` outcomes (fewer when fewer are known).
    pub fn counts(self, last: u32) -> WindowCounts {
        let n = last.min(u32::from(self.len));
        let mask = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        WindowCounts {
            requests: u64::from(n),
            failures: u64::from((self.bits & mask).count_ones()),
        }
    }

    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests;
