//! Config changes while traffic flows: a bad file is refused and the last good config keeps
//! serving; endpoints that stay keep their health; an endpoint that leaves drains: no new
//! requests, in-flight ones finish, its idle connections close.

mod support;

use std::time::Duration;

use http::StatusCode;
use rollcall_dataplane::health::machine::State;
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::{FAST_PROBES, Harness, config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_config_is_refused_and_the_last_good_one_keeps_serving() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(&[backend.addr()], "{}")).await;
    let listen = h.listen("web").await;
    h.rewrite("pools:\n- name: web\n  listen: 127.0.0.1:0\n  endpoints: [{address: 127.0.0.1:1}]\n  policy: {healthCheck: {interval: 1s, timeout: 9s}}\n");
    h.wait_for_metric(r#"rollcall_config_reloads_total{result="refused"} 1"#)
        .await;
    let reply = rollcall_testkit::client::get(listen, "/").await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    let view = h.pool("web").await;
    assert_eq!(view.endpoints.len(), 1);
    assert_eq!(view.endpoints[0].health.address, backend.addr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_adds_endpoints_and_keeps_the_health_of_those_that_stay() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let policy = format!("{{healthCheck: {FAST_PROBES}}}");
    let h = Harness::start(&config(&[a.addr()], &policy)).await;
    h.wait_for_state("web", a.addr(), State::Healthy).await;
    let before = h.endpoint("web", a.addr()).await.unwrap();
    h.rewrite(&config(&[a.addr(), b.addr()], &policy));
    h.wait_for_state("web", b.addr(), State::Healthy).await;
    let after = h.endpoint("web", a.addr()).await.unwrap();
    assert_eq!(after.health.state, State::Healthy);
    assert!(
        after.health.probe_successes_total >= before.health.probe_successes_total,
        "the staying endpoint kept its history"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_endpoint_drains_in_flight_requests_finish_and_new_ones_go_elsewhere() {
    let slow = TestBackend::spawn(Behavior::Ok {
        latency: Duration::from_millis(600),
    })
    .await
    .unwrap();
    let other = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let policy = "{healthCheck: {type: None}, loadBalancer: {algorithm: RoundRobin}, draining: {timeout: 30s}}";
    let h = Harness::start(&config(&[slow.addr(), other.addr()], policy)).await;
    let listen = h.listen("web").await;
    // Start requests until one is in flight on the slow endpoint.
    let mut in_flight = Vec::new();
    while slow.stats().open_connections == 0 || in_flight.len() < 2 {
        in_flight.push(tokio::spawn(rollcall_testkit::client::get(listen, "/")));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    support::within(slow.wait_for_requests(1)).await;
    h.rewrite(&config(&[other.addr()], policy));
    h.wait_for_state("web", slow.addr(), State::Draining).await;
    let served_by_slow = slow.requests();
    let mut conn = Conn::http1(listen).await.unwrap();
    for _ in 0..10 {
        let reply = conn.get("/").await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), format!("backend {}\n", other.addr().port()));
    }
    assert_eq!(
        slow.requests(),
        served_by_slow,
        "a draining endpoint gets no new requests"
    );
    for request in in_flight {
        assert_eq!(
            request.await.unwrap().unwrap().status,
            StatusCode::OK,
            "in-flight requests finish"
        );
    }
    // With nothing left in flight the endpoint is forgotten and its connections closed.
    h.wait_for("web", "the drained endpoint to be removed", |v| {
        v.endpoints.len() == 1
    })
    .await;
    support::within(slow.wait_until(|s| s.open_connections == 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_timeout_closes_what_is_still_in_flight() {
    let stuck = TestBackend::spawn(Behavior::Ok {
        latency: Duration::from_secs(60),
    })
    .await
    .unwrap();
    let other = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let policy = "{healthCheck: {type: None}, draining: {timeout: 300ms}, retries: {perTryTimeout: 2m}, timeouts: {request: 2m}}";
    let h = Harness::start(&config(&[stuck.addr()], policy)).await;
    let listen = h.listen("web").await;
    let in_flight = tokio::spawn(rollcall_testkit::client::get(listen, "/"));
    support::within(stuck.wait_for_requests(1)).await;
    h.rewrite(&config(&[other.addr()], policy));
    // The request cannot finish in time: at the drain deadline its connection is closed
    // instead of waiting a minute, and (a GET being safe to repeat) it is retried on the
    // endpoint that stays.
    let reply = tokio::time::timeout(support::PATIENCE, in_flight)
        .await
        .expect("the drain deadline ended the request")
        .unwrap()
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), format!("backend {}\n", other.addr().port()));
    h.wait_for("web", "the stuck endpoint to be removed", |v| {
        v.endpoints.iter().all(|e| e.health.address != stuck.addr())
    })
    .await;
    support::within(stuck.wait_until(|s| s.open_connections == 0)).await;
    assert!(
        h.metrics()
            .contains(r#"rollcall_retries_total{pool="web",reason="reset"} 1"#),
        "{}",
        h.metrics()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_run_only_while_a_pool_has_a_health_check() {
    // Pool `off` starts without probes; pool `on` probes all along and is the test's clock.
    let off = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let clock = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let (off_listen, on_listen) = (support::free_port(), support::free_port());
    let two_pools = |off_policy: &str| {
        format!(
            "pools:\n- name: off\n  listen: {off_listen}\n  endpoints: [{{address: \"{}\"}}]\n  policy: {off_policy}\n- name: on\n  listen: {on_listen}\n  endpoints: [{{address: \"{}\"}}]\n  policy: {{healthCheck: {FAST_PROBES}}}\n",
            off.addr(),
            clock.addr()
        )
    };
    let h = Harness::start(&two_pools("{healthCheck: {type: None}}")).await;
    support::within(clock.wait_for_health_checks(5)).await;
    assert_eq!(off.health_checks(), 0, "no probe while the check is None");

    h.rewrite(&two_pools(&format!("{{healthCheck: {FAST_PROBES}}}")));
    support::within(off.wait_for_health_checks(2)).await;
    h.wait_for_state("off", off.addr(), State::Healthy).await;

    h.rewrite(&two_pools("{healthCheck: {type: None}}"));
    h.wait_for_metric(r#"rollcall_config_reloads_total{result="applied"} 2"#)
        .await;
    // The reload is parsed when it is counted and applied a moment later: let the clock pool
    // probe ten more times first, then ask for silence over five more of its probes.
    let seen = clock.health_checks();
    support::within(clock.wait_for_health_checks(seen + 10)).await;
    let after_off = off.health_checks();
    support::within(clock.wait_for_health_checks(seen + 15)).await;
    assert_eq!(
        off.health_checks(),
        after_off,
        "probes went on after they were turned off"
    );
    assert_eq!(
        h.endpoint("off", off.addr()).await.unwrap().health.state,
        State::Healthy,
        "turning probes off keeps the endpoint's health"
    );
}
