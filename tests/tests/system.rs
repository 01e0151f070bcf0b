//! The whole system on one machine, end to end: the local API server, the real
//! `rollcall-controller` and `rollcall-sidecar` binaries, real backends on 127.0.0.1 that are
//! killed, and the BackendPool applied through the API the way kubectl applies it. Every wait
//! is for an event (a status, an Event, a sidecar's view), bounded by `PATIENCE`.

use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::{WatchStreamExt, watcher};
use rollcall_e2e::{
    PATIENCE, condition, controller_flags, count, ejection, events, run_dir, sidecars, wait_event,
};
use rollcall_testkit::system::{NAMESPACE, Stack, StackOptions};
use rollcall_testkit::traffic::Traffic;
use rollcall_testkit::{BACKEND_HEADER, Behavior, client::Conn};
use serde_json::{Value, json};

async fn stack(test: &str, options: StackOptions) -> Stack {
    let dir = run_dir(test);
    let options = StackOptions {
        controller_flags: controller_flags(),
        ..options
    };
    Stack::start(&dir, options)
        .await
        .expect("the system starts")
}

/// Steady GETs through every sidecar.
fn load(stack: &Stack) -> Vec<Traffic> {
    stack
        .sidecars
        .iter()
        .map(|s| Traffic::start(s.listen, 40))
        .collect()
}

/// Every failure the clients saw, by kind, then the first ones with when each was sent (to
/// read against the sidecars' logs in the stack's log directory).
fn failures(traffic: &[Traffic]) -> Vec<String> {
    let counts = traffic
        .iter()
        .flat_map(|t| t.failures().into_iter().map(|(k, n)| format!("{k}: {n}")));
    let first = traffic
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            t.failure_log()
                .into_iter()
                .map(move |f| format!("sidecar {i}: {f}"))
        })
        .collect::<Vec<_>>();
    counts.chain(first).collect()
}

fn served(traffic: &[Traffic]) -> u64 {
    traffic.iter().map(|t| t.totals().0).sum()
}

