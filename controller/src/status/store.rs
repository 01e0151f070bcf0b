//! The latest health report of every connected sidecar stream, per pool, kept as running
//! totals (`tally`). Each `PoolHealth` a sidecar sends replaces its previous one for that pool
//! (`Report` sends complete pool state) or is applied onto it (`ReportChanges` sends what
//! changed), and closing the stream forgets the sidecar. Pools
//! whose reports changed are marked dirty and the status writer is woken. A stream that has
//! gone quiet past the freshness limit stops counting when the pool is next read, and counts
//! again once it speaks.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rollcall_api::roster::{PoolHealth, PoolRef, SidecarId};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::tally::PoolTally;

/// One Report stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(u64);

impl StreamId {
    /// A stream id outside any store (tests of the pure parts).
    pub const fn new(id: u64) -> Self {
        Self(id)
    }
}

#[derive(Debug)]
struct Session {
    sidecar: SidecarId,
    last_seen: Instant,
    /// Pools this stream has reported on.
    pools: HashSet<PoolRef>,
}

#[derive(Debug, Default)]
struct Reports {
    sessions: HashMap<StreamId, Session>,
    pools: HashMap<PoolRef, PoolTally>,
}

#[derive(Debug, Default)]
pub struct ReportStore {
    reports: Mutex<Reports>,
    dirty: Mutex<HashSet<PoolRef>>,
    next: AtomicU64,
    changed: Notify,
}

// === impl ReportStore ===

