//! One endpoint's live parts, shared by the pool's owner (which creates, drains and forgets it)
//! and the request path (which sends to it): its connections, its load for the balancer (held
//! here, not in an allocation of its own: the selectors' candidates are these endpoints), and its
//! `rollcall_attempts_total` counters, each looked up once, on its first use, instead of per
//! request. A series exists only once an endpoint has had such a try: with thousands of
//! endpoints, one series per endpoint and outcome made up front was most of the sidecar's
//! memory (about 4 KiB per endpoint).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use prometheus::{IntCounter, IntCounterVec};
use tokio::time::Instant;

use super::settings::{Http1Engine, Tuning};
use crate::balance::{Balanced, EndpointLoad, HoldsLoad, InFlight};
use crate::config::EndpointConfig;
use crate::metrics::{ATTEMPT_OUTCOMES, Metrics};
use crate::outcome::Outcome;
use crate::upstream::{IdleConnections, Upstream};

type AttemptCounters = [OnceLock<IntCounter>; ATTEMPT_OUTCOMES.len()];

/// What every endpoint of one pool shares, held once per pool instead of per endpoint: the
/// pool's name and the `rollcall_attempts_total` family its series are made from.
#[derive(Debug)]
pub struct PoolSeries {
    pool: Arc<str>,
    attempts: IntCounterVec,
}

impl PoolSeries {
    pub fn new(pool: &Arc<str>, metrics: &Metrics) -> Arc<Self> {
        Arc::new(Self {
            pool: Arc::clone(pool),
            attempts: metrics.attempts.clone(),
        })
    }
}

pub struct Endpoint {
    /// Shared by the pool's endpoints in the same zone (`Core` interns it).
    pub zone: Option<Arc<str>>,
    pub upstream: Upstream,
    pub load: EndpointLoad,
    /// One counter per outcome, in `ATTEMPT_OUTCOMES` order, made on first use; the slots
    /// themselves only once the endpoint has had a try (112 bytes an endpoint never tried
    /// does not hold: most of a large pool, for a sidecar that sends to few of it).
    attempts: OnceLock<Box<AttemptCounters>>,
    series: Arc<PoolSeries>,
}

impl Endpoint {
    pub(super) fn new(
        series: &Arc<PoolSeries>,
        config: &EndpointConfig,
        zone: Option<Arc<str>>,
        http2: bool,
        tuning: &Tuning,
        idle: &Arc<IdleConnections>,
        now: Instant,
    ) -> Self {
        Self {
            zone,
            upstream: Upstream::in_pool(config.address, http2, idle)
                .with_direct_http1(tuning.http1_engine == Http1Engine::Fast),
            load: EndpointLoad::with_weight(config.weight, now),
            attempts: OnceLock::new(),
            series: Arc::clone(series),
        }
    }

    /// Where the endpoint is (kept once, by its connections).
    pub fn addr(&self) -> SocketAddr {
        self.upstream.addr()
    }

    /// Count a request to this endpoint in flight until the guard is dropped (a tunnel).
    pub fn start(self: &Arc<Self>) -> InFlight {
        InFlight::start(Arc::clone(self) as Arc<dyn HoldsLoad>)
    }

    /// Count a try sent `now` in flight and watch it for a stall (`InFlight::start_try`).
    pub fn start_try(self: &Arc<Self>, now: Instant) -> InFlight {
        InFlight::start_try(Arc::clone(self) as Arc<dyn HoldsLoad>, now)
    }

    /// Count one try in `rollcall_attempts_total`.
    pub fn count_attempt(&self, outcome: Outcome) {
        let label = outcome.attempt_label();
        let Some(i) = ATTEMPT_OUTCOMES.iter().position(|o| *o == label) else {
            return;
        };
        let slots = self
            .attempts
            .get_or_init(|| Box::new(std::array::from_fn(|_| OnceLock::new())));
        // `slots` has one per outcome, so the index is in range.
        slots[i]
            .get_or_init(|| {
                let addr = self.addr().to_string();
                self.series
                    .attempts
                    .with_label_values(&[&*self.series.pool, &addr, label])
            })
            .inc();
    }
}

impl HoldsLoad for Endpoint {
    fn load(&self) -> &EndpointLoad {
        &self.load
    }
}

impl Balanced for Endpoint {
    fn addr(&self) -> SocketAddr {
        self.upstream.addr()
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr())
            .field("zone", &self.zone)
            .field("load", &self.load)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_series_appear_with_the_first_try_of_each_outcome() {
        let metrics = Metrics::new().unwrap();
        let pool: Arc<str> = Arc::from("shop/web");
        let config = EndpointConfig {
            address: "10.0.0.1:8080".parse().unwrap(),
            zone: None,
            weight: 1,
            terminating: false,
        };
        let endpoint = Endpoint::new(
            &PoolSeries::new(&pool, &metrics),
            &config,
            None,
            false,
            &Tuning::default(),
            &IdleConnections::new(1),
            Instant::now(),
        );
        let series = |m: &Metrics| -> Vec<String> {
            m.render()
                .lines()
                .filter(|l| l.starts_with("rollcall_attempts_total{"))
                .map(String::from)
                .collect()
        };
        assert!(series(&metrics).is_empty(), "no try, no series");
        endpoint.count_attempt(Outcome::Answered(200));
        endpoint.count_attempt(Outcome::Answered(204));
        endpoint.count_attempt(Outcome::ConnectFailed);
        let lines = series(&metrics);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines.iter().any(|l| l.contains("outcome=\"success\"")
                && l.contains("endpoint=\"10.0.0.1:8080\"")
                && l.contains("pool=\"shop/web\"")
                && l.ends_with(" 2")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("outcome=\"connect_failure\"") && l.ends_with(" 1")),
            "{lines:?}"
        );
        metrics.forget_endpoint("shop/web", "10.0.0.1:8080");
        assert!(
            series(&metrics).is_empty(),
            "a forgotten endpoint leaves nothing"
        );
    }
}
