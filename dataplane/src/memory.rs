//! Giving back the memory a large roster leaves free. Applying a pool of thousands of endpoints
//! makes transient copies (the parsed roster, the message to the pool's owner, address sets,
//! health events) several times the size of what stays; glibc's allocator keeps the pages they
//! freed below live allocations resident, so an idle sidecar kept about 360 KiB it did not use
//! with 5,000 endpoints. After such a change a release is scheduled, once, a moment later (so
//! the rest of the change is freed first), as Envoy's overload manager shrinks its heap.
//!
//! The library holds no unsafe code: the binary says how to release (`set_release`; glibc's
//! `malloc_trim` in `main.rs`). Embedders and tests that set nothing skip it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A roster of at least this many endpoints schedules a release when applied.
pub const LARGE_ROSTER: usize = 1024;

/// How long after a large roster the release runs.
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
pub struct Releaser {
    release: fn() -> bool,
    pending: AtomicBool,
}

impl Releaser {
    pub fn new(release: fn() -> bool) -> Self {
        Self {
            release,
            pending: AtomicBool::new(false),
        }
    }

    /// Schedule a release [`RELEASE_DELAY`] from now if the roster was large, no release is
    /// pending, and a runtime is there to wait on.
    pub fn roster_applied(&'static self, endpoints: usize) {
        if endpoints < LARGE_ROSTER || self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.pending.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(async move {
            tokio::time::sleep(RELEASE_DELAY).await;
            self.pending.store(false, Ordering::Release);
            // Inline, not on a blocking thread: a new thread would get an arena of its own,
            // and releasing a sidecar's few MiB takes well under a millisecond.
            let released = (self.release)();
            tracing::debug!(
                endpoints,
                released,
                "freed memory released after a large roster"
            );
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

        releaser.roster_applied(5_000);
        tokio::time::sleep(RELEASE_DELAY * 2).await;
        assert_eq!(
            RELEASES.load(Ordering::SeqCst),
            2,
            "a later one releases again"
        );
    }

    #[test]
    fn without_a_runtime_nothing_is_scheduled_and_nothing_stays_pending() {
        let releaser: &'static Releaser = Box::leak(Box::new(Releaser::new(|| true)));
        releaser.roster_applied(5_000);
        assert!(!releaser.pending.load(Ordering::Acquire));
    }
}
