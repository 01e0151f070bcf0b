//! A seeded traffic simulator over the pure health machine: one request every 5 ms (200/s)
//! spread over the routed endpoints, each failing independently with its own probability (from
//! a stream of draws per endpoint), a `tick` every simulated second. Deterministic (SplitMix64, injected clock), so a figure it
//! measures is the same on every run and a regression shows up as a changed number.

use super::*;

/// SplitMix64: tiny, seedable, and the same sequence on every platform and `rand` version.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// What the simulated pool saw.
#[derive(Debug, Default)]
pub struct Run {
    /// Every passive trip: ejections and suppressed ejections, with the endpoint, the number
    /// of its own requests since endpoint 1's fault began (all of them without a fault), and
    /// the time since then.
    pub trips: Vec<(u8, Reason, u32, Duration)>,
    /// When endpoint 1 received its `fault_from`-th request.
    pub fault_began: Option<Duration>,
    /// Requests each endpoint received (index 0 is endpoint 1).
    pub requests: Vec<u32>,
}

/// The scenario: `endpoints` of them, `total` requests; endpoint `n`'s `i`-th request fails
/// (with verdict `failure`) with probability `fail(n, i)`; counting of the outlier's requests
/// starts at `fault_from` (its own request index).
pub struct Scenario<'a> {
    pub settings: HealthSettings,
    pub endpoints: u8,
    pub total: u32,
    pub seed: u64,
    pub failure: Verdict,
    pub fail: &'a dyn Fn(u8, u32) -> f64,
    pub fault_from: u32,
}

pub const STEP: Duration = Duration::from_millis(5);

impl Scenario<'_> {
    /// Run it; stops early once endpoint `stop_at` (when given) has tripped after its fault.
    pub fn run(&self, stop_at: Option<u8>) -> Run {
        let mut fx = Fx::healthy(self.settings.clone(), self.endpoints);
        let mut rng = Rng::new(self.seed);
        let mut run = Run {
            requests: vec![0; usize::from(self.endpoints)],
            ..Run::default()
        };
        let mut since_tick = Duration::ZERO;
        let mut elapsed = Duration::ZERO;
        for _ in 0..self.total {
            fx.now += STEP;
            elapsed += STEP;
            since_tick += STEP;
            if since_tick >= SEC {
                since_tick = Duration::ZERO;
                let events = fx.pool.tick(fx.now);
                self.collect(&events, &run.requests.clone(), elapsed, &mut run);
            }
            let n = self.pick(&fx, &mut rng);
            let i = run.requests[usize::from(n - 1)];
            run.requests[usize::from(n - 1)] = i + 1;
            if n == 1 && i == self.fault_from {
                run.fault_began = Some(elapsed);
            }
            let verdict = if outcome(self.seed, n, i) < (self.fail)(n, i) {
                self.failure
            } else {
                Verdict::Success
            };
            let events = fx.request(n, verdict);
            self.collect(&events, &run.requests.clone(), elapsed, &mut run);
            if stop_at.is_some_and(|s| run.trips.iter().any(|t| t.0 == s && t.2 > 0)) {
                break;
            }
        }
        run
    }

    /// A routed endpoint, uniformly among the normal ones; probation gets its 5% trickle.
    fn pick(&self, fx: &Fx, rng: &mut Rng) -> u8 {
        let routes = fx.pool.routes(fx.now);
        let normal: Vec<_> = routes
            .endpoints
            .iter()
            .filter(|r| r.class == RouteClass::Normal)
            .collect();
        let probation: Vec<_> = routes
            .endpoints
            .iter()
            .filter(|r| r.class == RouteClass::Probation)
            .collect();
        let pick = if !probation.is_empty() && (normal.is_empty() || rng.unit() < 0.05) {
            probation[rng.below(probation.len())]
        } else {
            normal[rng.below(normal.len())]
        };
        index(pick.addr)
    }

    fn collect(&self, events: &[Event], requests: &[u32], elapsed: Duration, run: &mut Run) {
        for e in events {
            let (endpoint, reason) = match e {
                Event::Transition {
                    endpoint,
                    to: State::Ejected,
                    reason,
                    ..
                } => (*endpoint, *reason),
                Event::EjectionSuppressed { endpoint, reason } => (*endpoint, *reason),
                _ => continue,
            };
            let n = index(endpoint);
            let own = requests[usize::from(n - 1)].saturating_sub(self.fault_from);
            let after = elapsed.saturating_sub(run.fault_began.unwrap_or_default());
            run.trips.push((n, reason, own, after));
        }
    }
}

/// The defaults of the health policy (docs/sidecar.md), passive only (the probes are not
/// simulated): 3 gateway errors, 5 5xx, 20% over 10 s with 20 requests, 50% ejection budget.
pub fn defaults() -> HealthSettings {
    HealthSettings {
        error_rate_threshold: 0.2,
        ..passive_only()
    }
}

/// The draw deciding endpoint `n`'s `i`-th request, in [0, 1): a stream of its own per
/// endpoint, so how the others fare (and where the picks go) cannot change what one endpoint
/// answers, and two versions of the rules are compared on the same answers.
fn outcome(seed: u64, n: u8, i: u32) -> f64 {
    let key = seed.wrapping_mul(0xD134_2543_DE82_EF95) ^ (u64::from(n) << 40) ^ u64::from(i);
    Rng::new(key).unit()
}

