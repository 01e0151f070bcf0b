//! Tests of the health machine, one file per concern, over a shared fixture with an injected
//! clock: `Fx` holds a pool and a `now` that only moves when a test says so.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::{EndpointReport, Event, HealthSettings, PoolHealth, Reason, RouteClass, State};
use crate::outcome::Verdict;

mod admission;
mod budget;
mod ejection;
mod error_rate;
mod fleet;
mod overload;
mod readmission;
mod reports;
mod roster;
mod sensor;
mod sim;

const SEC: Duration = Duration::from_secs(1);
const BASE: Duration = Duration::from_secs(30);

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 8080))
}

/// The policy's defaults (docs/design.md, "The endpoint health machine"), but a 1 s probe
/// interval and the error rate off unless a test turns it on.
fn settings() -> HealthSettings {
    HealthSettings {
        probes_enabled: true,
        healthy_threshold: 2,
        unhealthy_threshold: 3,
        probe_interval: SEC,
        consecutive_gateway_errors: 3,
        consecutive_5xx: 5,
        error_rate_threshold: 0.0,
        error_rate_window: Duration::from_secs(10),
        error_rate_min_requests: 20,
        base_ejection: BASE,
        max_ejection: Duration::from_secs(300),
        max_ejection_percent: 50,
        probation_successes: 5,
        panic_threshold: 0.5,
        slow_start_window: Duration::from_secs(30),
    }
}

fn passive_only() -> HealthSettings {
    HealthSettings {
        probes_enabled: false,
        ..settings()
    }
}

fn moved(n: u8, from: State, to: State, reason: Reason) -> Event {
    Event::Transition {
        endpoint: addr(n),
        from,
        to,
        reason,
    }
}

struct Fx {
    pool: PoolHealth,
    now: Instant,
}

impl Fx {
    /// A pool of `n` endpoints (10.0.0.1..=n), all admitted Healthy by one probe each.
    fn healthy(settings: HealthSettings, n: u8) -> Self {
        let mut fx = Self::unknown(settings, n);
        for i in 1..=n {
            if fx.pool.settings().probes_enabled {
                fx.probe(i, true);
            } else {
                fx.request(i, Verdict::Success);
            }
            assert_eq!(fx.state(i), State::Healthy);
        }
        fx
    }

    /// [`Fx::healthy`], and every endpoint has served 100 requests without a failure: peers
    /// busy and clean enough that a streak of answered failures counts at its configured
    /// limit (`crate::outlier::streak`).
    fn serving(settings: HealthSettings, n: u8) -> Self {
        let mut fx = Self::healthy(settings, n);
        for i in 1..=n {
            assert_eq!(fx.requests(i, Verdict::Success, 100), vec![]);
        }
        fx
    }

    /// A pool of `n` endpoints that have just been upserted.
    fn unknown(settings: HealthSettings, n: u8) -> Self {
        let mut fx = Self {
            pool: PoolHealth::new(settings),
            now: Instant::now(),
        };
        for i in 1..=n {
            assert_eq!(fx.upsert(i, false), vec![]);
        }
        fx
    }

    fn advance(&mut self, d: Duration) -> Vec<Event> {
        self.now += d;
        self.pool.tick(self.now)
    }

    fn upsert(&mut self, n: u8, terminating: bool) -> Vec<Event> {
        self.pool.upsert(addr(n), terminating, self.now)
    }

    fn probe(&mut self, n: u8, ok: bool) -> Vec<Event> {
        self.pool
            .record_probe(addr(n), ok, "probe failed", self.now)
    }

    fn probes(&mut self, n: u8, ok: bool, count: u32) -> Vec<Event> {
        (0..count).flat_map(|_| self.probe(n, ok)).collect()
    }

    fn request(&mut self, n: u8, verdict: Verdict) -> Vec<Event> {
        self.pool
            .record_request(addr(n), verdict, "HTTP 503", self.now)
    }

    fn requests(&mut self, n: u8, verdict: Verdict, count: u32) -> Vec<Event> {
        (0..count).flat_map(|_| self.request(n, verdict)).collect()
    }

    fn state(&self, n: u8) -> State {
        self.pool.state(addr(n)).expect("endpoint is tracked")
    }

    fn report(&self, n: u8) -> EndpointReport {
        self.pool
            .reports(self.now)
            .into_iter()
            .find(|r| r.address == addr(n))
            .expect("endpoint is reported")
    }

    /// Eject endpoint `n` by probe failures; asserts it happened.
    fn eject(&mut self, n: u8) -> Vec<Event> {
        let threshold = self.pool.settings().unhealthy_threshold;
        let events = self.probes(n, false, threshold);
        assert_eq!(self.state(n), State::Ejected, "{events:?}");
        events
    }

    /// Eject endpoint `n` by consecutive connection failures on real requests (a fault its
    /// probes have not seen); asserts it happened.
    fn eject_passively(&mut self, n: u8) -> Vec<Event> {
        let limit = self.pool.settings().consecutive_gateway_errors;
        let events = self.requests(n, Verdict::ConnectionFailure, limit);
        assert_eq!(self.state(n), State::Ejected, "{events:?}");
        events
    }

    /// Serve the current ejection and pass the probes: endpoint `n` ends on probation.
    fn serve_into_probation(&mut self, n: u8) {
        let left = self.report(n).ejection_remaining_seconds.expect("ejected");
        self.advance(Duration::from_secs(left));
        let needed = self.pool.settings().healthy_threshold;
        self.probes(n, true, needed);
        assert_eq!(self.state(n), State::Probation);
    }

    /// Route class of endpoint `n`, `None` when not routed.
    fn class(&self, n: u8) -> Option<RouteClass> {
        let routes = self.pool.routes(self.now);
        routes
            .endpoints
            .iter()
            .find(|r| r.addr == addr(n))
            .map(|r| r.class)
    }

    fn weight(&self, n: u8) -> f64 {
        let routes = self.pool.routes(self.now);
        routes
            .endpoints
            .iter()
            .find(|r| r.addr == addr(n))
            .map(|r| r.weight_factor)
            .expect("endpoint is routed")
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}
