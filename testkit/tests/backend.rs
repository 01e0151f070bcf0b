//! The kit's own tests: real sockets on 127.0.0.1, waiting on events (counters, refused
//! connects, a client timeout), never on sleeps.

use std::io::ErrorKind;
use std::time::Duration;

use http::Method;
use rollcall_testkit::client::{self, Conn};
use rollcall_testkit::{BACKEND_HEADER, Behavior, Echo, TestBackend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Upper bound for things that should happen at once; only reached when a test fails.
const SOON: Duration = Duration::from_secs(5);

type TestResult = anyhow::Result<()>;

#[tokio::test]
async fn ok_backend_names_itself_over_http1_and_h2c() -> TestResult {
    let backend = TestBackend::spawn(Behavior::ok()).await?;
    let port = backend.addr().port();

    let reply = client::get(backend.addr(), "/").await?;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), format!("backend {port}\n"));
    assert_eq!(reply.headers[BACKEND_HEADER], backend.addr().to_string());

    let mut h2 = Conn::h2c(backend.addr()).await?;
    let echo: Echo = h2.get("/echo").await?.json()?;
    assert_eq!(echo.version, "HTTP/2.0");
    assert_eq!(backend.stats().status(200), 2);
    Ok(())
}

#[tokio::test]
async fn kill_refuses_connects_and_closes_pooled_connections() -> TestResult {
    let backend = TestBackend::spawn(Behavior::ok()).await?;
    let mut pooled = Conn::http1(backend.addr()).await?;
    assert_eq!(pooled.get("/").await?.status, 200);

    backend.kill().await;

    assert!(!backend.is_alive());
    assert_eq!(backend.stats().open_connections, 0);
    let refused = TcpStream::connect(backend.addr()).await.err();
    assert_eq!(
        refused.map(|e| e.kind()),
        Some(ErrorKind::ConnectionRefused)
    );
    assert!(pooled.get("/").await.is_err(), "pooled connection survived");
    Ok(())
}

#[tokio::test]
async fn revive_serves_again_on_the_same_port() -> TestResult {
    let backend = TestBackend::spawn(Behavior::ok()).await?;
    let addr = backend.addr();
    let mut conn = Conn::http1(addr).await?;
    conn.get("/").await?;
    backend.kill().await;

    backend.revive().await?;

    assert_eq!(backend.addr(), addr);
    assert!(backend.is_alive());
    let reply = client::get(addr, "/").await?;
    assert_eq!(reply.text(), format!("backend {}\n", addr.port()));
    assert_eq!(backend.requests(), 2, "counters survive a restart");
    Ok(())
}

#[tokio::test]
async fn black_hole_accepts_and_reads_but_never_answers() -> TestResult {
    let backend = TestBackend::spawn(Behavior::BlackHole).await?;
    let mut traffic = Conn::http1(backend.addr()).await?;
    let mut health = Conn::http1(backend.addr()).await?;

    let unanswered = timeout(Duration::from_millis(300), traffic.get("/")).await;
    assert!(unanswered.is_err(), "black hole answered: {unanswered:?}");
    let unanswered = timeout(Duration::from_millis(300), health.get("/healthz")).await;
    assert!(unanswered.is_err(), "black hole answered /healthz");

    // Both requests were read: the counters say so.
    timeout(
        SOON,
        backend.wait_until(|s| s.requests == 1 && s.health_checks == 1),
    )
    .await?;
    assert_eq!(backend.stats().responses(), 0);

    // Un-black-holing serves new connections again.
    backend.set_behavior(Behavior::ok());
    assert_eq!(client::get(backend.addr(), "/").await?.status, 200);
    Ok(())
}

#[tokio::test]
async fn fail_one_in_five_fails_exactly_every_fifth_request() -> TestResult {
    let backend = TestBackend::spawn(Behavior::fail_one_in(5, 503)).await?;
    let mut conn = Conn::http1(backend.addr()).await?;
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(conn.get("/").await?.status.as_u16());
    }
    let failed: Vec<usize> = (0..20).filter(|&i| statuses[i] == 503).collect();
    assert_eq!(failed, vec![4, 9, 14, 19]);
    let stats = backend.stats();
    assert_eq!((stats.status(200), stats.status(503)), (16, 4));

    // A new behaviour restarts the count.
    backend.set_behavior(Behavior::fail_one_in(2, 500));
    assert_eq!(conn.get("/").await?.status, 200);
    assert_eq!(conn.get("/").await?.status, 500);
    Ok(())
}

#[tokio::test]
async fn status_behavior_answers_every_request_with_it() -> TestResult {
    let backend = TestBackend::spawn(Behavior::Status(502)).await?;
    let mut conn = Conn::http1(backend.addr()).await?;
    for _ in 0..3 {
        assert_eq!(conn.get("/anything").await?.status, 502);
    }
    assert_eq!(
        conn.get("/healthz").await?.status,
        200,
        "health is separate"
    );
    Ok(())
}

#[tokio::test]
async fn healthz_is_counted_apart_and_follows_set_healthz() -> TestResult {
    let backend = TestBackend::spawn(Behavior::ok()).await?;
    let mut conn = Conn::http1(backend.addr()).await?;
    assert_eq!(conn.get("/healthz").await?.status, 200);
    backend.set_healthz(false);
    assert_eq!(conn.get("/healthz").await?.status, 503);
    assert_eq!(conn.get("/").await?.status, 200, "traffic still served");

    let stats = backend.stats();
    assert_eq!((stats.health_checks, stats.requests), (2, 1));
    assert_eq!(
        stats.by_status.len(),
        1,
        "only traffic statuses are counted"
    );
    Ok(())
}

