//! The sidecar as a proxy: what it forwards, what it strips, what it adds, and the honest
//! answers it makes itself. Real backends and real clients on 127.0.0.1.

mod support;

use http::{Method, StatusCode};
use rollcall_dataplane::pool::Tuning;
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::{Harness, config};

#[tokio::test]
async fn forwards_requests_and_bodies_over_http1_and_h2c() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(&[backend.addr()], "{}")).await;
    let listen = h.listen("web").await;

    let mut h1 = Conn::http1(listen).await.unwrap();
    let reply = h1.get("/").await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), format!("backend {}\n", backend.addr().port()));
    let big = vec![b'x'; 300 * 1024];
    let echoed = h1.post("/echo-body", big.clone()).await.unwrap();
    assert_eq!(echoed.status, StatusCode::OK);
    assert_eq!(
        echoed.body.len(),
        big.len(),
        "a streamed body arrives whole"
    );

    let mut h2 = Conn::h2c(listen).await.unwrap();
    for _ in 0..3 {
        let reply = h2.get("/").await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
    }
    assert_eq!(backend.requests(), 5);
}

#[tokio::test]
async fn hop_by_hop_headers_are_stripped_and_forwarded_headers_added() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(&[backend.addr()], "{}")).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    let req = conn
        .request(Method::GET, "/echo")
        .header("connection", "x-private")
        .header("x-private", "secret")
        .header("proxy-connection", "keep-alive")
        .header("x-forwarded-for", "203.0.113.9")
        .header("x-app", "kept")
        .body(Default::default())
        .unwrap();
    let reply = conn.send(req).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    let seen: serde_json::Value = reply.json().unwrap();
    let header = |name: &str| seen["headers"][name].as_str().map(str::to_owned);
    assert_eq!(
        header("x-private"),
        None,
        "fields named by Connection are hop-by-hop"
    );
    assert_eq!(header("proxy-connection"), None);
    assert_eq!(header("x-app").as_deref(), Some("kept"));
    assert_eq!(
        header("x-forwarded-for").as_deref(),
        Some("203.0.113.9, 127.0.0.1")
    );
    assert_eq!(header("x-forwarded-proto").as_deref(), Some("http"));
    assert!(header("host").is_some());
}

#[tokio::test]
async fn empty_pool_answers_503_with_a_reason() {
    let h = Harness::start(&config(&[], "{}")).await;
    let reply = rollcall_testkit::client::get(h.listen("web").await, "/")
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers["x-rollcall-reason"], "no-endpoints");
    assert!(
        reply.text().contains("pool web has no endpoints"),
        "{}",
        reply.text()
    );
}

/// An endpoint on 127.0.0.1 that answers every connection's first read with `answer`, as
/// written, then waits for the peer to close.
async fn raw_endpoint(answer: &'static [u8]) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(answer).await;
                let _ = s.read(&mut buf).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn endpoint_that_answers_garbage_gives_502() {
    let addr = raw_endpoint(b"SMTP READY\r\n\r\n").await;
    let h = Harness::start(&config(&[addr], "{healthCheck: {type: None}}")).await;
    let reply = rollcall_testkit::client::get(h.listen("web").await, "/")
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    assert_eq!(
        reply.headers["x-rollcall-reason"],
        "upstream-protocol-error"
    );
}

#[tokio::test]
async fn a_length_that_the_transfer_coding_overrides_does_not_cut_the_body() {
    // The endpoint frames its body chunked and also says a (wrong) Content-Length: the coding
    // decides (RFC 9112 §6.3), and the length must not reach the client, where it would cut
    // the body short.
    let addr = raw_endpoint(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n\
          b\r\nhello world\r\n0\r\n\r\n",
    )
    .await;
    let h = Harness::start(&config(&[addr], "{healthCheck: {type: None}}")).await;
    let reply = rollcall_testkit::client::get(h.listen("web").await, "/")
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), "hello world");
    assert!(
        !reply.headers.contains_key("content-length"),
        "{:?}",
        reply.headers
    );
}

