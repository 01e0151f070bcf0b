//! The pause before a retry: exponential from `BASE` (25 ms) to `MAX` (250 ms), Envoy's
//! defaults, with "equal jitter": retry `n` waits between half and all of `BASE × 2^(n-1)`
//! (capped), drawn uniformly. Half is always waited, so a burst of failures never retries in
//! lock-step at zero delay; the other half spreads the retries of many requests apart. A retry
//! on a fresh connection after a pooled one was found dead waits nothing: no endpoint saw it.

use std::time::Duration;

pub const BASE: Duration = Duration::from_millis(25);
pub const MAX: Duration = Duration::from_millis(250);

/// The back-off before retry `n` (1 for the first retry); `jitter` is uniform in `0..1`.
pub fn before_retry(n: u32, jitter: f64) -> Duration {
    let doubling = n.saturating_sub(1).min(16);
    let ceiling = BASE.saturating_mul(1 << doubling).min(MAX);
    let jitter = if jitter.is_finite() {
        jitter.clamp(0.0, 1.0)
    } else {
        0.0
    };
    ceiling / 2 + (ceiling / 2).mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_from_the_base_to_the_cap_with_half_of_it_jittered() {
        let ms = Duration::from_millis;
        let cases = [
            (1, 0.0, Duration::from_micros(12_500)),
            (1, 1.0, ms(25)),
            (2, 0.0, ms(25)),
            (2, 1.0, ms(50)),
            (3, 0.5, ms(75)),
            (4, 1.0, ms(200)),
            (5, 1.0, ms(250)),
            (5, 0.0, ms(125)),
            (40, 1.0, ms(250)),
        ];
        for (n, jitter, expected) in cases {
            assert_eq!(
                before_retry(n, jitter),
                expected,
                "retry {n}, jitter {jitter}"
            );
        }
    }

    #[test]
    fn jitter_outside_its_range_is_clamped() {
        assert_eq!(before_retry(1, -3.0), Duration::from_micros(12_500));
        assert_eq!(before_retry(1, 7.0), BASE);
        assert_eq!(before_retry(1, f64::NAN), Duration::from_micros(12_500));
    }
}
