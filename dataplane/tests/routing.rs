//! What the request path routes on: an ejection that sticks however many health changes race it,
//! slow start that ramps a newcomer from the moment it is admitted, probation earned on real
//! requests when there are any, and a sidecar that keeps answering `/endpoints` while a removed
//! pool waits for its last slow request.

mod support;

use std::time::Duration;

use http::StatusCode;
use rollcall_dataplane::health::machine::State;
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::{Harness, config, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ejection_sticks_while_rebuilds_race() {
    // Forty endpoints all failing, each ejected by its first broken connection: many health
    // changes at once, from both worker threads. Once every one is out, none may get another
    // request. (Connection-level failures, because forty endpoints all answering 503 are a
    // uniform overload, which ejects nobody.)
    let mut backends = Vec::new();
    for _ in 0..40 {
        backends.push(
            TestBackend::spawn(Behavior::ResetAfterHeaders)
                .await
                .unwrap(),
        );
    }
    let addrs: Vec<_> = backends.iter().map(|b| b.addr()).collect();
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutive5xx: 1, consecutiveGatewayErrors: 0, errorRate: {threshold: 0%}, maxEjectionPercent: 100, baseEjectionTime: 1h, maxEjectionTime: 1h}, panicThreshold: 0%, retries: {attempts: 1}}";
    let h = Harness::start(&config(&addrs, policy)).await;
    let listen = h.listen("web").await;
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(tokio::spawn(async move {
            loop {
                // A broken answer breaks the client's connection too: start a new one.
                let mut conn = Conn::http1(listen).await.unwrap();
                while let Ok(reply) = conn.get("/").await {
                    if reply.headers.get("x-rollcall-reason").map(|v| v.as_bytes())
                        == Some(b"no-healthy-endpoints")
                    {
                        return;
                    }
                }
            }
        }));
    }
    for client in clients {
        within(client).await.unwrap();
    }
    h.wait_for("web", "every endpoint ejected", |v| {
        v.endpoints.iter().all(|e| e.health.state == State::Ejected)
    })
    .await;
    let served: u64 = backends.iter().map(|b| b.requests()).sum();
    let mut conn = Conn::http1(listen).await.unwrap();
    for _ in 0..200 {
        let reply = conn.get("/").await.unwrap();
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(reply.headers["x-rollcall-reason"], "no-healthy-endpoints");
    }
    assert_eq!(
        backends.iter().map(|b| b.requests()).sum::<u64>(),
        served,
        "an ejected endpoint got traffic"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newcomer_ramps_from_its_first_admission() {
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let policy = format!(
        "{{healthCheck: {}, slowStart: {{window: 10s}}}}",
        support::FAST_PROBES
    );
    let h = Harness::start(&config(&[a.addr()], &policy)).await;
    h.wait_for_state("web", a.addr(), State::Healthy).await;
    h.rewrite(&config(&[a.addr(), b.addr()], &policy));
    // Every look at the newcomer until it is healthy, then one more.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    loop {
        if let Some(ep) = h.endpoint("web", b.addr()).await {
            seen.push((ep.health.state, ep.health.weight_factor));
            if ep.health.state == State::Healthy {
                break;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "{seen:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        seen.iter().all(|(_, factor)| *factor < 0.5),
        "a newcomer to a serving pool starts low, whatever its state: {seen:?}"
    );
    assert!(
        seen.windows(2).all(|w| w[1].1 >= w[0].1),
        "the ramp only rises: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probation_needs_real_successes_when_the_pool_has_traffic() {
    // b passes every probe but fails every request: with traffic flowing, probes alone must not
    // carry it through probation.
    let a = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b = TestBackend::spawn(Behavior::Status(503)).await.unwrap();
    let c = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let policy = "{healthCheck: {type: HTTP, path: /healthz, interval: 20ms, timeout: 20ms, jitter: 0%, healthyThreshold: 1, unhealthyThreshold: 3}, outlierDetection: {consecutive5xx: 2, consecutiveGatewayErrors: 0, errorRate: {threshold: 0%}, baseEjectionTime: 100ms, maxEjectionTime: 300ms, probation: {successes: 2, trafficShare: 0.2%}}, slowStart: {window: 0s}, retries: {budget: {percent: 100}}}";
    let h = Harness::start(&config(&[a.addr(), b.addr(), c.addr()], policy)).await;
    let listen = h.listen("web").await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..2 {
        let stop = stop.clone();
        clients.push(tokio::spawn(async move {
            let mut conn = Conn::http1(listen).await.unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = conn.get("/").await.unwrap();
            }
        }));
    }
    h.wait_for("web", "b ejected four times", |v| {
        v.endpoints
            .iter()
            .any(|e| e.health.address == b.addr() && e.health.ejections_total >= 4)
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    let metrics = h.metrics();
    let ejections = |reason: &str| -> u64 {
        let series = format!(
            "rollcall_ejections_total{{endpoint=\"{}\",pool=\"web\",reason=\"{reason}\"}} ",
            b.addr()
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .map_or(0, |n| n.trim().parse().unwrap())
    };
    assert_eq!(
        ejections("Consecutive5xx"),
        1,
        "b never became healthy again, so it never tripped as a healthy endpoint again:\n{metrics}"
    );
    assert!(ejections("ProbationFailed") >= 3, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_answers_while_a_removed_pool_waits_for_its_last_request() {
    let slow = TestBackend::spawn(Behavior::slow(Duration::from_secs(3)))
        .await
        .unwrap();
    let other = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let (web_listen, other_listen) = (support::free_port(), support::free_port());
    let two_pools = format!(
        "pools:\n- name: web\n  listen: {web_listen}\n  endpoints: [{{address: \"{}\"}}]\n- name: other\n  listen: {other_listen}\n  endpoints: [{{address: \"{}\"}}]\n",
        slow.addr(),
        other.addr()
    );
    let h = Harness::start(&two_pools).await;
    let in_flight = tokio::spawn(rollcall_testkit::client::get(h.listen("web").await, "/"));
    within(slow.wait_for_requests(1)).await;
    h.rewrite(&format!(
        "pools:\n- name: other\n  listen: {other_listen}\n  endpoints: [{{address: \"{}\"}}]\n",
        other.addr()
    ));
    let admin = h.sidecar.admin_addr;
    loop {
        let reply = tokio::time::timeout(
            Duration::from_millis(1_500),
            rollcall_testkit::client::get(admin, "/endpoints"),
        )
        .await
        .expect("/endpoints answered while the removed pool drained")
        .unwrap();
        if !reply.text().contains("\"web\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let reply = within(in_flight).await.unwrap().unwrap();
    assert_eq!(reply.status, StatusCode::OK, "the last request finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_aware_routing_stays_in_the_sidecars_zone_and_spills_over_when_it_fails() {
    use rollcall_dataplane::pool::Tuning;
    let mut backends = Vec::new();
    for _ in 0..4 {
        backends.push(TestBackend::spawn(Behavior::ok()).await.unwrap());
    }
    let mut yaml = String::from("pools:\n- name: web\n  listen: 127.0.0.1:0\n  endpoints:\n");
    for (i, b) in backends.iter().enumerate() {
        let zone = if i < 2 { "zone-a" } else { "zone-b" };
        yaml.push_str(&format!(
            "  - {{address: \"{}\", zone: {zone}}}\n",
            b.addr()
        ));
    }
    // Three tries: a request that meets both dead endpoints still has a third.
    yaml.push_str("  policy: {healthCheck: {type: None}, retries: {attempts: 3}, outlierDetection: {consecutiveGatewayErrors: 1, maxEjectionPercent: 100}, loadBalancer: {zoneAware: {enabled: true, minHealthy: 50%}}}\n");
    let tuning = Tuning {
        local_zone: Some("zone-a".into()),
        ..Tuning::default()
    };
    let h = Harness::start_with(&yaml, tuning).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..100 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    let served: Vec<u64> = backends.iter().map(TestBackend::requests).collect();
    assert_eq!(served[2] + served[3], 0, "zone b got traffic: {served:?}");
    assert_eq!(served[0] + served[1], 100);
    // Zone a goes down: its requests are retried across zones, and once it is ejected zone b
    // takes them all.
    backends[0].kill().await;
    backends[1].kill().await;
    for _ in 0..100 {
        let reply = conn.get("/").await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
    for b in &backends[..2] {
        h.wait_for_state("web", b.addr(), State::Ejected).await;
    }
    assert!(backends[2].requests() + backends[3].requests() >= 100);
}