#[tokio::test]
async fn echo_returns_the_request_headers() -> TestResult {
    let backend = TestBackend::spawn(Behavior::ok()).await?;
    let mut conn = Conn::http1(backend.addr()).await?;
    let req = conn
        .request(Method::GET, "/echo?x=1")
        .header("x-forwarded-for", "10.0.0.1")
        .header("x-multi", "a")
        .header("x-multi", "b")
        .body(Default::default())?;
    let echo: Echo = conn.send(req).await?.json()?;

    assert_eq!(echo.backend, backend.addr().to_string());
    assert_eq!(
        (echo.method.as_str(), echo.uri.as_str()),
        ("GET", "/echo?x=1")
    );
    assert_eq!(echo.version, "HTTP/1.1");
    assert_eq!(echo.headers["x-forwarded-for"], "10.0.0.1");
    assert_eq!(echo.headers["x-multi"], "a, b");
    assert_eq!(echo.headers["host"], backend.addr().to_string());
    Ok(())
}

#[tokio::test]
async fn echo_body_streams_the_body_back() -> TestResult {
    let backend = TestBackend::spawn(Behavior::ok()).await?;
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    for mut conn in [
        Conn::http1(backend.addr()).await?,
        Conn::h2c(backend.addr()).await?,
    ] {
        let reply = conn.post("/echo-body", body.clone()).await?;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.as_ref(), body.as_slice());
    }
    Ok(())
}

#[tokio::test]
async fn broken_responses_send_headers_then_close() -> TestResult {
    for (behavior, sent) in [
        (Behavior::ResetAfterHeaders, ""),
        (Behavior::CloseMidBody, "backend partial "),
    ] {
        let backend = TestBackend::spawn(behavior).await?;
        let mut conn = Conn::http1(backend.addr()).await?;
        let broken = timeout(SOON, conn.get("/")).await?;
        assert!(broken.is_err(), "{behavior:?} gave a whole response");
        assert!(conn.get("/healthz").await.is_err(), "connection not closed");
        assert_eq!(client::get(backend.addr(), "/healthz").await?.status, 200);

        // On the wire: a 200 announcing 64 bytes, `sent` of them, then end of stream.
        let mut raw = TcpStream::connect(backend.addr()).await?;
        raw.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await?;
        let mut bytes = Vec::new();
        timeout(SOON, raw.read_to_end(&mut bytes)).await??;
        let text = String::from_utf8_lossy(&bytes);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        assert!(head.starts_with("HTTP/1.1 200"), "{behavior:?}: {head}");
        assert!(head.contains("content-length: 64"), "{behavior:?}: {head}");
        assert_eq!(body, sent, "{behavior:?}");
        assert_eq!(backend.stats().status(200), 2, "{behavior:?}");
    }
    Ok(())
}

#[tokio::test]
async fn latency_delays_the_answer() -> TestResult {
    let backend = TestBackend::spawn(Behavior::slow(Duration::from_secs(30))).await?;
    let mut conn = Conn::http1(backend.addr()).await?;
    let early = timeout(Duration::from_millis(200), conn.get("/")).await;
    assert!(early.is_err(), "answered before its latency");
    timeout(SOON, backend.wait_for_requests(1)).await?;
    Ok(())
}

#[tokio::test]
async fn dropping_the_backend_stops_everything() -> TestResult {
    let backend = TestBackend::spawn(Behavior::BlackHole).await?;
    let addr = backend.addr();
    let mut hung = Conn::http1(addr).await?;
    let request = tokio::spawn(async move { hung.get("/").await.is_err() });
    timeout(SOON, backend.wait_for_requests(1)).await?;

    drop(backend);

    assert!(
        timeout(SOON, request).await??,
        "hung request was not cut off"
    );
    let refused = TcpStream::connect(addr).await.err();
    assert_eq!(
        refused.map(|e| e.kind()),
        Some(ErrorKind::ConnectionRefused)
    );
    Ok(())
}

#[tokio::test]
async fn waiting_for_connections_sees_each_accept() -> TestResult {
    let backend = TestBackend::spawn(Behavior::ok()).await?;
    let waiter = backend.wait_for_connections(2);
    let (_a, _b) = (
        Conn::http1(backend.addr()).await?,
        Conn::http1(backend.addr()).await?,
    );
    timeout(SOON, waiter).await?;
    assert_eq!(backend.stats().open_connections, 2);
    Ok(())
}

#[tokio::test]
async fn request_ids_are_kept_in_arrival_order_until_a_reset() -> TestResult {
    let b = TestBackend::spawn(Behavior::ok()).await?;
    let mut conn = Conn::http1(b.addr()).await?;
    for id in ["post-4", "get-5", "post-4"] {
        let req = conn
            .request(Method::POST, "/")
            .header("x-request-id", id)
            .body(http_body_util::Full::new(bytes::Bytes::new()))?;
        conn.send(req).await?;
    }
    conn.get("/").await?;
    assert_eq!(b.request_ids(), ["post-4", "get-5", "post-4"]);
    b.reset_counters();
    assert!(b.request_ids().is_empty());
    Ok(())
}
