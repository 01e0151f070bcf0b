//! Reconnect back-off: exponential with full jitter (a uniformly random wait between zero and
//! the ceiling), so a fleet of sidecars that lost the controller at the same moment does not
//! come back at the same moment. Pure: the caller supplies the random draw.

use std::time::Duration;

/// `initial` doubling per attempt up to `max`, fully jittered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

// === impl Backoff ===

impl Backoff {
    /// The longest wait before attempt number `attempt` (0-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The wait before attempt `attempt`, given a uniform draw `unit` in `[0, 1)`.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        self.ceiling(attempt).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// The wait before attempt `attempt`, with a fresh random draw.
    pub fn jittered(&self, attempt: u32) -> Duration {
        self.delay(attempt, rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_up_to_the_maximum() {
        let b = Backoff::default();
        let ms = |a| b.ceiling(a).as_millis();
        assert_eq!(
            [ms(0), ms(1), ms(2), ms(6), ms(7)],
            [100, 200, 400, 6400, 10_000]
        );
        assert_eq!(b.ceiling(1000), Duration::from_secs(10));
    }

    #[test]
    fn delay_is_a_share_of_the_ceiling() {
        let b = Backoff::default();
        assert_eq!(b.delay(3, 0.0), Duration::ZERO);
        assert_eq!(b.delay(3, 0.5), Duration::from_millis(400));
        assert!(b.jittered(20) <= Duration::from_secs(10));
    }
}
