//! A backend's counters and the way tests wait on them. Counting is lock-free; every change
//! wakes waiters (a `Notify`, only touched when someone waits), so a test waits for "three
//! requests arrived" instead of sleeping and hoping.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};

use parking_lot::Mutex;

use tokio::sync::Notify;

const STATUSES: usize = 600;

/// A snapshot of a backend's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Traffic requests that arrived (everything but `/healthz`), answered or not.
    pub requests: u64,
    /// `/healthz` requests that arrived, answered or not.
    pub health_checks: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// Traffic responses by status (the status line sent, also for responses broken on purpose).
    pub by_status: BTreeMap<u16, u64>,
}

impl Stats {
    /// Traffic responses sent with this status.
    pub fn status(&self, status: u16) -> u64 {
        self.by_status.get(&status).copied().unwrap_or(0)
    }

    /// Traffic responses sent, any status.
    pub fn responses(&self) -> u64 {
        self.by_status.values().sum()
    }
}

/// The live counters behind [`Stats`].
pub(crate) struct Counters {
    requests: AtomicU64,
    health_checks: AtomicU64,
    connections: AtomicU64,
    open_connections: AtomicU64,
    statuses: Box<[AtomicU64]>,
    /// The `x-request-id` of every traffic request that carried one, in arrival order.
    request_ids: Mutex<Vec<String>>,
    waiters: AtomicUsize,
    notify: Notify,
}

/// Keeps the waiter count right even when a waiting future is dropped (e.g. by a timeout).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

// === impl Counters ===

impl Counters {
    pub(crate) fn new() -> Self {
        Self {
            requests: AtomicU64::new(0),
            health_checks: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            open_connections: AtomicU64::new(0),
            statuses: (0..STATUSES).map(|_| AtomicU64::new(0)).collect(),
            request_ids: Mutex::new(Vec::new()),
            waiters: AtomicUsize::new(0),
            notify: Notify::new(),
        }
    }

    pub(crate) fn request(&self) {
        self.bump(&self.requests);
    }

    pub(crate) fn request_id(&self, id: &str) {
        self.request_ids.lock().push(id.to_owned());
    }

    /// The request ids seen since the last reset.
    pub(crate) fn request_ids(&self) -> Vec<String> {
        self.request_ids.lock().clone()
    }

    pub(crate) fn health_check(&self) {
        self.bump(&self.health_checks);
    }

    pub(crate) fn status(&self, status: u16) {
        if let Some(c) = self.statuses.get(usize::from(status)) {
            self.bump(c);
        }
    }

    pub(crate) fn connection_opened(&self) {
        self.open_connections.fetch_add(1, SeqCst);
        self.bump(&self.connections);
    }

    pub(crate) fn connection_closed(&self) {
        self.open_connections.fetch_sub(1, SeqCst);
        self.wake();
    }

    /// Zero every counter except open connections (those are a fact, not a history).
    pub(crate) fn reset(&self) {
        self.requests.store(0, SeqCst);
        self.health_checks.store(0, SeqCst);
        self.connections.store(0, SeqCst);
        for c in self.statuses.iter() {
            c.store(0, SeqCst);
        }
        self.request_ids.lock().clear();
        self.wake();
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let by_status = self
            .statuses
            .iter()
            .enumerate()
            .filter_map(|(s, c)| {
                let n = c.load(SeqCst);
                let s = u16::try_from(s).ok()?;
                (n > 0).then_some((s, n))
            })
            .collect();
        Stats {
            requests: self.requests.load(SeqCst),
            health_checks: self.health_checks.load(SeqCst),
            connections: self.connections.load(SeqCst),
            open_connections: self.open_connections.load(SeqCst),
            by_status,
        }
    }

    /// Resolves once `done` holds for a snapshot. Race-free: the wake-up is registered before
    /// the condition is checked, and a counter change after the check always wakes it.
    pub(crate) async fn wait_until(&self, done: impl Fn(&Stats) -> bool) {
        self.waiters.fetch_add(1, SeqCst);
        let _waiting = Waiting(&self.waiters);
        loop {
            let notified = self.notify.notified();
            if done(&self.snapshot()) {
                return;
            }
            notified.await;
        }
    }

    fn bump(&self, c: &AtomicU64) {
        c.fetch_add(1, SeqCst);
        self.wake();
    }

    fn wake(&self) {
        if self.waiters.load(SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }
}
