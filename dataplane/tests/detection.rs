//! Failure detection that does better than a fixed threshold and a fixed ejection time, against
//! real backends on 127.0.0.1: a recovered backend is back as soon as its probes prove it, a
//! broken health check costs no capacity while traffic succeeds, a uniform overload ejects
//! nobody, and an endpoint failing unlike its peers is ejected below the absolute threshold.

mod support;

use std::time::Duration;

use rollcall_dataplane::health::machine::{Reason, State};
use rollcall_testkit::{Behavior, TestBackend};
use support::load::Load;
use support::{FAST_PROBES, Harness, config};

async fn backends(n: usize, behavior: Behavior) -> Vec<TestBackend> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(TestBackend::spawn(behavior).await.expect("backend"));
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_ejection_ends_as_soon_as_probes_prove_the_recovery() {
    let b = backends(3, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    // Five minutes of ejection: only proven recovery can bring it back within the test.
    let policy = format!(
        "{{healthCheck: {FAST_PROBES}, outlierDetection: {{baseEjectionTime: 5m, maxEjectionTime: 10m}}}}"
    );
    let h = Harness::start(&config(&addrs, &policy)).await;
    h.wait_for_state("web", addrs[1], State::Healthy).await;
    b[1].kill().await;
    let ejected = h.wait_for_state("web", addrs[1], State::Ejected).await;
    assert_eq!(ejected.health.ejection_multiplier, 1);
    b[1].revive().await.expect("revive");
    let back = h.wait_for_state("web", addrs[1], State::Probation).await;
    assert_eq!(back.health.reason, Reason::ProbeSucceeded);
    assert!(
        back.health.ejection_remaining_seconds.is_none(),
        "{:?}",
        back.health
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_health_check_never_ejects_backends_that_serve_traffic() {
    let b = backends(3, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let policy =
        format!("{{healthCheck: {FAST_PROBES}, outlierDetection: {{maxEjectionPercent: 100}}}}");
    let h = Harness::start(&config(&addrs, &policy)).await;
    for a in &addrs {
        h.wait_for_state("web", *a, State::Healthy).await;
    }
    let load = Load::start(h.listen("web").await, 4);
    load.wait_for_ok(200).await;
    // A shared dependency of the deep health check breaks; the application itself is fine.
    for backend in &b {
        backend.set_healthz(false);
    }
    h.wait_for_metric(r#"rollcall_probe_overrules_total{pool="web"} 3"#)
        .await;
    // Ten more failing probes each, all overruled while the traffic keeps succeeding.
    for backend in &b {
        let seen = backend.health_checks();
        backend.wait_for_health_checks(seen + 10).await;
    }
    let view = h.pool("web").await;
    let (ok, errors) = load.stop().await;
    assert!(!view.panic);
    for e in &view.endpoints {
        assert_eq!(e.health.state, State::Healthy, "{:?}", e.health);
    }
    assert!(
        errors.is_empty(),
        "{} of {ok} failed: {errors:?}",
        errors.len()
    );
    assert!(
        h.metrics()
            .contains(r#"rollcall_probe_overrules_total{pool="web"} 3"#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overload_that_hits_every_endpoint_alike_ejects_none() {
    // Every backend sheds one request in four with a fast 503: above the 20% threshold, but
    // nobody is an outlier, and ejecting one would only load the others more.
    let b = backends(3, Behavior::fail_one_in(4, 503)).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let policy = "{healthCheck: {type: None}, outlierDetection: {errorRate: {threshold: 20%, window: 2s, minRequests: 20}}}";
    let h = Harness::start(&config(&addrs, policy)).await;
    let load = Load::start(h.listen("web").await, 4);
    // Several windows' worth of traffic on every backend.
    for backend in &b {
        backend.wait_for_requests(1500).await;
    }
    let view = h.pool("web").await;
    load.stop().await;
    for e in &view.endpoints {
        assert_eq!(e.health.state, State::Healthy, "{:?}", e.health);
    }
    assert!(
        !h.metrics().contains("rollcall_ejections_total{"),
        "{}",
        h.metrics()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_failing_unlike_its_peers_is_ejected_below_the_absolute_threshold() {
    let b = backends(3, Behavior::slow(Duration::from_millis(5))).await;
    // One request in seven fails at once (14%): never above the 20% threshold, but its peers
    // fail none.
    b[0].set_behavior(Behavior::FailRate {
        fail: 1,
        every: 7,
        status: 500,
        latency: Duration::ZERO,
    });
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutive5xx: 0, errorRate: {threshold: 20%, window: 10s, minRequests: 20}}}";
    let h = Harness::start(&config(&addrs, policy)).await;
    let load = Load::start(h.listen("web").await, 4);
    let ejected = h.wait_for_state("web", addrs[0], State::Ejected).await;
    let served = b[0].requests();
    let (_, errors) = load.stop().await;
    assert_eq!(ejected.health.reason, Reason::ErrorRate);
    // A 500 is the application's answer and is not retried by default: each one reached a
    // client, and each one is one in seven of what the endpoint served before its ejection.
    eprintln!(
        "ejected after serving {served} requests; {} 500s reached clients",
        errors.len()
    );
    assert!(errors.iter().all(|e| e.starts_with("500")), "{errors:?}");
}

/// Open-loop traffic: a `GET /` on its own connection every `every`, whatever happened to the
/// earlier ones (closed-loop clients would all end up trapped in a black hole and stop).
fn paced(target: std::net::SocketAddr, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        loop {
            ticks.tick().await;
            tokio::spawn(rollcall_testkit::client::get(target, "/"));
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_endpoint_gets_no_new_requests_long_before_any_timeout_or_ejection() {
    let b = backends(3, Behavior::ok()).await;
    let addrs: Vec<_> = b.iter().map(|b| b.addr()).collect();
    // No probes and a 5 s per-try timeout: nothing but the stall watch can react within
    // seconds. Round robin would otherwise send it every third request until then.
    let policy = "{healthCheck: {type: None}, loadBalancer: {algorithm: RoundRobin}, retries: {perTryTimeout: 5s}}";
    let h = Harness::start(&config(&addrs, policy)).await;
    let load = paced(h.listen("web").await, Duration::from_millis(5));
    b[0].wait_for_requests(100).await;
    b[1].set_behavior(Behavior::BlackHole);
    let before = b[1].requests();
    // About two seconds of traffic at 200 requests/s, two thirds of it on the live backends.
    let target = b[0].requests() + b[2].requests() + 270;
    while b[0].requests() + b[2].requests() < target {
        b[0].wait_for_requests(b[0].requests() + 10).await;
    }
    let swallowed = b[1].requests() - before;
    load.abort();
    let endpoint = h.endpoint("web", addrs[1]).await.expect("endpoint");
    // Its third of ~200 ms until the stall is noticed (about 13) plus a trial: far from the
    // ~130 it would get in those two seconds.
    assert!(swallowed <= 30, "the black hole got {swallowed} requests");
    assert_eq!(
        endpoint.health.state,
        State::Healthy,
        "avoided, not ejected: the try timeout has not passed"
    );
}
