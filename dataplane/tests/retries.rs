//! The retry rules through the real proxy: which failures are tried again on another endpoint,
//! which are not because the endpoint may already have done the work, and the budget that stops
//! retries from multiplying load when everything fails.

mod support;

use http::{Method, StatusCode};
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::{Harness, config};

/// Round robin over a bad and a good endpoint, no probes and no ejection, so every other request
/// meets the bad one first and only the retry rules decide what the client sees.
const POLICY: &str = "{healthCheck: {type: None}, loadBalancer: {algorithm: RoundRobin}, outlierDetection: {consecutiveGatewayErrors: 0, consecutive5xx: 0, errorRate: {threshold: 0%}}, retries: {perTryTimeout: 300ms, idempotencyKeyHeader: Idempotency-Key}}";

async fn pair(bad: Behavior) -> (TestBackend, TestBackend, Harness) {
    let bad = TestBackend::spawn(bad).await.unwrap();
    let good = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(&[bad.addr(), good.addr()], POLICY)).await;
    (bad, good, h)
}

async fn send(h: &Harness, method: Method, key: Option<&str>) -> (StatusCode, String) {
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    let mut req = conn.request(method, "/");
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    let reply = conn.send(req.body("order".into()).unwrap()).await.unwrap();
    let reason = reply
        .headers
        .get("x-rollcall-reason")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (reply.status, reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_that_timed_out_is_retried_on_another_endpoint() {
    let (bad, good, h) = pair(Behavior::BlackHole).await;
    for _ in 0..4 {
        assert_eq!(send(&h, Method::GET, None).await.0, StatusCode::OK);
    }
    assert!(bad.requests() >= 1, "some GETs met the black hole first");
    assert_eq!(good.requests(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_is_not_retried_after_bytes_were_written() {
    let (bad, good, h) = pair(Behavior::BlackHole).await;
    let mut timed_out = 0;
    for _ in 0..4 {
        let (status, reason) = send(&h, Method::POST, None).await;
        if status == StatusCode::GATEWAY_TIMEOUT {
            assert_eq!(reason, "upstream-timeout");
            timed_out += 1;
        } else {
            assert_eq!(status, StatusCode::OK);
        }
    }
    assert!(
        timed_out >= 1,
        "round robin sent some POSTs to the black hole"
    );
    assert_eq!(
        bad.requests() + good.requests(),
        4,
        "no POST reached two endpoints"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_with_an_idempotency_key_is_retried() {
    let (bad, good, h) = pair(Behavior::BlackHole).await;
    for i in 0..4 {
        let key = format!("order-{i}");
        assert_eq!(send(&h, Method::POST, Some(&key)).await.0, StatusCode::OK);
    }
    assert!(bad.requests() >= 1);
    assert_eq!(good.requests(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_that_never_reached_a_connection_goes_elsewhere() {
    let (bad, good, h) = pair(Behavior::ok()).await;
    bad.kill().await;
    for _ in 0..4 {
        assert_eq!(send(&h, Method::POST, None).await.0, StatusCode::OK);
    }
    assert_eq!(good.requests(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_503_is_retried_for_get_but_500_is_the_applications_answer() {
    let (_bad, good, h) = pair(Behavior::Status(503)).await;
    for _ in 0..4 {
        assert_eq!(send(&h, Method::GET, None).await.0, StatusCode::OK);
    }
    assert_eq!(good.requests(), 4);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(send(&h, Method::POST, None).await.0);
    }
    assert!(
        statuses.contains(&StatusCode::SERVICE_UNAVAILABLE),
        "a POST answered 503 is passed on: {statuses:?}"
    );

    let (_bad, _good, h) = pair(Behavior::Status(500)).await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(send(&h, Method::GET, None).await.0);
    }
    assert!(
        statuses.contains(&StatusCode::INTERNAL_SERVER_ERROR),
        "500 is not in retryOn: {statuses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_budget_stops_retries_when_every_endpoint_fails() {
    let a = TestBackend::spawn(Behavior::Status(503)).await.unwrap();
    let b = TestBackend::spawn(Behavior::Status(503)).await.unwrap();
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 0, consecutive5xx: 0, errorRate: {threshold: 0%}}, retries: {attempts: 2, budget: {percent: 20, minPerSecond: 1}}}";
    let h = Harness::start(&config(&[a.addr(), b.addr()], policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    let requests = 200;
    for _ in 0..requests {
        assert_eq!(
            conn.get("/").await.unwrap().status,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
    let attempts = a.requests() + b.requests();
    // 20% of the requests plus the floor of 1/s over the 10 s window.
    assert!(
        attempts <= requests + requests / 5 + 10,
        "{attempts} tries for {requests} requests: the budget did not hold"
    );
    assert!(attempts > requests, "some retries were allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_503s_count_against_the_endpoint_in_the_balancer() {
    // Half of b0's answers are 503s that get retried elsewhere; outlier ejection is off, so only
    // the balancer's error rate can steer traffic away from it.
    let b0 = TestBackend::spawn(Behavior::FailRate {
        fail: 1,
        every: 2,
        status: 503,
        latency: std::time::Duration::ZERO,
    })
    .await
    .unwrap();
    let b1 = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let b2 = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 0, consecutive5xx: 0, errorRate: {threshold: 0%}}, retries: {budget: {percent: 100}}}";
    let h = Harness::start(&config(&[b0.addr(), b1.addr(), b2.addr()], policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..600 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    let total = b0.requests() + b1.requests() + b2.requests();
    assert!(
        b0.requests() * 5 < total,
        "the endpoint failing half its requests still took {} of {total} tries",
        b0.requests()
    );
}
