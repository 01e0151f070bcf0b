//! Compact instants for records kept by the thousand (one per endpoint): an [`Instant`] as
//! signed nanoseconds from a process-wide origin, 8 bytes where an `Instant` takes 16, and
//! `Option<Stamp>` 8 bytes too. The conversion is exact both ways for any instant within
//! about 292 years of the origin, so comparing stamps is comparing the instants they came
//! from. The origin is the first instant asked for; instants before it (a test's paused
//! clock started earlier) are negative offsets, not errors.

use std::num::NonZeroI64;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// Nanoseconds from [`origin`], stored XOR `i64::MIN` so that no representable offset is zero
/// (offsets are clamped above `i64::MIN`) and `Option<Stamp>` needs no extra word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp(NonZeroI64);

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl Stamp {
    pub fn at(instant: Instant) -> Self {
        let origin = origin();
        let offset = if instant >= origin {
            nanos(instant - origin)
        } else {
            -nanos(origin - instant)
        }
        .max(i64::MIN + 1);
        // `offset ^ i64::MIN` is zero only for `i64::MIN`, excluded above.
        Self(NonZeroI64::new(offset ^ i64::MIN).unwrap_or(NonZeroI64::MAX))
    }

    fn offset(self) -> i64 {
        self.0.get() ^ i64::MIN
    }

    pub fn instant(self) -> Instant {
        let offset = self.offset();
        let origin = origin();
        let span = Duration::from_nanos(offset.unsigned_abs());
        let moved = if offset >= 0 {
            origin.checked_add(span)
        } else {
            origin.checked_sub(span)
        };
        moved.unwrap_or(origin)
    }
}

/// Milliseconds from the origin, wrapping every ~49 days and rounded down on both sides of it:
/// differences read as signed are right for any two instants less than ~24 days apart. For
/// timestamps packed into atomics beside a value.
pub fn wrapping_millis(instant: Instant) -> u32 {
    let origin = origin();
    if instant >= origin {
        (instant - origin).as_millis() as u32
    } else {
        ((origin - instant).as_nanos().div_ceil(1_000_000) as u32).wrapping_neg()
    }
}

// The stored word's sign bit is flipped: order by the offset it encodes.
impl Ord for Stamp {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.offset().cmp(&other.offset())
    }
}

impl PartialOrd for Stamp {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl From<Instant> for Stamp {
    fn from(instant: Instant) -> Self {
        Self::at(instant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip_exactly_on_both_sides_of_the_origin_and_keep_their_order() {
        let now = Instant::now();
        let instants = [
            now,
            now + Duration::from_nanos(1),
            now + Duration::from_secs(365 * 24 * 3600),
            now - Duration::from_nanos(1),
            now - Duration::from_secs(3600),
            origin(),
        ];
        for i in instants {
            assert_eq!(Stamp::at(i).instant(), i, "{i:?}");
        }
        for a in instants {
            for b in instants {
                assert_eq!(Stamp::at(a).cmp(&Stamp::at(b)), a.cmp(&b));
            }
        }
    }

    #[test]
    fn wrapping_millis_differences_are_exact_to_the_millisecond_across_the_origin() {
        let o = origin();
        let ms = Duration::from_millis(1);
        let half = Duration::from_micros(500);
        for (a, b, diff) in [
            (o, o + 3 * ms, 3),
            (o - 2 * ms, o + ms, 3),
            (o - half, o, 1),
            (o - 5 * ms - half, o - 2 * ms - half, 3),
        ] {
            let d = wrapping_millis(b).wrapping_sub(wrapping_millis(a)) as i32;
            assert_eq!(d, diff, "{a:?} -> {b:?}");
        }
    }

    #[test]
    fn a_stamp_and_an_optional_stamp_are_one_word_each() {
        assert_eq!(std::mem::size_of::<Stamp>(), 8);
        assert_eq!(std::mem::size_of::<Option<Stamp>>(), 8);
    }
}
