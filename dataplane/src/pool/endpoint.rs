//! One endpoint's live parts, shared by the pool's owner (which creates, drains and forgets it)
//! and the request path (which sends to it): its connections, its load for the balancer, its
//! `rollcall_attempts_total` counters (looked up once instead of per request), and the verdicts
//! that need no prompt action, counted here until the owner takes them: successes and 4xx.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus::IntCounter;
use tokio::time::Instant;

use crate::balance::EndpointLoad;
use crate::config::EndpointConfig;
use crate::metrics::{ATTEMPT_OUTCOMES, Metrics};
use crate::outcome::Outcome;
use crate::upstream::{KeepAlive, Upstream};

pub struct Endpoint {
    pub addr: SocketAddr,
    pub zone: Option<String>,
    pub upstream: Upstream,
    pub load: Arc<EndpointLoad>,
    /// One counter per outcome, in `ATTEMPT_OUTCOMES` order.
    attempts: Vec<IntCounter>,
    /// Successes not handed to the owner yet.
    pending_successes: AtomicU64,
    /// 4xx answers not handed to the owner yet (they only say the pool has traffic).
    pending_client_errors: AtomicU64,
}

/// Verdicts counted on the request path, handed to the owner together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Pending {
    pub successes: u64,
    pub client_errors: u64,
}

impl Endpoint {
    pub(super) fn new(
        pool: &str,
        config: &EndpointConfig,
        http2: bool,
        keepalive: KeepAlive,
        metrics: &Metrics,
        now: Instant,
    ) -> Self {
        let addr = config.address.to_string();
        Self {
            addr: config.address,
            zone: config.zone.clone(),
            upstream: Upstream::with_keepalive(config.address, http2, keepalive),
            load: Arc::new(EndpointLoad::with_weight(config.weight, now)),
            attempts: ATTEMPT_OUTCOMES
                .iter()
                .map(|outcome| metrics.attempts.with_label_values(&[pool, &addr, outcome]))
                .collect(),
            pending_successes: AtomicU64::new(0),
            pending_client_errors: AtomicU64::new(0),
        }
    }

    /// Count a success or a 4xx for the owner to take later.
    pub(super) fn add_pending(&self, client_error: bool) {
        let counter = if client_error {
            &self.pending_client_errors
        } else {
            &self.pending_successes
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Take what was counted since the last take.
    pub(super) fn take_pending(&self) -> Pending {
        Pending {
            successes: self.pending_successes.swap(0, Ordering::AcqRel),
            client_errors: self.pending_client_errors.swap(0, Ordering::AcqRel),
        }
    }

    /// Count one try in `rollcall_attempts_total`.
    pub fn count_attempt(&self, outcome: Outcome) {
        let label = outcome.attempt_label();
        if let Some(counter) = ATTEMPT_OUTCOMES
            .iter()
            .position(|o| *o == label)
            .and_then(|i| self.attempts.get(i))
        {
            counter.inc();
        }
    }
}
