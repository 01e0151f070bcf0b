//! The roster hub: the latest versioned roster of every pool, one `tokio::sync::watch` channel
//! per pool. Latest wins: a watcher that falls behind skips to the newest roster, so no queue
//! grows for a slow sidecar. A roster is published only when its content changed, and then
//! gets a new version; the wire forms (complete, in parts, as a delta against the previous
//! version) are encoded once per version, not once per sidecar. Publishing encodes only the
//! delta (what every up-to-date sidecar is sent); the complete forms are encoded the first
//! time a stream needs one, so a one-endpoint change to a large pool reaches the fleet without
//! first re-encoding every endpoint twice.
//!
//! Until the controller's caches are synced (`mark_synced`) an unknown pool has no state at all
//! and watchers wait, and a pool that existed at sync waits for its first reconcile, so a
//! restarting controller never tells sidecars a live pool is gone.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use rollcall_api::proto::encoded::EncodedRosterUpdate;
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{PoolRef, PoolState, RosterUpdate, UnavailableReason};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::FastSet;

/// One published state of a pool.
#[derive(Debug)]
pub struct Published {
    pub update: RosterUpdate,
    /// The policy as JSON, as the wire form carries it (empty when the pool has no roster).
    policy_json: String,
    /// `update` encoded for the wire as one message: what every stream that does not accept
    /// deltas is sent. Encoded on first use (`wire()`).
    wire: OnceLock<EncodedRosterUpdate>,
    /// `update` as the parts a delta-capable stream is sent when it needs the complete state
    /// (`rollcall_api::delta::parts`): one message unless the roster is large. Encoded on
    /// first use (`parts()`).
    parts: OnceLock<Vec<EncodedRosterUpdate>>,
    /// The change from the previous version, for delta-capable streams that hold it; `None`
    /// when there is no previous roster or the change is as large as a part.
    pub delta: Option<Delta>,
    /// Digest of the complete roster (`rollcall_api::delta::fingerprint`); empty when the pool
    /// has none. A sidecar that holds a roster with this fingerprint needs no snapshot.
    pub fingerprint: Vec<u8>,
    /// The roster's endpoint addresses (none when unavailable): what reports are checked
    /// against, built once per version instead of once per report.
    pub addresses: FastSet<SocketAddr>,
    /// When it was published, to measure push latency.
    pub at: Instant,
}

// === impl Published ===

impl Published {
    /// The complete state as one message.
    pub fn wire(&self) -> &EncodedRosterUpdate {
        self.wire
            .get_or_init(|| EncodedRosterUpdate::new(&self.message()))
    }

    /// The complete state as the parts a delta-capable stream is sent.
    pub fn parts(&self) -> &[EncodedRosterUpdate] {
        self.parts.get_or_init(|| {
            let message = self.message();
            match rollcall_api::delta::parts(&message) {
                parts if parts.len() > 1 => parts.iter().map(EncodedRosterUpdate::new).collect(),
                _ => vec![self.wire().clone()],
            }
        })
    }

    /// The complete state as a protobuf message, with its fingerprint.
    fn message(&self) -> pb::RosterUpdate {
        pb::RosterUpdate {
            fingerprint: self.fingerprint.clone(),
            ..rollcall_api::edge::roster_update(&self.update, self.policy_json.clone())
        }
    }
}

/// A published version as a delta against the one before it.
#[derive(Debug)]
pub struct Delta {
    /// The version it applies to.
    pub base: u64,
    pub wire: EncodedRosterUpdate,
}

/// What a watcher sees: nothing yet, or the latest state.
pub type Slot = Option<Arc<Published>>;

#[derive(Debug, Default)]
pub struct RosterHub {
    pools: RwLock<HashMap<PoolRef, watch::Sender<Slot>>>,
    synced: AtomicBool,
    /// Pools that existed at sync time and are not published yet: never "not found".
    expected: RwLock<HashSet<PoolRef>>,
}

// === impl RosterHub ===

impl RosterHub {
    pub fn new() -> Self {
        Self::default()
    }

    /// Publish `state` for `pool` if it differs from the current one. Returns the new version,
    /// or `None` when nothing changed. Versions are `max(previous + 1, now_unix_ms)`, so they
    /// keep increasing across controller restarts as long as clocks are sane.
    pub fn publish(&self, pool: &PoolRef, state: PoolState, now_unix_ms: u64) -> Option<u64> {
        if !self.expected.read().is_empty() {
            self.expected.write().remove(pool);
        }
        let tx = self.sender(pool);
        let mut version = None;
        tx.send_if_modified(|slot| {
            let prev = slot.as_ref().map(|p| p.update.version);
            if slot.as_ref().is_some_and(|p| p.update.state == state) {
                return false;
            }
            let v = prev
                .map_or(now_unix_ms, |p| (p + 1).max(now_unix_ms))
                .max(1);
            let previous = slot.as_deref();
            *slot = Some(Arc::new(encode(pool, v, state, previous)));
            version = Some(v);
            true
        });
        version
    }

    /// The pool was deleted: watchers get `PoolDeleted`.
    pub fn remove(&self, pool: &PoolRef, now_unix_ms: u64) -> Option<u64> {
        let state = PoolState::Unavailable {
            reason: UnavailableReason::PoolDeleted,
            message: format!("BackendPool {pool} was deleted"),
        };
        self.publish(pool, state, now_unix_ms)
    }