/// Endpoint `n` of `addr(n)`.
pub fn index(addr: SocketAddr) -> u8 {
    match addr.ip() {
        std::net::IpAddr::V4(ip) => ip.octets()[3],
        std::net::IpAddr::V6(_) => 0,
    }
}

/// Median, 90th percentile and maximum of a sample (sorted in place).
pub fn spread(v: &mut [u32]) -> (u32, u32, u32) {
    v.sort_unstable();
    (v[v.len() / 2], v[v.len() * 9 / 10], v[v.len() - 1])
}

/// Trips of every detector in a uniform run: `endpoints` all failing `p` with `failure`.
pub fn uniform(
    endpoints: u8,
    p: f64,
    failure: Verdict,
    seed: u64,
) -> Vec<(u8, Reason, u32, Duration)> {
    let fail = move |_: u8, _: u32| p;
    Scenario {
        settings: defaults(),
        endpoints,
        total: 12_000,
        seed,
        failure,
        fail: &fail,
        fault_from: 0,
    }
    .run(None)
    .trips
}

/// Requests of its own (and time) endpoint 1 needed to be ejected, once per seed: it fails with
/// `p_out` from its `from`-th request on (none before), its peers with `p_peers` all along.
pub fn detection(
    endpoints: u8,
    p_out: f64,
    p_peers: f64,
    from: u32,
    failure: Verdict,
    seeds: u64,
    others: &mut usize,
) -> (Vec<u32>, Vec<u32>) {
    let (mut requests, mut millis) = (Vec::new(), Vec::new());
    for seed in 0..seeds {
        let fail = move |n: u8, i: u32| {
            // Endpoint 1 is clean until its fault: whatever trips it then is the fault's doing.
            match (n, i >= from) {
                (1, true) => p_out,
                (1, false) => 0.0,
                _ => p_peers,
            }
        };
        let run = Scenario {
            settings: defaults(),
            endpoints,
            total: 40_000,
            seed: seed * 7919 + 1,
            failure,
            fail: &fail,
            fault_from: from,
        }
        .run(Some(1));
        let (_, _, own, after) = *run.trips.iter().find(|t| t.0 == 1 && t.2 > 0).unwrap_or(&(
            0,
            Reason::New,
            u32::MAX,
            Duration::MAX,
        ));
        *others += run.trips.iter().filter(|t| t.0 != 1 || t.2 == 0).count();
        requests.push(own);
        millis.push(u32::try_from(after.as_millis()).unwrap_or(u32::MAX));
    }
    (requests, millis)
}

/// Prints the figures `overload.rs` is bounded by: run it on a commit to measure it
/// (`cargo test -p rollcall-dataplane --lib overload::measure -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement, not a check"]
fn measure() {
    for (endpoints, p, failure) in [
        (3, 0.2, Verdict::GatewayError),
        (3, 0.5, Verdict::GatewayError),
        (10, 0.2, Verdict::GatewayError),
        (10, 0.5, Verdict::GatewayError),
        (3, 0.2, Verdict::ServerError),
        (10, 0.5, Verdict::ServerError),
    ] {
        let mut total = 0;
        let mut by = std::collections::BTreeMap::new();
        for seed in 1..=5 {
            let trips = uniform(endpoints, p, failure, seed);
            total += trips.len();
            for t in trips {
                println!("  seed {seed}: {t:?}");
                *by.entry(format!("{:?}", t.1)).or_insert(0) += 1;
            }
        }
        println!("uniform {endpoints} x {p} {failure:?}: {total} trips over 5 runs {by:?}");
    }
    for (label, endpoints, p_out, p_peers, from, failure) in [
        (
            "100% 503, clean peers, after 10 s",
            3,
            1.0,
            0.0,
            650,
            Verdict::GatewayError,
        ),
        (
            "100% 500, clean peers, after 10 s",
            3,
            1.0,
            0.0,
            650,
            Verdict::ServerError,
        ),
        (
            "100% 503, 5% peers, after 10 s",
            3,
            1.0,
            0.05,
            650,
            Verdict::GatewayError,
        ),
        (
            "60% 503, 5% peers, after 10 s",
            3,
            0.6,
            0.05,
            650,
            Verdict::GatewayError,
        ),
        (
            "60% 503, 5% peers, from the start",
            3,
            0.6,
            0.05,
            0,
            Verdict::GatewayError,
        ),
        (
            "60% 503, 5% peers, after 10 s, 10 endpoints",
            10,
            0.6,
            0.05,
            200,
            Verdict::GatewayError,
        ),
        (
            "60% 500, 5% peers, after 10 s",
            3,
            0.6,
            0.05,
            650,
            Verdict::ServerError,
        ),
    ] {
        let mut others = 0;
        let (mut r, mut t) = detection(endpoints, p_out, p_peers, from, failure, 100, &mut others);
        let mean = r.iter().map(|x| f64::from(*x)).sum::<f64>() / r.len() as f64;
        println!(
            "{label}: requests median/p90/max {:?} mean {mean:.1}, ms median/p90/max {:?}, peer trips {others}",
            spread(&mut r),
            spread(&mut t)
        );
    }
}
