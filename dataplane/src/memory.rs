//! Giving back the memory a large roster leaves free. Applying a pool of thousands of endpoints
//! makes transient copies (the parsed roster, the message to the pool's owner, address sets,
//! health events) several times the size of what stays; glibc's allocator keeps the pages they
//! freed below live allocations resident, so an idle sidecar kept about 360 KiB it did not use
//! with 5,000 endpoints. After such a change one release runs once large rosters have stopped
//! coming for a moment (so the rest of the change is freed first, and a rollout's stream of
//! rosters is not trimmed between each), as Envoy's overload manager shrinks its heap.
//!
//! The library holds no unsafe code: the binary says how to release (`set_release`; glibc's
//! `malloc_trim` in `main.rs`). Embedders and tests that set nothing skip it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A roster of at least this many endpoints schedules a release when applied.
pub const LARGE_ROSTER: usize = 1024;

/// How long after the last large roster the release runs.
pub const RELEASE_DELAY: Duration = Duration::from_secs(1);

static RELEASER: OnceLock<Releaser> = OnceLock::new();

/// Release freed memory with `release` (which says whether anything went back) after large
/// rosters from now on. The first call wins.
pub fn set_release(release: fn() -> bool) {
    let _ = RELEASER.set(Releaser::new(release));
}

/// A roster of `endpoints` endpoints was applied.
pub fn roster_applied(endpoints: usize) {
    if let Some(releaser) = RELEASER.get() {
        releaser.roster_applied(endpoints);
    }
}

/// One pending release at most, however many large rosters arrive before it runs.
struct Releaser {
    release: fn() -> bool,
    pending: AtomicBool,
    /// Large rosters applied so far: the pending release waits until this stops moving.
    rosters: AtomicU64,
}

impl Releaser {
    fn new(release: fn() -> bool) -> Self {
        Self {
            release,
            pending: AtomicBool::new(false),
            rosters: AtomicU64::new(0),
        }
    }

    /// A large roster schedules a release [`RELEASE_DELAY`] after the last large roster (a
    /// pending one waits longer), if a runtime is there to wait on.
    fn roster_applied(&'static self, endpoints: usize) {
        if endpoints < LARGE_ROSTER {
            return;
        }
        self.rosters.fetch_add(1, Ordering::AcqRel);
        if self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.pending.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(async move {
            loop {
                // Quiet for a whole delay: no large roster since the wait began.
                let mut seen = self.rosters.load(Ordering::Acquire);
                loop {
                    tokio::time::sleep(RELEASE_DELAY).await;
                    let now = self.rosters.load(Ordering::Acquire);
                    if now == seen {
                        break;
                    }
                    seen = now;
                }
                self.pending.store(false, Ordering::Release);
                // Inline, not on a blocking thread: a new thread would get an arena of its
                // own, and releasing a sidecar's few MiB takes well under a millisecond.
                let released = (self.release)();
                tracing::debug!(
                    endpoints,
                    released,
                    "freed memory released after large rosters"
                );
                // A roster that came between the last look and `pending` going down found a
                // release pending and scheduled none: this task waits for it too.
                if self.rosters.load(Ordering::Acquire) == seen
                    || self.pending.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    static RELEASES: AtomicUsize = AtomicUsize::new(0);

    fn count() -> bool {
        RELEASES.fetch_add(1, Ordering::SeqCst);
        true
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_roster_releases_once_a_moment_later_however_many_follow() {
        let releaser: &'static Releaser = Box::leak(Box::new(Releaser::new(count)));
        releaser.roster_applied(LARGE_ROSTER - 1);
        tokio::time::sleep(RELEASE_DELAY * 2).await;
        assert_eq!(
            RELEASES.load(Ordering::SeqCst),
            0,
            "a small roster releases nothing"
        );

        releaser.roster_applied(LARGE_ROSTER);
        releaser.roster_applied(5_000);
        tokio::time::sleep(RELEASE_DELAY / 2).await;
        assert_eq!(RELEASES.load(Ordering::SeqCst), 0, "not yet");
        tokio::time::sleep(RELEASE_DELAY).await;
        assert_eq!(RELEASES.load(Ordering::SeqCst), 1, "once for both");

        // A rollout: a large roster every 600 ms. Nothing is released while they come.
        for _ in 0..5 {
            releaser.roster_applied(5_000);
            tokio::time::sleep(RELEASE_DELAY * 6 / 10).await;
        }
        assert_eq!(RELEASES.load(Ordering::SeqCst), 1, "not between rosters");
        tokio::time::sleep(RELEASE_DELAY * 2).await;
        assert_eq!(RELEASES.load(Ordering::SeqCst), 2, "once they stopped");
    }

    #[test]
    fn without_a_runtime_nothing_is_scheduled_and_nothing_stays_pending() {
        let releaser: &'static Releaser = Box::leak(Box::new(Releaser::new(|| true)));
        releaser.roster_applied(5_000);
        assert!(!releaser.pending.load(Ordering::Acquire));
    }
}
