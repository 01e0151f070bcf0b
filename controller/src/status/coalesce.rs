//! The status write coalescer, pure with an injected clock: a pool's status is written at most
//! once per `min_interval`, and never when it equals what was last written. A change that comes
//! too soon is held until the interval has passed (`Decision::WaitUntil`), and then the newest
//! status is written, not every intermediate one.
//!
//! Status passes (aggregating every sidecar's report into a desired status, O(endpoints)) are
//! held to the same pace (`begin_pass`): no more writes than one per interval can follow, so a
//! burst of reports (every sidecar of a fleet acknowledging a new roster) costs one pass, not
//! one per report.

use std::collections::HashMap;
use std::time::Duration;

use rollcall_api::roster::PoolRef;
use tokio::time::Instant;

use crate::crd::BackendPoolStatus;

/// What to do with a desired status now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Write,
    /// Nothing changed since the last write.
    Unchanged,
    /// Changed, but the last write was too recent: ask again at this instant.
    WaitUntil(Instant),
}

#[derive(Debug)]
struct Written {
    status: BackendPoolStatus,
    at: Instant,
}

#[derive(Debug)]
pub struct Coalescer {
    min_interval: Duration,
    written: HashMap<PoolRef, Written>,
    /// When each pool's last status pass began.
    passes: HashMap<PoolRef, Instant>,
}

// === impl Coalescer ===

impl Coalescer {
    pub fn new(min_interval: Duration) -> Self {
        Self {
            min_interval,
            written: HashMap::new(),
            passes: HashMap::new(),
        }
    }

    pub fn decide(&self, pool: &PoolRef, desired: &BackendPoolStatus, now: Instant) -> Decision {
        match self.written.get(pool) {
            None => Decision::Write,
            Some(w) if w.status == *desired => Decision::Unchanged,
            Some(w) if now >= w.at + self.min_interval => Decision::Write,
            Some(w) => Decision::WaitUntil(w.at + self.min_interval),
        }
    }

    /// Record a successful write.
    pub fn wrote(&mut self, pool: &PoolRef, status: BackendPoolStatus, now: Instant) {
        self.written
            .insert(pool.clone(), Written { status, at: now });
    }

    /// Its status was changed by someone else, or a write failed: write it afresh next time.
    pub fn forget(&mut self, pool: &PoolRef) {
        self.written.remove(pool);
    }

    /// Whether a status pass over `pool` may begin at `now`: at most one per interval. `Ok`
    /// records it; `Err` names when the next may begin (ask again then: what arrived meanwhile
    /// is all in that pass).
    pub fn begin_pass(&mut self, pool: &PoolRef, now: Instant) -> Result<(), Instant> {
        if let Some(last) = self.passes.get(pool)
            && now < *last + self.min_interval
        {
            return Err(*last + self.min_interval);
        }
        self.passes.insert(pool.clone(), now);
        Ok(())
    }

    /// The pool is gone: nothing about it is kept.
    pub fn remove(&mut self, pool: &PoolRef) {
        self.written.remove(pool);
        self.passes.remove(pool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(generation: i64) -> BackendPoolStatus {
        BackendPoolStatus {
            observed_generation: Some(generation),
            ..Default::default()
        }
    }

    #[test]
    fn first_status_is_written_at_once() {
        let c = Coalescer::new(Duration::from_secs(1));
        let pool = PoolRef::new("shop", "web");
        assert_eq!(c.decide(&pool, &status(1), Instant::now()), Decision::Write);
    }

    #[test]
    fn unchanged_status_is_never_rewritten() {
        let mut c = Coalescer::new(Duration::from_secs(1));
        let pool = PoolRef::new("shop", "web");
        let t0 = Instant::now();
        c.wrote(&pool, status(1), t0);
        for secs in [0, 1, 60, 3600] {
            let at = t0 + Duration::from_secs(secs);
            assert_eq!(c.decide(&pool, &status(1), at), Decision::Unchanged);
        }
    }

    #[test]
    fn changes_are_held_to_one_write_per_interval() {
        let mut c = Coalescer::new(Duration::from_secs(1));
        let pool = PoolRef::new("shop", "web");
        let t0 = Instant::now();
        c.wrote(&pool, status(1), t0);
        let soon = t0 + Duration::from_millis(300);
        let due = t0 + Duration::from_secs(1);
        assert_eq!(c.decide(&pool, &status(2), soon), Decision::WaitUntil(due));
        assert_eq!(c.decide(&pool, &status(3), soon), Decision::WaitUntil(due));
        assert_eq!(c.decide(&pool, &status(3), due), Decision::Write);
        c.wrote(&pool, status(3), due);
        assert_eq!(
            c.decide(&pool, &status(4), due + Duration::from_millis(10)),
            Decision::WaitUntil(due + Duration::from_secs(1))
        );
    }

    #[test]
    fn pools_are_coalesced_independently_and_forget_resets() {
        let mut c = Coalescer::new(Duration::from_secs(1));
        let (a, b) = (PoolRef::new("shop", "a"), PoolRef::new("shop", "b"));
        let t0 = Instant::now();
        c.wrote(&a, status(1), t0);
        assert_eq!(c.decide(&b, &status(2), t0), Decision::Write);
        c.forget(&a);
        assert_eq!(c.decide(&a, &status(2), t0), Decision::Write);
    }

    #[test]
    fn passes_are_held_to_one_per_interval_per_pool() {
        let mut c = Coalescer::new(Duration::from_secs(1));
        let (a, b) = (PoolRef::new("shop", "a"), PoolRef::new("shop", "b"));
        let t0 = Instant::now();
        assert_eq!(c.begin_pass(&a, t0), Ok(()), "the first pass runs at once");
        let due = t0 + Duration::from_secs(1);
        for ms in [0, 1, 500, 999] {
            let at = t0 + Duration::from_millis(ms);
            assert_eq!(
                c.begin_pass(&a, at),
                Err(due),
                "{ms} ms after the last pass"
            );
        }
        assert_eq!(
            c.begin_pass(&b, t0),
            Ok(()),
            "another pool has its own pace"
        );
        assert_eq!(c.begin_pass(&a, due), Ok(()), "due at the interval");
        let next = due + Duration::from_secs(1);
        assert_eq!(
            c.begin_pass(&a, due),
            Err(next),
            "counted from the pass that ran"
        );
        // A refused pass is not a pass: the pace stays one per interval, not one per refusal.
        assert_eq!(c.begin_pass(&a, next), Ok(()));
    }

    #[test]
    fn a_removed_pool_starts_afresh() {
        let mut c = Coalescer::new(Duration::from_secs(1));
        let pool = PoolRef::new("shop", "web");
        let t0 = Instant::now();
        c.wrote(&pool, status(1), t0);
        assert_eq!(c.begin_pass(&pool, t0), Ok(()));
        c.remove(&pool);
        assert_eq!(c.begin_pass(&pool, t0), Ok(()));
        assert_eq!(c.decide(&pool, &status(1), t0), Decision::Write);
    }
}
