//! The log line for an answer the sidecar makes itself (502/503/504 with a reason): at most one
//! `info` line per reason per second in each pool, the next line saying how many it stood for,
//! so a client that got a 503 can find why in the log without a failing pool flooding it.
//! Pure apart from the lock: the time is a parameter.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::LocalReason;

/// At most one line per reason in this long.
pub const EVERY: Duration = Duration::from_secs(1);

/// Per reason: when its last line was written, and the answers since that had none.
#[derive(Debug, Default)]
pub struct LocalAnswerLog {
    reasons: Mutex<HashMap<LocalReason, (Instant, u64)>>,
}

impl LocalAnswerLog {
    /// Whether an answer for `reason` at `now` gets a line: `Some(n)` with the `n` answers for
    /// the same reason that went without one since the last line, `None` to stay quiet.
    pub fn admit(&self, reason: LocalReason, now: Instant) -> Option<u64> {
        let mut reasons = self.reasons.lock();
        match reasons.get_mut(&reason) {
            Some((last, quiet)) if now.saturating_duration_since(*last) < EVERY => {
                *quiet += 1;
                None
            }
            Some((last, quiet)) => {
                *last = now;
                Some(std::mem::take(quiet))
            }
            None => {
                reasons.insert(reason, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_reason_a_second_and_the_next_counts_the_quiet_ones() {
        let log = LocalAnswerLog::default();
        let t0 = Instant::now();
        assert_eq!(log.admit(LocalReason::NoEndpoints, t0), Some(0));
        assert_eq!(
            log.admit(LocalReason::NoEndpoints, t0 + Duration::from_millis(10)),
            None
        );
        assert_eq!(
            log.admit(LocalReason::NoEndpoints, t0 + Duration::from_millis(999)),
            None
        );
        assert_eq!(
            log.admit(
                LocalReason::UpstreamTimeout,
                t0 + Duration::from_millis(500)
            ),
            Some(0),
            "another reason has its own second"
        );
        assert_eq!(log.admit(LocalReason::NoEndpoints, t0 + EVERY), Some(2));
        assert_eq!(log.admit(LocalReason::NoEndpoints, t0 + EVERY * 3), Some(0));
    }
}
