//! Every answer honest: the endpoint's own answer is passed on when a retry cannot do better,
//! a client's broken upload is the client's fault and says so, and a policy the sidecar cannot
//! run is refused when it is read rather than when a request trips over it.

mod support;

use http::StatusCode;
use rollcall_dataplane::health::machine::State;
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::backends::Recorder;
use support::raw::{self, Piece};
use support::{Harness, config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_endpoint_pool_passes_its_own_503_on_and_spends_no_retry() {
    let only = Recorder::spawn("only", 503, std::time::Duration::ZERO).await;
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 0, consecutive5xx: 0, errorRate: {threshold: 0%}}}";
    let h = Harness::start(&config(&[only.addr()], policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..3 {
        let reply = conn.get("/").await.unwrap();
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            reply.headers.get("x-answer").map(|v| v.to_str().unwrap()),
            Some("only"),
            "the endpoint's own headers: {:?}",
            reply.headers
        );
        assert_eq!(reply.text(), "only says 503\n");
        assert!(reply.headers.get("x-rollcall-reason").is_none());
    }
    assert_eq!(
        only.arrivals().len(),
        3,
        "nothing else to try: one try each"
    );
    let metrics = h.metrics();
    let retries: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("rollcall_retries_total{") && !l.ends_with(" 0"))
        .collect();
    assert!(retries.is_empty(), "no retry was spent: {retries:?}");
}

/// A chunked POST whose second chunk size is not hex, sent the way a new user with a raw
/// socket would.
fn malformed_upload(path: &str) -> Vec<Piece> {
    vec![
        Piece::now(raw::chunked_head(path)),
        Piece::now(raw::chunk(b"order")),
        Piece::now(&b"zz-not-hex\r\nbroken\r\n"[..]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_chunked_body_from_the_client_is_its_fault_and_charges_nothing() {
    // An endpoint that reads the whole body before it answers, as most do.
    let backend = Recorder::spawn("reader", 200, std::time::Duration::ZERO).await;
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 3}}";
    let h = Harness::start(&config(&[backend.addr()], policy)).await;
    let listen = h.listen("web").await;
    for _ in 0..3 {
        let reply = raw::exchange(listen, malformed_upload("/orders"))
            .await
            .unwrap();
        // A 400 naming the client's body, or the connection closed: never a 502.
        if let Some(reply) = reply {
            assert_eq!(reply.status, 400, "{reply:?}");
            assert_eq!(reply.header("x-rollcall-reason"), Some("client-body-error"));
        }
    }
    h.wait_idle("web").await;
    let ep = h.endpoint("web", backend.addr()).await.unwrap();
    assert_ne!(ep.health.state, State::Ejected, "{ep:#?}");
    assert_eq!(ep.health.consecutive_gateway_errors, 0, "{ep:#?}");
    assert_eq!(ep.health.last_error, None, "{ep:#?}");
    let mut conn = Conn::http1(listen).await.unwrap();
    assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_cut_short_by_the_clients_broken_body_is_not_the_endpoints_fault() {
    // This endpoint answers at once and streams the body back: its response breaks off when the
    // client's upload does.
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 3}}";
    let h = Harness::start(&config(&[backend.addr()], policy)).await;
    let listen = h.listen("web").await;
    for _ in 0..3 {
        let reply = raw::exchange(listen, malformed_upload("/echo-body"))
            .await
            .unwrap();
        if let Some(reply) = reply {
            assert_ne!(reply.status, 502, "{reply:?}");
        }
    }
    h.wait_idle("web").await;
    let ep = h.endpoint("web", backend.addr()).await.unwrap();
    assert_ne!(ep.health.state, State::Ejected, "{ep:#?}");
    assert_eq!(ep.health.consecutive_gateway_errors, 0, "{ep:#?}");
    assert_eq!(ep.health.last_error, None, "{ep:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_durations_are_refused_when_the_config_is_read() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sidecar.yaml");
    let yaml = config(
        &[backend.addr()],
        "{timeouts: {request: 5000000000000000h}, retries: {perTryTimeout: 5000000000000000h}}",
    );
    std::fs::write(&path, yaml).unwrap();
    let started = rollcall_dataplane::sidecar::start(rollcall_dataplane::sidecar::Options {
        config: path,
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        reload_interval: std::time::Duration::from_secs(1),
    })
    .await;
    let error = match started {
        Ok(sidecar) => {
            // Before bounds were checked the sidecar started and the first request panicked.
            let listen = sidecar.runtime.listen_addrs().await["web"];
            let reply = rollcall_testkit::client::get(listen, "/").await;
            panic!("an absurd deadline was accepted; a request then got {reply:?}");
        }
        Err(error) => error.to_string(),
    };
    assert!(error.contains("timeouts.request"), "{error}");
    assert!(error.contains("retries.perTryTimeout"), "{error}");
}