#[tokio::test]
async fn a_get_with_a_chunked_body_reaches_the_endpoint_with_its_body() {
    // hyper's client frames a GET whose body has no length as empty and drops the body; the
    // sidecar sends it on chunked, as the client framed it.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(&[backend.addr()], "{healthCheck: {type: None}}")).await;
    let mut client = tokio::net::TcpStream::connect(h.listen("web").await)
        .await
        .unwrap();
    client
        .write_all(
            b"GET /echo-body HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\
              Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    support::within(client.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("hello"),
        "the body did not arrive: {answer}"
    );
}

#[tokio::test]
async fn four_xx_never_counts_against_an_endpoint() {
    let backend = TestBackend::spawn(Behavior::Status(404)).await.unwrap();
    let h = Harness::start(&config(&[backend.addr()], "{healthCheck: {type: None}, outlierDetection: {consecutive5xx: 2, consecutiveGatewayErrors: 2}}")).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..20 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::NOT_FOUND);
    }
    let ep = h.endpoint("web", backend.addr()).await.unwrap();
    assert_eq!(ep.health.consecutive_5xx, 0);
    assert_ne!(
        ep.health.state,
        rollcall_dataplane::health::machine::State::Ejected
    );
}

#[tokio::test]
async fn admin_serves_endpoints_metrics_and_readiness() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(&[backend.addr()], "{}")).await;
    rollcall_testkit::client::get(h.listen("web").await, "/")
        .await
        .unwrap();
    let admin = h.sidecar.admin_addr;
    let ready = rollcall_testkit::client::get(admin, "/ready")
        .await
        .unwrap();
    assert_eq!(ready.status, StatusCode::OK);
    let live = rollcall_testkit::client::get(admin, "/live").await.unwrap();
    assert_eq!(live.status, StatusCode::OK);
    let endpoints: serde_json::Value = rollcall_testkit::client::get(admin, "/endpoints")
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(endpoints["pools"][0]["name"], "web");
    assert_eq!(
        endpoints["pools"][0]["endpoints"][0]["address"],
        backend.addr().to_string()
    );
    let metrics = rollcall_testkit::client::get(admin, "/metrics")
        .await
        .unwrap()
        .text();
    assert!(
        metrics.contains(r#"rollcall_requests_total{outcome="success",pool="web"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("rollcall_request_duration_seconds_bucket"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_connections_are_kept_alive_and_reused() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(&[backend.addr()], "{healthCheck: {type: None}}")).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..50 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    let stats = backend.stats();
    assert_eq!(stats.requests, 50);
    assert!(
        stats.connections <= 2,
        "50 sequential requests used {} connections",
        stats.connections
    );
}

#[tokio::test]
async fn http2_pools_speak_h2c_to_their_endpoints() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let h = Harness::start(&config(
        &[backend.addr()],
        "{protocol: HTTP2, healthCheck: {type: None}}",
    ))
    .await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..10 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    assert_eq!(
        backend.stats().connections,
        1,
        "one multiplexed connection carries every request"
    );
}

#[tokio::test]
async fn a_pool_keeps_no_more_idle_connections_than_its_budget() {
    let mut backends = Vec::new();
    for _ in 0..3 {
        backends.push(TestBackend::spawn(Behavior::ok()).await.unwrap());
    }
    let addrs: Vec<_> = backends.iter().map(TestBackend::addr).collect();
    let tuning = Tuning {
        max_idle_connections: 1,
        ..Tuning::default()
    };
    let policy = "{healthCheck: {type: None}, loadBalancer: {algorithm: RoundRobin}}";
    let h = Harness::start_with(&config(&addrs, policy), tuning).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    // One request to each endpoint in turn: each connection goes idle when its response ends,
    // and each after the first pushes the one idle longest out.
    for _ in 0..3 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    h.wait_for_metric("rollcall_idle_connection_evictions_total{pool=\"web\"} 2")
        .await;
    for backend in &backends {
        assert_eq!(backend.requests(), 1, "round robin reached every endpoint");
    }
    let open = || -> u64 { backends.iter().map(|b| b.stats().open_connections).sum() };
    support::within(async {
        while open() != 1 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
}