    /// Subscribe to a pool; the receiver's current value is the snapshot.
    pub fn subscribe(&self, pool: &PoolRef, now_unix_ms: u64) -> watch::Receiver<Slot> {
        let rx = self.sender(pool).subscribe();
        let known = self.expected.read().contains(pool);
        if self.synced.load(Ordering::Acquire) && !known && rx.borrow().is_none() {
            self.publish(pool, not_found(pool), now_unix_ms);
        }
        rx
    }

    /// The caches are synced and `existing` are the pools they hold: every other pool nobody
    /// published is now known not to exist. Existing pools keep waiting for their first
    /// reconcile, so a sidecar is never told a live pool is gone.
    /// Whether this hub serves: the caches synced under a leader (a standby never marks it).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn mark_synced(&self, now_unix_ms: u64, existing: impl IntoIterator<Item = PoolRef>) {
        {
            let mut expected = self.expected.write();
            expected.extend(existing);
            let pools = self.pools.read();
            expected.retain(|p| pools.get(p).is_none_or(|tx| tx.borrow().is_none()));
        }
        self.synced.store(true, Ordering::Release);
        let expected = self.expected.read().clone();
        let pending: Vec<PoolRef> = self
            .pools
            .read()
            .iter()
            .filter(|(p, tx)| tx.borrow().is_none() && !expected.contains(*p))
            .map(|(p, _)| p.clone())
            .collect();
        for pool in pending {
            self.publish(&pool, not_found(&pool), now_unix_ms);
        }
    }

    pub fn current(&self, pool: &PoolRef) -> Slot {
        self.pools
            .read()
            .get(pool)
            .and_then(|tx| tx.borrow().clone())
    }

    /// How many streams watch `pool` right now.
    pub fn watchers(&self, pool: &PoolRef) -> usize {
        self.pools
            .read()
            .get(pool)
            .map_or(0, watch::Sender::receiver_count)
    }

    /// Pools whose current state is not "gone" (a roster or a problem).
    pub fn live(&self) -> Vec<PoolRef> {
        self.pools
            .read()
            .iter()
            .filter(|(_, tx)| {
                tx.borrow()
                    .as_deref()
                    .is_some_and(|p| match &p.update.state {
                        PoolState::Roster(_) => true,
                        PoolState::Unavailable { reason, .. } => !reason.pool_gone(),
                    })
            })
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Forget pools nobody watches and that have no roster (requests for names that never
    /// existed), so a sidecar asking for junk cannot grow memory.
    pub fn prune(&self) {
        self.pools.write().retain(|_, tx| {
            tx.receiver_count() > 0
                || matches!(tx.borrow().as_deref(), Some(p) if matches!(p.update.state, PoolState::Roster(_)))
        });
    }

    fn sender(&self, pool: &PoolRef) -> watch::Sender<Slot> {
        if let Some(tx) = self.pools.read().get(pool) {
            return tx.clone();
        }
        self.pools
            .write()
            .entry(pool.clone())
            .or_insert_with(|| watch::Sender::new(None))
            .clone()
    }
}

fn not_found(pool: &PoolRef) -> PoolState {
    PoolState::Unavailable {
        reason: UnavailableReason::PoolNotFound,
        message: format!("BackendPool {pool} does not exist"),
    }
}

/// The delta from `previous` to `next`, when both are rosters and the change is small.
fn delta(
    pool: &PoolRef,
    version: u64,
    previous: Option<&Published>,
    next: &PoolState,
    fingerprint: &[u8],
) -> Option<Delta> {
    let previous = previous?;
    let (PoolState::Roster(base), PoolState::Roster(next)) = (&previous.update.state, next) else {
        return None;
    };
    let change = rollcall_api::delta::diff(base, next);
    let base_version = previous.update.version;
    match rollcall_api::delta::delta_message(
        &pool.into(),
        version,
        base_version,
        &change,
        next,
        fingerprint,
    ) {
        Ok(message) => message.map(|m| Delta {
            base: base_version,
            wire: EncodedRosterUpdate::new(&m),
        }),
        Err(_) => None,
    }
}

/// Version `version` of `pool`: its fingerprint, its delta from `previous` and its addresses
/// now; its complete wire forms when first asked for.
fn encode(
    pool: &PoolRef,
    version: u64,
    state: PoolState,
    previous: Option<&Published>,
) -> Published {
    let policy_json = match &state {
        PoolState::Roster(roster) => serde_json::to_string(&roster.policy),
        PoolState::Unavailable { .. } => Ok(String::new()),
    };
    let (state, policy_json) = match policy_json {
        Ok(json) => (state, json),
        Err(e) => (
            PoolState::Unavailable {
                reason: UnavailableReason::InvalidPolicy,
                message: format!("policy cannot be encoded: {e}"),
            },
            String::new(),
        ),
    };
    let (fingerprint, addresses) = match &state {
        PoolState::Roster(roster) => (
            rollcall_api::delta::fingerprint(roster, &policy_json),
            roster.endpoints.iter().map(|e| e.addr).collect(),
        ),
        PoolState::Unavailable { .. } => (Vec::new(), FastSet::default()),
    };
    Published {
        delta: delta(pool, version, previous, &state, &fingerprint),
        update: RosterUpdate {
            pool: pool.clone(),
            version,
            state,
        },
        policy_json,
        wire: OnceLock::new(),
        parts: OnceLock::new(),
        fingerprint,
        addresses,
        at: Instant::now(),
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