/// Wait until the clients have been served `more` further requests (proof traffic flows).
async fn wait_served(traffic: &[Traffic], more: u64) {
    let target = served(traffic) + more;
    tokio::time::timeout(PATIENCE, async {
        while served(traffic) < target {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("traffic keeps being served");
}

fn ejected_by_all(status: &Value, address: &str, sidecars: u64) -> bool {
    ejection(status, address).is_some_and(|e| {
        e["ejectedBy"].as_u64() == Some(sidecars) && e["of"].as_u64() == Some(sidecars)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_applied_through_the_api_routes_in_both_sidecars_and_reports_its_health() {
    let stack = stack("routes", StackOptions::default()).await;
    let status = stack
        .wait_status(
            PATIENCE,
            "3 healthy endpoints and 2 reporting sidecars",
            |s| {
                count(s, "total") == 3
                    && count(s, "healthy") == 3
                    && sidecars(s, "connected") == 2
                    && sidecars(s, "reporting") == 2
            },
        )
        .await
        .unwrap();
    assert_eq!(condition(&status, "Ready"), Some("True"), "{status}");
    assert_eq!(condition(&status, "Panic"), Some("False"), "{status}");
    assert!(status["ejections"].as_array().is_some_and(Vec::is_empty));
    // Each sidecar really routes to all three backends.
    for sidecar in &stack.sidecars {
        for b in &stack.backends {
            b.reset_counters();
        }
        let mut conn = Conn::http1(sidecar.listen).await.unwrap();
        let mut attempts = 0;
        while stack.backends.iter().any(|b| b.requests() == 0) {
            let reply = conn.get("/").await.unwrap();
            assert!(reply.status.is_success(), "{}", reply.status);
            attempts += 1;
            assert!(attempts < 300, "some backend never got a request");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_backend_is_ejected_in_status_with_an_event_and_readmitted_when_it_returns() {
    let stack = stack("kill", StackOptions::default()).await;
    let traffic = load(&stack);
    wait_served(&traffic, 50).await;
    let victim = stack.backend_address(1);
    stack.backends[1].kill().await;
    let status = stack
        .wait_status(PATIENCE, "b2 ejected by 2 of 2 sidecars", |s| {
            ejected_by_all(s, &victim, 2)
        })
        .await
        .unwrap();
    let entry = ejection(&status, &victim).unwrap();
    assert!(
        matches!(
            entry["reason"].as_str(),
            Some("ConsecutiveGatewayErrors" | "ProbeFailures")
        ),
        "{entry}"
    );
    assert_eq!(entry["pod"], "web-b2", "{entry}");
    assert!(
        entry["since"].as_str().is_some_and(|s| s.ends_with('Z')),
        "{entry}"
    );
    assert_eq!(count(&status, "ejected"), 1, "{status}");
    assert_eq!(condition(&status, "Degraded"), Some("True"), "{status}");
    let client = &stack.api.client;
    wait_event(client, NAMESPACE, "EndpointEjected", |m| {
        m.contains(&victim)
    })
    .await
    .unwrap();

    stack.backends[1].revive().await.unwrap();
    stack
        .wait_status(PATIENCE, "b2 readmitted", |s| {
            ejection(s, &victim).is_none() && count(s, "healthy") == 3
        })
        .await
        .unwrap();
    wait_event(client, NAMESPACE, "EndpointReadmitted", |m| {
        m.contains(&victim)
    })
    .await
    .unwrap();
    wait_served(&traffic, 50).await;
    assert!(
        failures(&traffic).is_empty(),
        "clients saw {:?}",
        failures(&traffic)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_removed_from_its_slice_drains_and_a_policy_edit_reaches_the_sidecars() {
    let stack = stack("drain", StackOptions::default()).await;
    let leaving = stack.backend_address(2);
    stack.backends[2].set_behavior(Behavior::slow(Duration::from_secs(3)));
    // Put one slow request in flight on b3.
    let sidecar = stack.sidecars[0].listen;
    let mut in_flight = Vec::new();
    while stack.backends[2].requests() == 0 {
        in_flight.push(tokio::spawn(async move {
            let mut conn = Conn::http1(sidecar).await?;
            conn.get("/").await
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(in_flight.len() < 200, "b3 never got a request");
    }
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(stack.api.client.clone(), NAMESPACE);
    slices
        .delete("web-b3", &DeleteParams::default())
        .await
        .unwrap();
    let name = format!("{NAMESPACE}/web");
    tokio::time::timeout(PATIENCE, async {
        loop {
            let mut gone = true;
            for s in &stack.sidecars {
                let view = s.pool(&name).await;
                gone &=
                    view.is_some_and(|p| p.state_of(&leaving).is_none_or(|st| st == "Draining"));
            }
            if gone {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("both sidecars drain b3");
    let before = stack.backends[2].requests();
    let mut conn = Conn::http1(sidecar).await.unwrap();
    for _ in 0..30 {
        assert!(conn.get("/").await.unwrap().status.is_success());
    }
    assert_eq!(
        stack.backends[2].requests(),
        before,
        "a draining endpoint got new requests"
    );
    for request in in_flight {
        let reply = request
            .await
            .unwrap()
            .expect("the in-flight request finishes");
        assert!(reply.status.is_success(), "{}", reply.status);
    }
    stack
        .wait_status(PATIENCE, "two endpoints", |s| count(s, "total") == 2)
        .await
        .unwrap();

    // A policy edit: consistent hashing on a header; one user's requests then stick to one
    // backend (under least-request they spread).
    stack
        .patch_pool(
            json!({"spec": {"loadBalancer": {"algorithm": "RingHash", "hashHeader": "x-user"}}}),
        )
        .await
        .unwrap();
    let edited = stack.sidecars[1].listen;
    tokio::time::timeout(PATIENCE, async {
        let mut conn = Conn::http1(edited).await.unwrap();
        loop {
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..20 {
                let request = conn
                    .request(http::Method::GET, "/")
                    .header("x-user", "alice")
                    .body(Default::default())
                    .unwrap();
                let reply = conn.send(request).await.unwrap();
                seen.insert(reply.headers.get(BACKEND_HEADER).cloned());
            }
            if seen.len() == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the sidecar hashes on x-user after the edit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_restarting_under_load_loses_no_request_and_no_true_ejection() {
    let mut stack = stack("restart", StackOptions::default()).await;
    let traffic = load(&stack);
    let victim = stack.backend_address(1);
    stack.backends[1].kill().await;
    stack
        .wait_status(PATIENCE, "b2 ejected by 2 of 2", |s| {
            ejected_by_all(s, &victim, 2)
        })
        .await
        .unwrap();
    // The ejection's Event is recorded right after the status that shows it: wait for it.
    wait_event(&stack.api.client, NAMESPACE, "EndpointEjected", |m| {
        m.contains(&victim)
    })
    .await
    .unwrap();
    let ejected_events = events(&stack.api.client, NAMESPACE, "EndpointEjected")
        .await
        .unwrap();

    // Every status written from here on must still show the ejection: b2 stays dead.
    let pools = stack.pools();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let watch = tokio::spawn(async move {
        let config = watcher::Config::default().fields("metadata.name=web");
        let mut stream = std::pin::pin!(watcher(pools, config).default_backoff().applied_objects());
        while let Some(Ok(pool)) = stream.next().await {
            let _ = seen_tx.send(pool.data["status"].clone());
        }
    });
    stack.controllers[0].crash_and_restart().await.unwrap();
    stack.wait_leader(PATIENCE).await.unwrap();
    // The new leader hears from both sidecars again (their reports carry a fresh session).
    stack
        .wait_status(PATIENCE, "a status written by the new leader", |s| {
            ejected_by_all(s, &victim, 2) && sidecars(s, "reporting") == 2
        })
        .await
        .unwrap();
    wait_served(&traffic, 100).await;
    watch.abort();
    while let Ok(status) = seen_rx.try_recv() {
        assert!(
            ejection(&status, &victim).is_some(),
            "a status after the restart dropped the true ejection: {status}"
        );
    }
    assert!(
        failures(&traffic).is_empty(),
        "clients saw {:?}",
        failures(&traffic)
    );
    let readmitted = events(&stack.api.client, NAMESPACE, "EndpointReadmitted")
        .await
        .unwrap();
    assert!(
        readmitted.is_empty(),
        "false re-admission Events: {readmitted:?}"
    );
    let after = events(&stack.api.client, NAMESPACE, "EndpointEjected")
        .await
        .unwrap();
    assert_eq!(
        after.len(),
        ejected_events.len(),
        "the restart recorded the ejection again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watches_and_a_failing_api_server_leave_the_status_exact() {
    // A Lease long enough to ride out the outage: an API server blip of a few seconds must
    // not cost the leader its lead (one longer than the Lease does; see leadership.rs).
    let dir = run_dir("faults");
    let options = StackOptions {
        controller_flags: ["--lease-duration", "20s", "--lease-grace", "5s"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ..StackOptions::default()
    };
    let stack = Stack::start(&dir, options)
        .await
        .expect("the system starts");
    let traffic = load(&stack);
    wait_served(&traffic, 50).await;
    let api = &stack.api;
    api.fault(json!({"dropWatches": true})).await.unwrap();
    api.fault(json!({"fail": {"count": 40, "code": 500}}))
        .await
        .unwrap();
    let victim = stack.backend_address(1);
    stack.backends[1].kill().await;
    api.fault(json!({"dropWatches": true})).await.unwrap();
    stack
        .wait_status(PATIENCE, "b2 ejected after the outage", |s| {
            ejected_by_all(s, &victim, 2)
        })
        .await
        .unwrap();
    wait_event(&api.client, NAMESPACE, "EndpointEjected", |m| {
        m.contains(&victim)
    })
    .await
    .unwrap();
    let ejected = events(&api.client, NAMESPACE, "EndpointEjected")
        .await
        .unwrap();
    let about: Vec<_> = ejected
        .iter()
        .filter(|e| e.message.as_deref().unwrap_or("").contains(&victim))
        .collect();
    assert_eq!(about.len(), 1, "one ejection, one Event: {about:?}");
    assert!(
        about[0].series.as_ref().and_then(|s| s.count).unwrap_or(1) <= 1,
        "the ejection was recorded twice: {:?}",
        about[0]
    );
    // The outage was real: the controller's requests were refused while it lasted.
    let refused = api
        .requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| {
            r["code"] == 500
                && r["userAgent"]
                    .as_str()
                    .is_some_and(|ua| ua.starts_with("rollcall-controller"))
        })
        .count();
    assert!(
        refused > 0,
        "the injected failures never reached the controller"
    );
    stack.backends[1].revive().await.unwrap();
    stack
        .wait_status(PATIENCE, "b2 readmitted", |s| {
            ejection(s, &victim).is_none()
        })
        .await
        .unwrap();
    assert!(
        failures(&traffic).is_empty(),
        "clients saw {:?}",
        failures(&traffic)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_elect_one_leader_and_the_standby_takes_over_when_it_dies() {
    let mut stack = stack(
        "leaders",
        StackOptions {
            controllers: 2,
            ..StackOptions::default()
        },
    )
    .await;
    let leader = stack.wait_leader(PATIENCE).await.unwrap();
    let standby = 1 - leader;
    assert!(
        !stack.controllers[standby].is_ready().await,
        "two replicas are ready"
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(stack.api.client.clone(), "rollcall-system");
    let lease = leases.get("rollcall-controller").await.unwrap();
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(
        holder.as_deref(),
        Some(stack.controllers[leader].identity.as_str())
    );
    stack
        .wait_status(PATIENCE, "2 sidecars reporting", |s| {
            sidecars(s, "reporting") == 2
        })
        .await
        .unwrap();
    let writers = |log: &[Value]| -> std::collections::BTreeSet<String> {
        log.iter()
            .filter(|r| {
                r["resource"] == "backendpools"
                    && r["subresource"] == "status"
                    && r["verb"] == "patch"
            })
            .filter_map(|r| r["userAgent"].as_str().map(String::from))
            .collect()
    };
    let before = writers(&stack.api.requests().await.unwrap());
    assert_eq!(before.len(), 1, "status writers: {before:?}");
    assert!(
        before
            .iter()
            .all(|ua| ua.contains(&stack.controllers[leader].identity))
    );

    let traffic = load(&stack);
    stack.controllers[leader].process.kill().await;
    let new_leader = stack.wait_leader(PATIENCE).await.unwrap();
    assert_eq!(new_leader, standby);
    // The new leader serves rosters and writes status: an ejection after the handover shows.
    let victim = stack.backend_address(0);
    stack.backends[0].kill().await;
    stack
        .wait_status(PATIENCE, "b1 ejected by the new leader's view", |s| {
            ejected_by_all(s, &victim, 2)
        })
        .await
        .unwrap();
    let after = writers(&stack.api.requests().await.unwrap());
    assert!(
        after
            .iter()
            .any(|ua| ua.contains(&stack.controllers[standby].identity)),
        "the standby never wrote: {after:?}"
    );
    assert!(
        failures(&traffic).is_empty(),
        "clients saw {:?}",
        failures(&traffic)
    );
}
