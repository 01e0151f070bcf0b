//! A streak counter: how many failures in a row, reset by a success. "Consecutive" has to mean
//! consecutive, so a flapping endpoint (fail, ok, fail, ok…) never reaches a limit.

/// Failures in a row. A limit of 0 means "disabled" and is never reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Consecutive(u32);

// === impl Consecutive ===

impl Consecutive {
    /// Count one more failure; returns the streak length.
    pub fn failure(&mut self) -> u32 {
        self.0 = self.0.saturating_add(1);
        self.0
    }

    /// A success (or anything else that breaks the streak).
    pub fn reset(&mut self) {
        self.0 = 0;
    }

    pub fn get(self) -> u32 {
        self.0
    }

    /// True when the streak has reached `limit`; a limit of 0 disables the check.
    pub fn reached(self, limit: u32) -> bool {
        limit > 0 && self.0 >= limit
    }
}

#[cfg(test)]
mod tests {
    use super::Consecutive;

    #[test]
    fn streak_counts_failures_in_a_row_and_a_reset_starts_over() {
        let mut c = Consecutive::default();
        assert_eq!(c.failure(), 1);
        assert_eq!(c.failure(), 2);
        assert!(c.reached(2));
        assert!(!c.reached(3));
        c.reset();
        assert_eq!(c.get(), 0);
        assert_eq!(c.failure(), 1);
    }

    #[test]
    fn zero_limit_is_never_reached() {
        let mut c = Consecutive::default();
        for _ in 0..100 {
            c.failure();
        }
        assert!(!c.reached(0));
        assert!(c.reached(100));
    }

    #[test]
    fn alternating_results_never_reach_a_limit_of_two() {
        let mut c = Consecutive::default();
        for _ in 0..50 {
            c.failure();
            assert!(!c.reached(2));
            c.reset();
        }
    }

    #[test]
    fn streak_saturates_instead_of_overflowing() {
        let mut c = Consecutive(u32::MAX - 1);
        assert_eq!(c.failure(), u32::MAX);
        assert_eq!(c.failure(), u32::MAX);
    }
}
