//! The sidecar following a (fake) controller: it listens before the first roster, routes on
//! what it receives, keeps routing through an outage, comes back to a new snapshot, and refuses
//! a roster whose policy it cannot use. Each test waits for the event it is about.

mod roster_support;

use std::net::SocketAddr;

use http::StatusCode;
use rollcall_api::proto::v1::unavailable::Reason;
use rollcall_dataplane::health::machine::State;
use rollcall_dataplane::sidecar::Sidecar;
use rollcall_testkit::client::get;
use rollcall_testkit::{BACKEND_HEADER, Behavior, TestBackend};
use roster_support::{FAST_PROBES, FakeController, delta, roster, sidecar, unavailable, wait};

async fn listen(sidecar: &Sidecar) -> SocketAddr {
    sidecar.runtime.listen_addrs().await["shop/web"]
}

/// The backend that answered one GET through the sidecar, or the status when none did.
async fn served_by(listen: SocketAddr) -> Result<String, String> {
    let reply = get(listen, "/").await.map_err(|e| e.to_string())?;
    match reply.headers.get(BACKEND_HEADER) {
        Some(backend) if reply.status == StatusCode::OK => {
            Ok(backend.to_str().unwrap_or_default().to_string())
        }
        _ => Err(format!("{} {}", reply.status, reply.text())),
    }
}

