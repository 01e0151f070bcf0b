//! The sidecar's health reports to a (fake) controller: named on the first message, an
//! ejection reported as it happens with the roster version it runs, heartbeats while quiet,
//! and a fresh full report after the controller comes back.

mod roster_support;

use rollcall_api::proto::v1 as pb;
use rollcall_testkit::{Behavior, TestBackend};
use roster_support::{FAST_PROBES, FakeController, roster, sidecar};

fn endpoint_state(report: &pb::HealthReport, port: u16) -> Option<(pb::EndpointState, u64)> {
    report.pools.iter().find_map(|p| {
        p.endpoints
            .iter()
            .find(|e| e.port == u32::from(port))
            .map(|e| (e.state(), p.roster_version))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ejection_is_reported_with_the_roster_version_and_quiet_times_send_heartbeats() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    fake.push(roster(3, &[a.addr(), b.addr()], FAST_PROBES));
    let sidecar = sidecar(&fake).await;

    let first = fake
        .wait_for_report("a first report", |r| !r.pools.is_empty())
        .await;
    let opening = &fake.reports()[0];
    let identity = opening
        .sidecar
        .as_ref()
        .expect("the first report names the sidecar");
    assert_eq!(
        (identity.namespace.as_str(), identity.pod.as_str()),
        ("shop", "front-1")
    );
    assert!(!identity.instance.is_empty());
    assert_eq!(first.pools[0].pool.as_ref().unwrap().name, "web");
    assert_eq!(
        first.pools[0].endpoints.len(),
        2,
        "a pool is reported whole"
    );

    b.kill().await;
    let ejected = fake
        .wait_for_report("b reported ejected", |r| {
            endpoint_state(r, b.addr().port()).is_some_and(|(s, _)| s == pb::EndpointState::Ejected)
        })
        .await;
    let pool = &ejected.pools[0];
    assert_eq!(pool.roster_version, 3);
    let e = pool
        .endpoints
        .iter()
        .find(|e| e.port == u32::from(b.addr().port()))
        .unwrap();
    assert_eq!(e.reason, "ProbeFailures");
    assert!(e.since_unix_ms > 0);
    assert!(e.times_ejected >= 1);
    assert!(ejected.sidecar.is_none(), "named once per stream");

    fake.wait_for_report("a heartbeat", |r| r.pools.is_empty())
        .await;
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_start_over_named_and_whole_after_the_controller_returns() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let mut fake = FakeController::start().await;
    fake.push(roster(1, &[a.addr()], FAST_PROBES));
    let sidecar = sidecar(&fake).await;
    fake.wait_for_report("a first report", |r| r.sidecar.is_some())
        .await;

    fake.kill().await;
    let before = fake.reports().len();
    fake.restart().await;
    let named_again = roster_support::wait("a named report on the new stream", || {
        fake.reports()[before..]
            .iter()
            .find(|r| r.sidecar.is_some())
            .cloned()
    })
    .await;
    assert_eq!(
        named_again.pools.len(),
        1,
        "the whole state again: {named_again:?}"
    );
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_with_report_changes_gets_each_pool_whole_once_then_only_what_changed() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    fake.accept_changes();
    fake.push(roster(3, &[a.addr(), b.addr()], FAST_PROBES));
    let sidecar = sidecar(&fake).await;

    let first = fake
        .wait_for_report("a complete report", |r| r.pools.iter().any(|p| p.complete))
        .await;
    assert_eq!(
        first.pools[0].endpoints.len(),
        2,
        "the first report is whole"
    );
    assert!(
        fake.report_kinds().iter().all(|changes| *changes),
        "all on ReportChanges"
    );
    // Both settle first (their first probes pass), so the change after the kill is b's alone.
    for port in [a.addr().port(), b.addr().port()] {
        fake.wait_for_report("the endpoint reported healthy", |r| {
            endpoint_state(r, port).is_some_and(|(s, _)| s == pb::EndpointState::Healthy)
        })
        .await;
    }

    b.kill().await;
    let ejected = fake
        .wait_for_report("b reported ejected", |r| {
            endpoint_state(r, b.addr().port()).is_some_and(|(s, _)| s == pb::EndpointState::Ejected)
        })
        .await;
    let pool = &ejected.pools[0];
    assert!(!pool.complete, "a change");
    assert_eq!(
        pool.endpoints.len(),
        1,
        "only the endpoint that changed: {pool:?}"
    );

    // Asked for it, the sidecar sends the pool whole again.
    let before = fake.reports().len();
    fake.ask_resend().await;
    roster_support::wait("a second complete report", || {
        fake.reports()[before..]
            .iter()
            .any(|r| r.pools.iter().any(|p| p.complete && p.endpoints.len() == 2))
            .then_some(())
    })
    .await;
    sidecar.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_without_report_changes_gets_complete_reports() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let fake = FakeController::start().await;
    fake.push(roster(1, &[a.addr()], FAST_PROBES));
    let sidecar = sidecar(&fake).await;
    let first = fake
        .wait_for_report("a first report", |r| !r.pools.is_empty())
        .await;
    assert!(!first.pools[0].complete, "Report has no framing");
    assert!(
        fake.report_kinds().iter().all(|changes| !*changes),
        "all on Report"
    );
    sidecar.shutdown().await;
}
