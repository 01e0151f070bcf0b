//! Fixtures shared by the balancing tests: addresses, a pool of endpoint loads, seeded random
//! number generators and a small discrete-time simulation of real traffic (requests arrive at
//! a fixed pace, stay in flight for their endpoint's latency, then succeed or fail). Time is
//! only ever added to a fixed start, never read, so every result is reproducible.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rollcall_api::policy::{Algorithm, LoadBalancer};
use tokio::time::Instant;

use super::{Balanced, Candidate, EndpointLoad, HoldsLoad, InFlight, Selector, ShareTracker};
use crate::outcome::Verdict;

pub(crate) fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 8080))
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

pub(crate) fn config(algorithm: Algorithm) -> LoadBalancer {
    LoadBalancer {
        algorithm,
        hash_header: Some("x-user".into()),
        ..LoadBalancer::default()
    }
}

pub(crate) const ALL: [Algorithm; 4] = [
    Algorithm::LeastRequest,
    Algorithm::RoundRobin,
    Algorithm::PeakEwma,
    Algorithm::RingHash,
];

/// What the tests' selectors pick: an address and a load the fixture keeps too.
#[derive(Debug)]
pub(crate) struct TestEndpoint {
    pub(crate) addr: SocketAddr,
    pub(crate) load: Arc<EndpointLoad>,
}

impl HoldsLoad for TestEndpoint {
    fn load(&self) -> &EndpointLoad {
        &self.load
    }
}

impl Balanced for TestEndpoint {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// A pool of endpoints `10.0.0.1..=n` with their loads and share tracker.
pub(crate) struct Fixture {
    pub(crate) t0: Instant,
    pub(crate) share: Arc<ShareTracker>,
    pub(crate) loads: Vec<Arc<EndpointLoad>>,
}

impl Fixture {
    pub(crate) fn new(n: u8) -> Self {
        Self::with_weights(&vec![1; usize::from(n)])
    }

    pub(crate) fn with_weights(weights: &[u32]) -> Self {
        let t0 = Instant::now();
        let loads = weights
            .iter()
            .map(|&w| Arc::new(EndpointLoad::with_weight(w, t0)))
            .collect();
        Self {
            t0,
            share: Arc::new(ShareTracker::new(t0)),
            loads,
        }
    }

    pub(crate) fn at(&self, millis: u64) -> Instant {
        self.t0 + ms(millis)
    }

    pub(crate) fn candidates(&self, factors: &[f64]) -> Vec<Candidate<TestEndpoint>> {
        self.loads
            .iter()
            .enumerate()
            .map(|(i, load)| Candidate {
                endpoint: Arc::new(TestEndpoint {
                    addr: addr(index_u8(i + 1)),
                    load: Arc::clone(load),
                }),
                weight_factor: factors.get(i).copied().unwrap_or(1.0),
            })
            .collect()
    }

    pub(crate) fn selector(&self, algorithm: Algorithm) -> Selector<TestEndpoint> {
        self.selector_with(&config(algorithm), &[])
    }

    pub(crate) fn selector_with(
        &self,
        config: &LoadBalancer,
        factors: &[f64],
    ) -> Selector<TestEndpoint> {
        Selector::new(config, self.candidates(factors), Arc::clone(&self.share))
    }

    /// Index of the endpoint at `addr` (endpoint `10.0.0.k` has index `k - 1`).
    pub(crate) fn index(addr: SocketAddr) -> usize {
        match addr {
            SocketAddr::V4(a) => usize::from(a.ip().octets()[3]) - 1,
            SocketAddr::V6(_) => usize::MAX,
        }
    }

    /// Hold `n` requests in flight on endpoint `index`.
    pub(crate) fn hold(&self, index: usize, n: usize) -> Vec<InFlight> {
        (0..n).map(|_| self.loads[index].start()).collect()
    }

    /// Give endpoint `index` a latency history of successes.
    pub(crate) fn succeed(&self, index: usize, latency: Duration, at: Instant) {
        self.loads[index]
            .start()
            .finish(Verdict::Success, latency, at);
    }
}

fn index_u8(i: usize) -> u8 {
    u8::try_from(i).unwrap_or(u8::MAX)
}

/// How a simulated backend answers.
#[derive(Clone, Copy)]
pub(crate) struct Backend {
    pub(crate) latency: Duration,
    pub(crate) failure_rate: f64,
}

impl Backend {
    pub(crate) fn healthy(latency_ms: u64) -> Self {
        Self {
            latency: ms(latency_ms),
            failure_rate: 0.0,
        }
    }

    pub(crate) fn failing(latency_ms: u64, failure_rate: f64) -> Self {
        Self {
            latency: ms(latency_ms),
            failure_rate,
        }
    }
}

/// Send `requests` requests, one every `gap_ms`, through `selector` to `backends` (one per
/// fixture endpoint) and return how many each endpoint received.
pub(crate) fn simulate(
    fixture: &Fixture,
    selector: &Selector<TestEndpoint>,
    backends: &[Backend],
    requests: u64,
    gap_ms: u64,
    seed: u64,
) -> Vec<u64> {
    let mut counts = vec![0; backends.len()];
    for (_, index) in simulate_over_time(fixture, selector, requests, gap_ms, seed, |index, _| {
        backends[index]
    }) {
        counts[index] += 1;
    }
    counts
}

/// [`simulate`] with backends that change over time: `backend(index, now_ms)` says how endpoint
/// `index` answers a request sent at `now_ms`. Returns every pick as `(now_ms, index)`.
pub(crate) fn simulate_over_time(
    fixture: &Fixture,
    selector: &Selector<TestEndpoint>,
    requests: u64,
    gap_ms: u64,
    seed: u64,
    backend: impl Fn(usize, u64) -> Backend,
) -> Vec<(u64, usize)> {
    let mut rng = rng(seed);
    let mut picks = Vec::with_capacity(usize::try_from(requests).unwrap_or(0));
    let mut in_flight: Vec<(u64, InFlight, Verdict, Duration)> = Vec::new();
    for n in 0..requests {
        let now_ms = n * gap_ms;
        let (done, pending): (Vec<_>, Vec<_>) = in_flight
            .into_iter()
            .partition(|(done_ms, ..)| *done_ms <= now_ms);
        in_flight = pending;
        for (done_ms, guard, outcome, latency) in done {
            guard.finish(outcome, latency, fixture.at(done_ms));
        }
        let picked = selector
            .pick_with(&mut rng, None, &[], fixture.at(now_ms))
            .map(|c| Fixture::index(c.addr()));
        let Some(index) = picked else {
            panic!("no endpoint picked at {now_ms} ms");
        };
        picks.push((now_ms, index));
        let backend = backend(index, now_ms);
        let outcome = if rng.random_bool(backend.failure_rate) {
            Verdict::GatewayError
        } else {
            Verdict::Success
        };
        let done_ms = now_ms + u64::try_from(backend.latency.as_millis()).unwrap_or(u64::MAX);
        in_flight.push((
            done_ms,
            fixture.loads[index].start(),
            outcome,
            backend.latency,
        ));
    }
    picks
}