/// Wait until GETs through the sidecar reach `backend`, then check the next ten all do.
async fn wait_routed_to(listen: SocketAddr, backend: SocketAddr) {
    let deadline = tokio::time::Instant::now() + roster_support::PATIENCE;
    loop {
        let seen = served_by(listen).await;
        if seen.as_deref() == Ok(&backend.to_string()) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never routed to {backend}; last answer {seen:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for _ in 0..10 {
        assert_eq!(served_by(listen).await, Ok(backend.to_string()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_answers_503_until_its_first_roster_then_routes_on_it() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    let sidecar = sidecar(&fake).await;
    let listen = listen(&sidecar).await;
    let reply = get(listen, "/").await.unwrap();
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers["x-rollcall-reason"], "no-endpoints");
    let request = wait("a watch", || fake.watches().first().cloned()).await;
    let identity = request.sidecar.expect("identity");
    assert_eq!(
        (identity.namespace.as_str(), identity.pod.as_str()),
        ("shop", "front-1")
    );
    assert_eq!(request.pools.len(), 1);
    assert_eq!(request.pools[0].name, "web");

    fake.push(roster(1, &[backend.addr()], ""));
    wait_routed_to(listen, backend.addr()).await;
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roster_update_moves_traffic_to_the_new_endpoints() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    fake.push(roster(1, &[a.addr()], ""));
    let sidecar = sidecar(&fake).await;
    let listen = listen(&sidecar).await;
    wait_routed_to(listen, a.addr()).await;

    fake.push(roster(2, &[b.addr()], ""));
    wait_routed_to(listen, b.addr()).await;
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_move_traffic_and_one_that_does_not_apply_brings_a_new_snapshot() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let c = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    fake.push(roster(1, &[a.addr()], ""));
    let sidecar = sidecar(&fake).await;
    let listen = listen(&sidecar).await;
    wait_routed_to(listen, a.addr()).await;
    assert!(
        fake.watches()[0].accepts_deltas,
        "the sidecar asks for deltas"
    );

    fake.set_current(roster(2, &[b.addr()], ""));
    fake.broadcast(delta(2, 1, &[a.addr()], &[b.addr()]));
    wait_routed_to(listen, b.addr()).await;
    assert_eq!(
        fake.watches().len(),
        1,
        "a delta that applies keeps the stream"
    );

    // A delta on a base this sidecar does not hold: it reconnects and takes the snapshot.
    fake.set_current(roster(3, &[c.addr()], ""));
    fake.broadcast(delta(3, 7, &[], &[c.addr()]));
    wait_routed_to(listen, c.addr()).await;
    assert!(fake.watches().len() >= 2, "the sidecar watched again");
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_outage_keeps_the_last_roster_and_reconnect_applies_the_new_snapshot() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let mut fake = FakeController::start().await;
    fake.push(roster(5, &[a.addr()], ""));
    let sidecar = sidecar(&fake).await;
    let listen = listen(&sidecar).await;
    wait_routed_to(listen, a.addr()).await;

    assert!(
        sidecar
            .metrics
            .render()
            .contains("rollcall_controller_connected 1")
    );
    fake.kill().await;
    wait("the stream to be seen closed", || {
        sidecar
            .metrics
            .render()
            .contains("rollcall_controller_connected 0")
            .then_some(())
    })
    .await;
    for _ in 0..20 {
        assert_eq!(served_by(listen).await, Ok(a.addr().to_string()));
    }
    // A restarted controller starts its versions over: the first message is taken anyway.
    fake.push(roster(1, &[b.addr()], ""));
    fake.restart().await;
    wait_routed_to(listen, b.addr()).await;
    assert!(fake.watches().len() >= 2, "the sidecar watched again");
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roster_with_an_unusable_policy_keeps_the_previous_one() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let c = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    fake.push(roster(1, &[a.addr()], FAST_PROBES));
    let sidecar = sidecar(&fake).await;
    let listen = listen(&sidecar).await;
    wait_routed_to(listen, a.addr()).await;
    let before = wait_for_endpoint(&sidecar, a.addr(), State::Healthy).await;

    fake.push(roster(2, &[b.addr()], "{not json"));
    let invalid = r#"{"healthCheck": {"interval": "1s", "timeout": "5s"}}"#;
    fake.push(roster(3, &[b.addr()], invalid));
    fake.push(roster(4, &[a.addr(), c.addr()], FAST_PROBES));
    wait_for_endpoint(&sidecar, c.addr(), State::Healthy).await;

    let after = wait_for_endpoint(&sidecar, a.addr(), State::Healthy).await;
    assert_eq!(after.since, before.since, "a never left the pool");
    assert_eq!(
        b.requests() + b.health_checks(),
        0,
        "b was never in the pool"
    );
    let metrics = sidecar.metrics.render();
    assert!(
        metrics.contains(r#"rollcall_roster_updates_total{result="refused"} 2"#),
        "{metrics}"
    );
    let views = sidecar.runtime.views().await;
    assert!(
        views[0]
            .endpoints
            .iter()
            .all(|e| e.health.address != b.addr()),
        "{views:#?}"
    );
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_started_while_the_controller_is_away_routes_once_it_comes() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let mut fake = FakeController::start().await;
    fake.kill().await;
    let sidecar = sidecar(&fake).await;
    let listen = listen(&sidecar).await;
    assert_eq!(
        get(listen, "/").await.unwrap().status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    fake.push(roster(1, &[a.addr()], ""));
    fake.restart().await;
    wait_routed_to(listen, a.addr()).await;
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_pool_stops_routing_with_503_no_endpoints() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    fake.push(roster(1, &[a.addr()], ""));
    let sidecar = sidecar(&fake).await;
    let listen = listen(&sidecar).await;
    wait_routed_to(listen, a.addr()).await;

    // A stale marker first: the roster stays (unit-tested in `book`); then the pool goes.
    fake.push(unavailable(2, Reason::ServiceNotFound));
    fake.push(unavailable(3, Reason::PoolDeleted));
    let deadline = tokio::time::Instant::now() + roster_support::PATIENCE;
    let reply = loop {
        let reply = get(listen, "/").await.unwrap();
        if reply.status != StatusCode::OK {
            break reply;
        }
        assert!(tokio::time::Instant::now() < deadline, "still routing");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers["x-rollcall-reason"], "no-endpoints");
    sidecar.shutdown().await;
}

async fn wait_for_endpoint(
    sidecar: &Sidecar,
    addr: SocketAddr,
    state: State,
) -> rollcall_dataplane::health::machine::EndpointReport {
    let deadline = tokio::time::Instant::now() + roster_support::PATIENCE;
    loop {
        let views = sidecar.runtime.views().await;
        if let Some(e) = views
            .iter()
            .flat_map(|v| v.endpoints.iter())
            .find(|e| e.health.address == addr && e.health.state == state)
        {
            return e.health.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{addr} never became {state:?}: {views:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
