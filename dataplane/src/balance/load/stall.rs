//! The stall watch's state, pure: how many awaited tries are waiting and since when the endpoint
//! has said nothing. Both live in one atomic word and every change is one compare-and-swap of
//! the whole, because deciding the next "since" from a count read a moment earlier raced: an
//! answer that saw another try still waiting could store its "others judged from now" after
//! that other try had settled, leaving an endpoint with nothing in flight marked silent and
//! avoided for `STALL_RETRY` (seen under load as two endpoints of three starved of traffic).

use std::sync::atomic::{AtomicU64, Ordering};

/// `since` value meaning "everything sent has been answered".
const ANSWERED: u32 = u32::MAX;

/// Tries waiting, and since when (a millisecond stamp) the endpoint has been silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Silence {
    pub waiting: u32,
    pub since: Option<u32>,
}

impl Silence {
    pub const NONE: Self = Self {
        waiting: 0,
        since: None,
    };

    /// A try is sent at `now`: the silence starts now unless it already runs.
    pub fn started(self, now: u32) -> Self {
        Self {
            waiting: self.waiting.saturating_add(1),
            since: self.since.or(Some(now)),
        }
    }

    /// A try settled at `now`: `responded` when the endpoint showed it is there.
    pub fn settled(self, responded: bool, now: u32) -> Self {
        let waiting = self.waiting.saturating_sub(1);
        let since = match (responded, waiting) {
            (true, 0) => None,
            // The others still waiting are judged from this answer on.
            (true, _) => Some(now),
            // The last one waiting went unanswered: avoided for STALL_RETRY from now.
            (false, 0) => Some(now),
            // Unanswered, others still waiting: the stall goes on from where it began.
            (false, _) => self.since,
        };
        Self { waiting, since }
    }

    /// A try was abandoned at `now` without a verdict: no evidence either way. The silence is
    /// forgotten when nothing else waits and it had lasted no longer than `floor_ms` (it had
    /// not become a stall yet).
    pub fn abandoned(self, now: u32, floor_ms: u32) -> Self {
        let waiting = self.waiting.saturating_sub(1);
        let since = match self.since {
            Some(since) if waiting == 0 && elapsed_ms(since, now) <= floor_ms => None,
            other => other,
        };
        Self { waiting, since }
    }

    fn pack(self) -> u64 {
        (u64::from(self.waiting) << 32) | u64::from(self.since.unwrap_or(ANSWERED))
    }

    fn unpack(word: u64) -> Self {
        let since = (word & 0xffff_ffff) as u32;
        Self {
            waiting: (word >> 32) as u32,
            since: (since != ANSWERED).then_some(since),
        }
    }
}

/// Milliseconds from stamp `since` to stamp `now`, read as signed (stamps wrap).
pub(super) fn elapsed_ms(since: u32, now: u32) -> u32 {
    (now.wrapping_sub(since) as i32).max(0) as u32
}

/// A stamp usable as `since` (never the "answered" marker).
pub(super) fn stamp(ms: u32) -> u32 {
    ms.min(ANSWERED - 1)
}

/// A [`Silence`] shared by the request path.
#[derive(Debug)]
pub(super) struct SilenceCell(AtomicU64);

impl SilenceCell {
    pub fn new() -> Self {
        Self(AtomicU64::new(Silence::NONE.pack()))
    }

    pub fn get(&self) -> Silence {
        Silence::unpack(self.0.load(Ordering::Acquire))
    }

    /// Apply `change` to the current value as one atomic step.
    pub fn update(&self, change: impl Fn(Silence) -> Silence) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                Some(change(Silence::unpack(word)).pack())
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: u32 = 200;

    #[test]
    fn a_try_answered_with_another_still_waiting_then_that_one_answered_ends_the_silence() {
        // The interleaving that used to leave a stale "since": both orders of settling now
        // end with nothing waiting and no silence.
        let two = Silence::NONE.started(0).started(5);
        assert_eq!(
            two,
            Silence {
                waiting: 2,
                since: Some(0)
            }
        );
        let first = two.settled(true, 10);
        assert_eq!(
            first,
            Silence {
                waiting: 1,
                since: Some(10)
            }
        );
        assert_eq!(first.settled(true, 12), Silence::NONE);
        assert_eq!(two.settled(true, 12).settled(true, 10), Silence::NONE);
    }

    #[test]
    fn an_unanswered_last_try_starts_the_retry_wait_and_one_among_others_keeps_the_start() {
        let one = Silence::NONE.started(0);
        assert_eq!(
            one.settled(false, 4000),
            Silence {
                waiting: 0,
                since: Some(4000)
            }
        );
        let two = one.started(100);
        assert_eq!(
            two.settled(false, 4000),
            Silence {
                waiting: 1,
                since: Some(0)
            }
        );
    }

    #[test]
    fn an_abandoned_try_is_forgotten_only_before_it_became_a_stall() {
        let one = Silence::NONE.started(0);
        assert_eq!(one.abandoned(FLOOR, FLOOR), Silence::NONE);
        assert_eq!(
            one.abandoned(FLOOR + 1, FLOOR),
            Silence {
                waiting: 0,
                since: Some(0)
            }
        );
        let two = one.started(10);
        assert_eq!(
            two.abandoned(50, FLOOR),
            Silence {
                waiting: 1,
                since: Some(0)
            }
        );
    }

    #[test]
    fn the_word_round_trips_and_stamps_wrap() {
        for s in [
            Silence::NONE,
            Silence {
                waiting: 3,
                since: Some(0),
            },
            Silence {
                waiting: u32::MAX,
                since: Some(ANSWERED - 1),
            },
        ] {
            assert_eq!(Silence::unpack(s.pack()), s);
        }
        assert_eq!(stamp(u32::MAX), ANSWERED - 1);
        assert_eq!(elapsed_ms(u32::MAX - 5, 4), 10);
        assert_eq!(
            elapsed_ms(10, 4),
            0,
            "a stamp from the future is no silence"
        );
    }

    #[test]
    fn concurrent_tries_leave_no_silence_once_all_are_answered() {
        use std::sync::Arc;
        let cell = Arc::new(SilenceCell::new());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let cell = Arc::clone(&cell);
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        cell.update(|s| s.started(i));
                        cell.update(|s| s.settled(true, i + t));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(cell.get(), Silence::NONE);
    }
}
