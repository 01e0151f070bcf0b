//! One Watch stream and one Report stream per pod. A sidecar that reconnects (or restarts)
//! replaces its previous streams, which end with an explanation, so a half-open connection
//! is never counted twice and one pod cannot open sessions without end to outvote the fleet.
//! The pools a pod's current Watch names are the only pools its reports may speak about.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rollcall_api::roster::PoolRef;
use tokio::sync::watch;

/// A pod: `(namespace, name)`.
pub type PodKey = (String, String);

#[derive(Debug)]
struct Entry {
    id: u64,
    pools: BTreeSet<PoolRef>,
    end: watch::Sender<bool>,
}

/// The live sessions of every pod.
#[derive(Debug, Default)]
pub struct Sessions {
    next: AtomicU64,
    watches: Mutex<HashMap<PodKey, Entry>>,
    reports: Mutex<HashMap<PodKey, Entry>>,
}

/// A session's handle: its id, and a receiver that turns true when a newer one replaced it.
#[derive(Debug)]
pub struct Session {
    pub id: u64,
    pub replaced: watch::Receiver<bool>,
}

impl Session {
    /// Resolves once a newer session of the same pod took over.
    pub async fn superseded(&mut self) {
        if self.replaced.wait_for(|r| *r).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn begin(
    map: &Mutex<HashMap<PodKey, Entry>>,
    id: u64,
    pod: PodKey,
    pools: BTreeSet<PoolRef>,
) -> Session {
    let (end, replaced) = watch::channel(false);
    if let Some(old) = map.lock().insert(pod, Entry { id, pools, end }) {
        let _ = old.end.send(true);
    }
    Session { id, replaced }
}

fn finish(map: &Mutex<HashMap<PodKey, Entry>>, pod: &PodKey, id: u64) {
    let mut map = map.lock();
    if map.get(pod).is_some_and(|e| e.id == id) {
        map.remove(pod);
    }
}

// === impl Sessions ===

impl Sessions {
    fn id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A new Watch of `pod`, replacing (and ending) any earlier one.
    pub fn begin_watch(&self, pod: PodKey, pools: BTreeSet<PoolRef>) -> Session {
        begin(&self.watches, self.id(), pod, pools)
    }

    pub fn end_watch(&self, pod: &PodKey, id: u64) {
        finish(&self.watches, pod, id);
    }

    /// A new Report stream of `pod`, replacing (and ending) any earlier one.
    pub fn begin_report(&self, pod: PodKey) -> Session {
        begin(&self.reports, self.id(), pod, BTreeSet::new())
    }

    pub fn end_report(&self, pod: &PodKey, id: u64) {
        finish(&self.reports, pod, id);
    }

    /// Whether `pod`'s current Watch names `pool`.
    pub fn watches(&self, pod: &PodKey, pool: &PoolRef) -> bool {
        self.watches
            .lock()
            .get(pod)
            .is_some_and(|e| e.pools.contains(pool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodKey {
        ("shop".into(), name.into())
    }

    #[tokio::test]
    async fn a_newer_session_of_a_pod_replaces_the_older_one() {
        let sessions = Sessions::default();
        let web = PoolRef::new("shop", "web");
        let mut first = sessions.begin_watch(pod("a"), BTreeSet::from([web.clone()]));
        assert!(sessions.watches(&pod("a"), &web));
        let second = sessions.begin_watch(pod("a"), BTreeSet::new());
        first.superseded().await;
        assert!(
            !sessions.watches(&pod("a"), &web),
            "the newer watch names no pool"
        );
        // The old one ending does not remove the newer one.
        sessions.end_watch(&pod("a"), first.id);
        assert!(!*second.replaced.borrow());
        sessions.end_watch(&pod("a"), second.id);
        assert!(!sessions.watches(&pod("a"), &web));
    }

    #[tokio::test]
    async fn pods_have_their_own_sessions() {
        let sessions = Sessions::default();
        let a = sessions.begin_report(pod("a"));
        let _b = sessions.begin_report(pod("b"));
        assert!(!*a.replaced.borrow());
    }
}
