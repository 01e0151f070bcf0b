//! HTTP/2 to the endpoints: a multiplexed connection that went dark is replaced rather than
//! kept, and requests beyond an endpoint's stream limit go on another connection instead of
//! queueing into a timeout that the endpoint would be charged for.

mod support;

use std::time::Duration;

use http::StatusCode;
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::backends::H2Limited;
use support::relay::Relay;
use support::{Harness, config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn black_holed_h2_connection_is_replaced() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let relay = Relay::spawn(backend.addr()).await;
    let policy = "{protocol: HTTP2, healthCheck: {type: TCP, interval: 100ms, timeout: 100ms, jitter: 0%, healthyThreshold: 1, unhealthyThreshold: 1}, outlierDetection: {consecutiveGatewayErrors: 1, baseEjectionTime: 200ms}, retries: {perTryTimeout: 300ms, attempts: 1}}";
    let h = Harness::start(&config(&[relay.addr()], policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    // The connection the sidecar multiplexes on goes dark; new connections still work.
    relay.freeze();
    let recovered = tokio::time::timeout(Duration::from_secs(15), async {
        let mut statuses = Vec::new();
        loop {
            let status = conn.get("/").await.unwrap().status;
            statuses.push(status);
            if status == StatusCode::OK {
                return statuses;
            }
        }
    })
    .await
    .expect("the sidecar kept sending on the dead connection");
    assert_eq!(
        recovered.first(),
        Some(&StatusCode::GATEWAY_TIMEOUT),
        "the first request after the freeze met the dead connection: {recovered:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_stream_limit_take_another_connection_and_charge_nothing() {
    let backend = H2Limited::spawn(1, Duration::from_millis(200)).await;
    let policy = "{protocol: HTTP2, healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 2}, retries: {perTryTimeout: 300ms, attempts: 1}}";
    let h = Harness::start(&config(&[backend.addr()], policy)).await;
    let listen = h.listen("web").await;
    // Open the first connection so its SETTINGS (one stream at a time) are known.
    let mut first = Conn::http1(listen).await.unwrap();
    assert_eq!(first.get("/").await.unwrap().status, StatusCode::OK);
    let mut requests = Vec::new();
    for _ in 0..6 {
        requests.push(tokio::spawn(async move {
            rollcall_testkit::client::get(listen, "/")
                .await
                .unwrap()
                .status
        }));
    }
    for request in requests {
        assert_eq!(support::within(request).await.unwrap(), StatusCode::OK);
    }
    let ep = h.endpoint("web", backend.addr()).await.unwrap();
    assert_eq!(ep.health.consecutive_gateway_errors, 0, "{ep:#?}");
    assert!(backend.connections() >= 2, "more connections were opened");
}
