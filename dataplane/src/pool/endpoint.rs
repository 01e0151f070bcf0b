//! One endpoint's live parts, shared by the pool's owner (which creates, drains and forgets it)
//! and the request path (which sends to it): its connections, its load for the balancer, and its
//! `rollcall_attempts_total` counters, looked up once instead of per request.

use std::net::SocketAddr;
use std::sync::Arc;

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
