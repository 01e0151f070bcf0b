//! The sidecar against backends that fail in real ways: killed mid-load, black-holed, failing
//! fast, all probes failing at once, coming back. Each test waits for the event it is about.

mod support;

use std::time::Duration;

use http::StatusCode;
use rollcall_dataplane::health::machine::{Reason, State};
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::load::Load;
use support::{FAST_PROBES, Harness, config};

async fn backends(n: usize, behavior: Behavior) -> Vec<TestBackend> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(TestBackend::spawn(behavior).await.unwrap());
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_killed_mid_load_fails_no_get() {
    let b = backends(
        3,
        Behavior::Ok {
            latency: Duration::from_millis(2),
        },
    )
    .await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let h = Harness::start(&config(&addrs, &format!("{{healthCheck: {FAST_PROBES}}}"))).await;
    let load = Load::start(h.listen("web").await, 8);
    load.wait_for_ok(300).await;
    b[1].kill().await;
    let ejected = h.wait_for_state("web", addrs[1], State::Ejected).await;
    let before = load.ok();
    load.wait_for_ok(before + 300).await;
    let (ok, errors) = load.stop().await;
    h.wait_idle("web").await;
    assert!(
        errors.is_empty(),
        "{} of {} GETs failed: {:?}",
        errors.len(),
        ok,
        &errors[..errors.len().min(5)]
    );
    assert!(
        matches!(
            ejected.health.reason,
            Reason::ConsecutiveGatewayErrors | Reason::ProbeFailures
        ),
        "{:?}",
        ejected.health.reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_trip_an_endpoint_out_at_once_without_probes() {
    let b = backends(3, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let h = Harness::start(&config(
        &addrs,
        "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 1}}",
    ))
    .await;
    b[2].kill().await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..30 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    let ep = h.endpoint("web", addrs[2]).await.unwrap();
    assert_eq!(ep.health.state, State::Ejected);
    assert_eq!(ep.health.reason, Reason::ConsecutiveGatewayErrors);
    assert!(
        h.metrics().contains(r#"reason="connect_failure""#),
        "the rerouted request is counted as a retry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn black_holed_backend_is_ejected_by_probes_and_other_probes_are_not_delayed() {
    let b = backends(3, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    // Ten failures to eject, so the window is long enough to tell independent probing (the
    // healthy endpoint probed on its own 100 ms schedule) from probing in turn (each of its
    // probes waiting behind a timed-out one: half as many, or fewer).
    let probes = "{type: HTTP, path: /healthz, interval: 100ms, timeout: 100ms, jitter: 0%, healthyThreshold: 2, unhealthyThreshold: 10}";
    let h = Harness::start(&config(&addrs, &format!("{{healthCheck: {probes}}}"))).await;
    for a in &addrs {
        h.wait_for_state("web", *a, State::Healthy).await;
    }
    let healthy_probes_before = b[0].health_checks();
    let blackholed = tokio::time::Instant::now();
    b[2].set_behavior(Behavior::BlackHole);
    let ep = h.wait_for_state("web", addrs[2], State::Ejected).await;
    let window = blackholed.elapsed();
    assert_eq!(ep.health.reason, Reason::ProbeFailures);
    assert_eq!(
        ep.health.probe_failures_total, 10,
        "ejected by exactly unhealthyThreshold probe failures"
    );
    assert!(
        ep.health
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("timed out"),
        "{:?}",
        ep.health.last_error
    );
    // The healthy endpoint was probed on its own schedule meanwhile, not held up behind the
    // black hole: about one probe per 100 ms of the window (at least 70% of that here, timers
    // slip on a loaded machine); a checker probing in turn would manage at most half.
    let healthy_probes = b[0].health_checks() - healthy_probes_before;
    let own_schedule = window.as_secs_f64() / 0.1;
    assert!(
        healthy_probes as f64 >= 0.7 * own_schedule,
        "healthy endpoint probed only {healthy_probes} times in {window:?} while the black hole was probed 10 times"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_failing_backend_is_ejected_by_error_rate_and_never_gets_more_than_its_fair_share() {
    let slow = Behavior::Ok {
        latency: Duration::from_millis(20),
    };
    let b = backends(3, slow).await;
    // One in five requests fails at once with a 500; its successes are fast too.
    b[0].set_behavior(Behavior::FailRate {
        fail: 1,
        every: 5,
        status: 500,
        latency: Duration::ZERO,
    });
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutive5xx: 0, consecutiveGatewayErrors: 0, errorRate: {threshold: 10%, window: 30s, minRequests: 40}}}";
    let h = Harness::start(&config(&addrs, policy)).await;
    let load = Load::start(h.listen("web").await, 12);
    let ep = h.wait_for_state("web", addrs[0], State::Ejected).await;
    // Shares up to the ejection: what the balancer did while the endpoint was still eligible.
    let failing = b[0].requests();
    let total: u64 = b.iter().map(|b| b.requests()).sum();
    let (ok, _errors) = load.stop().await;
    h.wait_idle("web").await;
    assert_eq!(ep.health.reason, Reason::ErrorRate);
    let share = failing as f64 / total as f64;
    eprintln!(
        "failing endpoint served {failing} of {total} requests before its ejection ({share:.2})"
    );
    // The share cap allows a fixed slack of a few picks so tiny counts do not trip it.
    assert!(
        failing as f64 <= total as f64 / 3.0 + 6.0,
        "the failing endpoint took {failing} of {total} requests ({share:.2}) although it answers fastest; ok={ok}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_probes_failing_at_once_enters_panic_mode_and_keeps_serving() {
    let b = backends(3, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let policy = format!(
        "{{healthCheck: {FAST_PROBES}, outlierDetection: {{maxEjectionPercent: 100, baseEjectionTime: 200ms}}, slowStart: {{window: 0s}}}}"
    );
    let h = Harness::start(&config(&addrs, &policy)).await;
    for a in &addrs {
        h.wait_for_state("web", *a, State::Healthy).await;
    }
    // A shared dependency blips: every deep health check fails, traffic is fine.
    for backend in &b {
        backend.set_healthz(false);
    }
    h.wait_for("web", "panic mode", |v| v.panic).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..20 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    assert!(h.metrics().contains(r#"rollcall_pool_panic{pool="web"} 1"#));
    for backend in &b {
        backend.set_healthz(true);
    }
    h.wait_for("web", "panic mode to end", |v| !v.panic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_ejection_percent_keeps_half_the_pool_eligible_and_flags_the_rest() {
    let b = backends(4, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let h = Harness::start(&config(&addrs, &format!("{{healthCheck: {FAST_PROBES}}}"))).await;
    for backend in &b {
        backend.set_healthz(false);
    }
    let view = h
        .wait_for("web", "two ejected and two flagged", |v| {
            v.endpoints
                .iter()
                .filter(|e| e.health.state == State::Ejected)
                .count()
                == 2
                && v.endpoints
                    .iter()
                    .filter(|e| e.health.ejection_suppressed)
                    .count()
                    == 2
        })
        .await;
    assert!(!view.panic, "half the pool is still eligible");
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovered_backend_returns_through_probation_then_healthy() {
    let b = backends(3, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let policy = format!(
        "{{healthCheck: {FAST_PROBES}, outlierDetection: {{baseEjectionTime: 300ms, probation: {{successes: 3, trafficShare: 50%}}}}, slowStart: {{window: 0s}}}}"
    );
    let h = Harness::start(&config(&addrs, &policy)).await;
    b[1].kill().await;
    h.wait_for_state("web", addrs[1], State::Ejected).await;
    b[1].revive().await.unwrap();
    let probation = h.wait_for_state("web", addrs[1], State::Probation).await;
    assert_eq!(
        probation.health.reason,
        Reason::ProbeSucceeded,
        "probes are on: re-admission needs their evidence"
    );
    let served_before = b[1].requests();
    let load = Load::start(h.listen("web").await, 2);
    let healthy = h.wait_for_state("web", addrs[1], State::Healthy).await;
    assert_eq!(healthy.health.reason, Reason::ProbationPassed);
    let (_, errors) = load.stop().await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        b[1].requests() > served_before,
        "probation is earned on real traffic"
    );
}
