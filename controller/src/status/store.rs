//! The latest health report of every connected sidecar stream, per pool. Each `PoolHealth` a
//! sidecar sends replaces its previous one for that pool (the protocol sends complete pool
//! state), and closing the stream forgets the sidecar. Pools whose reports changed are marked
//! dirty and the status writer is woken.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rollcall_api::roster::{PoolHealth, PoolRef, SidecarId};
use tokio::sync::Notify;
use tokio::time::Instant;

/// One Report stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(u64);

/// What one sidecar last said about one pool.
#[derive(Clone, Debug, PartialEq)]
pub struct SidecarReport {
    pub sidecar: SidecarId,
    pub health: PoolHealth,
    /// Last report or heartbeat on the stream.
    pub last_seen: Instant,
}

#[derive(Debug)]
struct Session {
    sidecar: SidecarId,
    last_seen: Instant,
    pools: HashMap<PoolRef, PoolHealth>,
}

#[derive(Debug, Default)]
pub struct ReportStore {
    sessions: Mutex<HashMap<StreamId, Session>>,
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
            pools: HashMap::new(),
        };
        self.sessions.lock().insert(id, session);
        id
    }

    /// Name the sidecar of a stream whose caller was anonymous until its first report.
    pub fn identify(&self, id: StreamId, sidecar: SidecarId) {
        if let Some(s) = self.sessions.lock().get_mut(&id) {
            s.sidecar = sidecar;
        }
    }

    /// Record a pool's complete health; marks the pool dirty when it changed.
    pub fn record(&self, id: StreamId, health: PoolHealth, now: Instant) {
        let mut sessions = self.sessions.lock();
        let Some(s) = sessions.get_mut(&id) else {
            return;
        };
        s.last_seen = now;
        if s.pools.get(&health.pool) != Some(&health) {
            self.mark(health.pool.clone());
            s.pools.insert(health.pool.clone(), health);
        }
    }

    pub fn heartbeat(&self, id: StreamId, now: Instant) {
        if let Some(s) = self.sessions.lock().get_mut(&id) {
            s.last_seen = now;
        }
    }

    /// The stream ended: its pools lose a reporter.
    pub fn close(&self, id: StreamId) {
        if let Some(s) = self.sessions.lock().remove(&id) {
            for pool in s.pools.into_keys() {
                self.mark(pool);
            }
        }
    }

    /// Reports about `pool` seen at or after `fresh_after`, ordered by sidecar.
    pub fn for_pool(&self, pool: &PoolRef, fresh_after: Instant) -> Vec<SidecarReport> {
        let mut out: Vec<SidecarReport> = self
            .sessions
            .lock()
            .values()
            .filter(|s| s.last_seen >= fresh_after)
            .filter_map(|s| {
                s.pools.get(pool).map(|h| SidecarReport {
                    sidecar: s.sidecar.clone(),
                    health: h.clone(),
                    last_seen: s.last_seen,
                })
            })
            .collect();
        out.sort_by(|a, b| a.sidecar.cmp(&b.sidecar));
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