impl ReportStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn open(&self, sidecar: SidecarId, now: Instant) -> StreamId {
        let id = StreamId(self.next.fetch_add(1, Ordering::Relaxed));
        let session = Session {
            sidecar,
            last_seen: now,
            pools: HashSet::new(),
        };
        self.reports.lock().sessions.insert(id, session);
        id
    }

    /// Name the sidecar of a stream whose caller was anonymous until its first report.
    pub fn identify(&self, id: StreamId, sidecar: SidecarId) {
        if let Some(s) = self.reports.lock().sessions.get_mut(&id) {
            s.sidecar = sidecar;
        }
    }

    /// Record a pool's complete health; marks the pool dirty when it changed.
    pub fn record(&self, id: StreamId, health: PoolHealth, now: Instant) {
        self.ingest(id, health, now, false);
    }

    /// Take one `PoolHealth` of a `ReportChanges` stream: a part of a complete report, or
    /// changes onto the stream's previous report. Returns `true` when changes came for a pool
    /// the stream has no complete report of here: they are dropped, and the sidecar should be
    /// asked for a complete report.
    pub fn record_changes(&self, id: StreamId, changes: PoolHealth, now: Instant) -> bool {
        self.ingest(id, changes, now, true)
    }

    /// The stream's report on `pool` was refused: forget what it said of the pool before, so
    /// later changes are not applied onto a history with a gap.
    pub fn forget(&self, id: StreamId, pool: &PoolRef) {
        let mut reports = self.reports.lock();
        if let Some(s) = reports.sessions.get_mut(&id) {
            s.pools.remove(pool);
        }
        let Some(tally) = reports.pools.get_mut(pool) else {
            return;
        };
        let had = tally.remove(id);
        if tally.is_empty() {
            reports.pools.remove(pool);
        }
        drop(reports);
        if had {
            self.mark(pool.clone());
        }
    }

    /// Forget the stream's reports on every pool `keep` refuses: a pod that stopped watching a
    /// pool stops counting on it at its next message, whichever RPC it reports on, instead of
    /// its last report staying fresh on its heartbeats. `keep` runs with the store unlocked.
    pub fn retain(&self, id: StreamId, keep: impl Fn(&PoolRef) -> bool) -> usize {
        let reported: Vec<PoolRef> = match self.reports.lock().sessions.get(&id) {
            Some(s) => s.pools.iter().cloned().collect(),
            None => return 0,
        };
        let dropped: Vec<PoolRef> = reported.into_iter().filter(|p| !keep(p)).collect();
        for pool in &dropped {
            self.forget(id, pool);
        }
        dropped.len()
    }

    fn ingest(&self, id: StreamId, health: PoolHealth, now: Instant, changes: bool) -> bool {
        let mut reports = self.reports.lock();
        let Reports { sessions, pools } = &mut *reports;
        let Some(s) = sessions.get_mut(&id) else {
            return false;
        };
        s.last_seen = now;
        if !s.pools.contains(&health.pool) {
            s.pools.insert(health.pool.clone());
        }
        let tally = match pools.get_mut(&health.pool) {
            Some(tally) => tally,
            None => pools.entry(health.pool.clone()).or_default(),
        };
        let mut base_missing = false;
        let changed = if !changes {
            tally.record(id, &health)
        } else if health.complete || tally.in_parts(id) {
            tally.record_part(id, &health, health.complete, !health.continued)
        } else if tally.has_report(id) {
            tally.record_changes(id, &health)
        } else {
            // Changes onto nothing would count as a report missing most of the pool (a
            // restarted controller would read its endpoints as unreported): wait for the
            // complete report the sidecar is asked for.
            base_missing = true;
            false
        };
        drop(reports);
        if changed {
            self.mark(health.pool);
        }
        base_missing
    }

    pub fn heartbeat(&self, id: StreamId, now: Instant) {
        if let Some(s) = self.reports.lock().sessions.get_mut(&id) {
            s.last_seen = now;
        }
    }

    /// The stream ended: its pools lose a reporter.
    pub fn close(&self, id: StreamId) {
        let mut reports = self.reports.lock();
        let Some(session) = reports.sessions.remove(&id) else {
            return;
        };
        for pool in &session.pools {
            if let Some(tally) = reports.pools.get_mut(pool) {
                tally.remove(id);
                if tally.is_empty() {
                    reports.pools.remove(pool);
                }
            }
        }
        drop(reports);
        for pool in session.pools {
            self.mark(pool);
        }
    }

    /// Run `f` on the totals of `pool` counting the reports of streams seen at or after
    /// `fresh_after` (an empty tally when nobody reports on it). The store is locked meanwhile:
    /// keep `f` to reading.
    pub fn with_pool<R>(
        &self,
        pool: &PoolRef,
        fresh_after: Instant,
        f: impl FnOnce(&PoolTally) -> R,
    ) -> R {
        let mut reports = self.reports.lock();
        let Reports { sessions, pools } = &mut *reports;
        let Some(tally) = pools.get_mut(pool) else {
            return f(&PoolTally::default());
        };
        let ids: Vec<StreamId> = tally.reporter_ids().collect();
        for id in ids {
            let fresh = sessions
                .get(&id)
                .is_some_and(|s| s.last_seen >= fresh_after);
            tally.set_counted(id, fresh);
        }
        f(tally)
    }

    /// The sidecars whose reports about `pool` count (seen at or after `fresh_after`), sorted.
    pub fn reporters(&self, pool: &PoolRef, fresh_after: Instant) -> Vec<SidecarId> {
        let reports = self.reports.lock();
        let mut out: Vec<SidecarId> = reports
            .sessions
            .values()
            .filter(|s| s.last_seen >= fresh_after && s.pools.contains(pool))
            .map(|s| s.sidecar.clone())
            .collect();
        out.sort();
        out
    }

    /// Something else about `pool` that its status shows changed (a sidecar started or stopped
    /// watching it): recompute its status.
    pub fn touch(&self, pool: PoolRef) {
        self.mark(pool);
    }

    /// Pools whose reports changed since the last call.
    pub fn take_dirty(&self) -> HashSet<PoolRef> {
        std::mem::take(&mut *self.dirty.lock())
    }

    /// Resolves when some pool became dirty.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    fn mark(&self, pool: PoolRef) {
        self.dirty.lock().insert(pool);
        self.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(pool: &PoolRef) -> PoolHealth {
        PoolHealth {
            pool: pool.clone(),
            roster_version: 1,
            panic: false,
            endpoints: Vec::new(),
            refused: None,
            removed: Vec::new(),
            complete: false,
            continued: false,
        }
    }

    #[test]
    fn retain_forgets_the_pools_a_pod_stopped_watching_and_keeps_the_rest() {
        let store = ReportStore::new();
        let now = Instant::now();
        let (web, api) = (PoolRef::new("shop", "web"), PoolRef::new("shop", "api"));
        let sidecar = SidecarId {
            namespace: "shop".into(),
            pod: "front-1".into(),
            instance: "i".into(),
        };
        let id = store.open(sidecar.clone(), now);
        store.record(id, report(&web), now);
        store.record(id, report(&api), now);
        store.take_dirty();
        assert_eq!(store.reporters(&web, now), vec![sidecar.clone()]);

        assert_eq!(store.retain(id, |p| *p == api), 1);
        assert!(
            store.reporters(&web, now).is_empty(),
            "web no longer counts it"
        );
        assert!(store.with_pool(&web, now, |t| !t.has_report(id)));
        assert_eq!(store.reporters(&api, now), vec![sidecar]);
        assert_eq!(
            store.take_dirty(),
            HashSet::from([web]),
            "web's status is recomputed"
        );
        assert_eq!(store.retain(id, |p| *p == api), 0, "nothing left to forget");
    }
}
