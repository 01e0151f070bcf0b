//! Leadership as a cluster operator meets it: SIGTERM on the leader releases the Lease (the
//! standby takes over at once, not after the Lease expires) and ends the sidecars' streams so
//! they reconnect to it; a leader that can no longer renew its Lease (the API server refuses
//! its Lease requests) stops serving before the Lease could expire for the others, instead of
//! leading on in a partition; a standby refuses roster streams clearly.

use std::time::Duration;

use rollcall_e2e::{PATIENCE, ejection, run_dir, sidecars};
use rollcall_testkit::system::{Stack, StackOptions};
use serde_json::json;

fn flags(lease: &str) -> Vec<String> {
    [
        "--lease-duration",
        lease,
        "--lease-grace",
        "2s",
        "--restart-grace",
        "20s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_on_the_leader_hands_over_at_once_and_the_sidecars_follow() {
    // A long Lease: a handover faster than it proves the Lease was released.
    let options = StackOptions {
        controllers: 2,
        controller_flags: flags("60s"),
        ..StackOptions::default()
    };
    let mut stack = Stack::start(&run_dir("sigterm"), options).await.unwrap();
    let leader = stack.wait_leader(PATIENCE).await.unwrap();
    let standby = 1 - leader;
    stack
        .wait_status(PATIENCE, "2 reporting sidecars", |s| {
            sidecars(s, "reporting") == 2
        })
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    stack.controllers[leader].process.signal_term();
    let exit = stack.controllers[leader]
        .process
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("the leader exits after SIGTERM");
    assert!(exit.success(), "SIGTERM is a clean shutdown: {exit}");
    let new_leader = stack.wait_leader(Duration::from_secs(30)).await.unwrap();
    assert_eq!(new_leader, standby);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "the standby waited for the Lease to expire: {:?}",
        started.elapsed()
    );
    // The sidecars' streams ended and they found the new leader: it sees their reports.
    let victim = stack.backend_address(2);
    stack.backends[2].kill().await;
    stack
        .wait_status(PATIENCE, "an ejection written by the new leader", |s| {
            ejection(s, &victim).is_some_and(|e| e["ejectedBy"] == 2)
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_its_lease_stops_serving() {
    let options = StackOptions {
        controller_flags: flags("6s"),
        ..StackOptions::default()
    };
    let mut stack = Stack::start(&run_dir("partition"), options).await.unwrap();
    stack.wait_leader(PATIENCE).await.unwrap();
    // Every Lease request fails from now on: renewals cannot succeed.
    stack
        .api
        .fault(json!({"fail": {"count": 100000, "code": 500, "resource": "leases"}}))
        .await
        .unwrap();
    let exit = stack.controllers[0]
        .process
        .wait_exit(PATIENCE)
        .await
        .expect("the leader gives up the lead when it cannot renew");
    assert!(
        !exit.success(),
        "losing the lead exits with an error, to restart as a standby"
    );
    let log = std::fs::read_to_string(&stack.controllers[0].process.log).unwrap();
    assert!(log.contains("giving up the lead"), "{log}");
    // The sidecars keep serving on their last roster meanwhile.
    let reply = rollcall_testkit::client::get(stack.sidecars[0].listen, "/")
        .await
        .unwrap();
    assert!(reply.status.is_success(), "{}", reply.status);
}
