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

// --- zone-aware routing ---

fn zoned(n: u8, zone: &str) -> EndpointConfig {
    EndpointConfig {
        zone: Some(zone.into()),
        ..endpoint(n, false)
    }
}

fn zone_aware(enabled: bool) -> Arc<PoolSettings> {
    let mut policy = PoolPolicy::default();
    policy.outlier_detection.consecutive_gateway_errors = 2;
    policy.outlier_detection.max_ejection_percent = 100;
    policy.load_balancer.zone_aware.enabled = enabled;
    policy.load_balancer.zone_aware.min_healthy = rollcall_api::policy::Percent::new(50.0);
    Arc::new(PoolSettings::new(&policy))
}

/// A pool with endpoints 1-2 in zone `a` (the sidecar's) and 3-4 in zone `b`.
fn two_zones(enabled: bool, sidecar_zone: Option<&str>, now: Instant) -> Core {
    let metrics = Arc::new(Metrics::new().unwrap());
    let tuning = Tuning {
        local_zone: sidecar_zone.map(Into::into),
        ..Tuning::default()
    };
    let mut core = Core::new("web".into(), zone_aware(enabled), tuning, metrics, now);
    let roster = [zoned(1, "a"), zoned(2, "a"), zoned(3, "b"), zoned(4, "b")];
    core.update(&roster, zone_aware(enabled), now);
    core
}

/// Where 400 first tries land, by endpoint number.
fn first_tries(core: &mut Core, now: Instant) -> [u32; 5] {
    let routing = core.next_snapshot(now);
    let mut seen = [0; 5];
    for _ in 0..400 {
        let picked = routing.pick(None, &[], now).expect("a pick");
        seen[number(picked.addr())] += 1;
    }
    seen
}

/// Endpoint `10.0.0.n`'s `n`.
fn number(addr: SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(v4) => usize::from(v4.ip().octets()[3]),
        SocketAddr::V6(_) => 0,
    }
}

fn eject(core: &mut Core, n: u8, now: Instant) {
    for _ in 0..2 {
        core.record_request(addr(n), Verdict::ConnectionFailure, "connect refused", now);
    }
    assert_eq!(core.state(addr(n)), Some(State::Ejected));
}

#[test]
fn zone_aware_routing_keeps_new_requests_in_the_sidecars_zone() {
    let now = Instant::now();
    let mut core = two_zones(true, Some("a"), now);
    let seen = first_tries(&mut core, now);
    assert_eq!(seen[3] + seen[4], 0, "{seen:?}");
    assert!(seen[1] > 100 && seen[2] > 100, "{seen:?}");
}

#[test]
fn a_retry_may_go_to_any_zone() {
    let now = Instant::now();
    let mut core = two_zones(true, Some("a"), now);
    let routing = core.next_snapshot(now);
    let mut seen = [0; 5];
    for _ in 0..300 {
        let retry = routing.pick(None, &[addr(1)], now).expect("a retry");
        seen[number(retry.addr())] += 1;
    }
    assert_eq!(seen[1], 0, "never the endpoint that failed");
    assert!(seen[2] > 0 && seen[3] > 0 && seen[4] > 0, "{seen:?}");
}

#[test]
fn with_zone_aware_routing_every_zone_still_counts_as_routed() {
    let now = Instant::now();
    let mut core = two_zones(true, Some("a"), now);
    let routing = core.next_snapshot(now);
    // The local selector holds zone a only; what is routed is every zone's normal endpoints.
    let routed: Vec<SocketAddr> = routing.routed().into_iter().map(|(a, _)| a).collect();
    assert_eq!(routed, vec![addr(1), addr(2), addr(3), addr(4)]);
    assert!(routing.routes_to(addr(4)), "zone b");
    assert!(
        routing.has_untried(&[addr(1), addr(2)], addr(1)),
        "zone a spent, zone b left for a retry"
    );
    assert!(!routing.has_untried(&[addr(1), addr(2), addr(3)], addr(4)));
}

#[test]
fn below_min_healthy_the_local_zone_spills_over_to_every_zone() {
    let now = Instant::now();
    let mut core = two_zones(true, Some("a"), now);
    eject(&mut core, 1, now);
    // One of two eligible: exactly 50%, still enough.
    let seen = first_tries(&mut core, now);
    assert_eq!((seen[1], seen[3] + seen[4]), (0, 0), "{seen:?}");
    eject(&mut core, 2, now);
    // None eligible in zone a: every zone.
    let seen = first_tries(&mut core, now);
    assert!(seen[3] > 100 && seen[4] > 100, "{seen:?}");
}

#[test]
fn zone_aware_routing_is_off_unless_enabled_and_the_sidecar_knows_its_zone() {
    let now = Instant::now();
    for (enabled, zone) in [(false, Some("a")), (true, None)] {
        let mut core = two_zones(enabled, zone, now);
        let seen = first_tries(&mut core, now);
        assert!(
            seen[1..].iter().all(|&n| n > 50),
            "{enabled} {zone:?}: {seen:?}"
        );
    }
}

#[test]
fn a_sidecar_in_a_zone_without_endpoints_routes_across_every_zone() {
    let now = Instant::now();
    let mut core = two_zones(true, Some("c"), now);
    let seen = first_tries(&mut core, now);
    assert!(seen[1..].iter().all(|&n| n > 50), "{seen:?}");
}

#[test]
fn a_zone_learnt_after_start_routes_the_next_snapshot_within_it() {
    let now = Instant::now();
    let mut core = two_zones(true, None, now);
    let seen = first_tries(&mut core, now);
    assert!(seen[1..].iter().all(|&n| n > 50), "{seen:?}");
    core.set_local_zone("b".into());
    assert!(
        core.snapshot(now).is_some(),
        "a new zone is a routing change"
    );
    let seen = first_tries(&mut core, now);
    assert_eq!((seen[1], seen[2]), (0, 0), "{seen:?}");
    // The same zone again changes nothing.
    core.set_local_zone("b".into());
    assert!(core.snapshot(now).is_none());
}

#[test]
fn endpoints_of_one_zone_share_one_copy_of_its_name() {
    let core = two_zones(true, Some("a"), Instant::now());
    let zone = |n: u8| {
        core.endpoints
            .get(&addr(n))
            .and_then(|e| e.zone.clone())
            .expect("zoned")
    };
    assert!(Arc::ptr_eq(&zone(1), &zone(2)));
    assert!(Arc::ptr_eq(&zone(3), &zone(4)));
    assert_eq!((&*zone(1), &*zone(3)), ("a", "b"));
    assert_eq!(core.zones.len(), 2);
}
