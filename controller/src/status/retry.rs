//! When a pool whose status write failed is tried again: exponential back-off from one second,
//! capped at a minute, with equal jitter (half the delay fixed, half random) so pools that
//! failed together (an API server outage) do not come back together. Pure: the randomness is
//! a parameter.

use std::time::Duration;

/// The first retry's delay, before jitter.
pub const FIRST: Duration = Duration::from_secs(1);
/// The longest delay, before jitter.
pub const CAP: Duration = Duration::from_secs(60);

/// The delay after the `failures`-th failure in a row (1 for the first), given `random` in
/// [0, 1): between half and all of `FIRST · 2^(failures-1)`, capped at `CAP`.
pub fn after(failures: u32, random: f64) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    let full = FIRST.saturating_mul(1 << exponent).min(CAP);
    let random = if random.is_finite() {
        random.clamp(0.0, 1.0)
    } else {
        0.0
    };
    full / 2 + full.mul_f64(random / 2.0)
}

/// A number in [0, 1) that differs between calls, for `after`.
pub fn random() -> f64 {
    use std::hash::BuildHasher;
    let bits = std::collections::hash_map::RandomState::new().hash_one(0u8);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_a_second_to_a_minute_with_half_of_it_random() {
        assert_eq!(after(1, 0.0), Duration::from_millis(500));
        assert_eq!(after(1, 1.0), Duration::from_secs(1));
        assert_eq!(after(2, 0.0), Duration::from_secs(1));
        assert_eq!(after(3, 0.5), Duration::from_secs(3));
        assert_eq!(after(7, 0.0), Duration::from_secs(30), "64 s capped at 60");
        assert_eq!(after(u32::MAX, 1.0), CAP);
        assert_eq!(
            after(0, 0.0),
            Duration::from_millis(500),
            "0 counts as the first"
        );
        assert_eq!(after(1, f64::NAN), Duration::from_millis(500));
    }

    #[test]
    fn the_random_part_is_in_range_and_varies() {
        let draws: Vec<f64> = (0..64).map(|_| random()).collect();
        assert!(draws.iter().all(|r| (0.0..1.0).contains(r)));
        assert!(draws.iter().any(|r| *r != draws[0]));
    }
}
