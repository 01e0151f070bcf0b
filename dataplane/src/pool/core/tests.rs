//! The pool's owner state, driven synchronously with an injected clock: the published snapshot
//! always says what the health machine says, versions only go up, and a drain that finishes
//! cannot remove an endpoint that came back.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rollcall_api::policy::PoolPolicy;
use tokio::time::Instant;

use super::Core;
use crate::config::EndpointConfig;

use crate::health::machine::State;
use crate::metrics::Metrics;
use crate::outcome::Verdict;
use crate::pool::{PoolSettings, Tuning};

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 8080))
}

fn endpoint(n: u8, terminating: bool) -> EndpointConfig {
    EndpointConfig {
        address: addr(n),
        zone: None,
        weight: 1,
        terminating,
    }
}

fn settings() -> Arc<PoolSettings> {
    let mut policy = PoolPolicy::default();
    policy.outlier_detection.consecutive_gateway_errors = 2;
    policy.outlier_detection.consecutive_5xx = 3;
    policy.outlier_detection.base_ejection_time = rollcall_api::policy::DurationString::secs(2);
    policy.outlier_detection.max_ejection_percent = 100;
    policy.draining.timeout = rollcall_api::policy::DurationString::secs(3);
    Arc::new(PoolSettings::new(&policy))
}

fn core(now: Instant) -> Core {
    let metrics = Arc::new(Metrics::new().unwrap());
    Core::new("web".into(), settings(), Tuning::default(), metrics, now)
}

#[test]
fn the_published_snapshot_always_says_what_the_health_machine_says() {
    for seed in 0..60u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut now = Instant::now();
        let mut core = core(now);
        let mut published = core.next_snapshot(now);
        let mut version = published.version;
        for step in 0..400 {
            let n = rng.random_range(1..=8u8);
            match rng.random_range(0..10) {
                0 => {
                    let mut roster = Vec::new();
                    for i in 1..=8 {
                        if rng.random_bool(0.6) {
                            roster.push(endpoint(i, rng.random_bool(0.1)));
                        }
                    }
                    core.update(&roster, settings(), now);
                }
                1..=4 => {
                    let verdict = [
                        Verdict::Success,
                        Verdict::Success,
                        Verdict::ClientError,
                        Verdict::ServerError,
                        Verdict::GatewayError,
                    ][rng.random_range(0..5)];
                    core.record_request(addr(n), verdict, "HTTP 503", now);
                }
                5..=7 => core.record_probe(addr(n), rng.random_bool(0.7), "refused", now),
                _ => {
                    now += Duration::from_millis(rng.random_range(0..1_500));
                    core.tick(now);
                }
            }
            if let Some(next) = core.snapshot(now) {
                assert_eq!(next.version, version + 1, "seed {seed} step {step}");
                version = next.version;
                published = next;
            }
            assert_eq!(
                published.routed(),
                core.expected_routes(now),
                "seed {seed} step {step}: the snapshot lags the health machine"
            );
        }
    }
}

#[test]
fn a_finishing_drain_cannot_remove_an_endpoint_that_came_back() {
    let t0 = Instant::now();
    let mut core = core(t0);
    core.update(&[endpoint(1, false), endpoint(2, false)], settings(), t0);
    core.update(&[endpoint(1, false)], settings(), t0);
    assert_eq!(core.state(addr(2)), Some(State::Draining));
    // Back before the drain (nothing in flight: it would finish on this very tick) is seen.
    core.update(&[endpoint(1, false), endpoint(2, false)], settings(), t0);
    assert!(core.tick(t0 + Duration::from_secs(5)).is_empty());
    assert_eq!(core.state(addr(2)), Some(State::Unknown));
    let routing = core.next_snapshot(t0);
    assert!(routing.routed().iter().any(|(a, _)| *a == addr(2)));
}

#[test]
fn a_drained_endpoint_is_forgotten_on_the_next_tick_and_leaves_routing() {
    let t0 = Instant::now();
    let mut core = core(t0);
    core.update(&[endpoint(1, false), endpoint(2, false)], settings(), t0);
    core.update(&[endpoint(1, false)], settings(), t0);
    assert_eq!(
        core.tick(t0),
        vec![addr(2)],
        "nothing in flight: done at once"
    );
    assert_eq!(core.state(addr(2)), None);
    let routing = core.next_snapshot(t0);
    assert_eq!(routing.routed().len(), 1);
}
