//! HTTP/1.1 Upgrade through the sidecar: a WebSocket handshake reaches the endpoint with its
//! headers, the `101` comes back with the endpoint's, and then bytes flow both ways through a
//! tunnel that counts as one request in flight, until a side closes or the sidecar's shutdown
//! grace ends. After the handshake the sidecar is protocol-blind, so the backend here echoes the
//! raw bytes it gets (WebSocket frames included).

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use support::websocket::{ACCEPT, echo, echo_backend, handshake};
use support::{Harness, PATIENCE, config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A masked WebSocket text frame saying `text` (mask 0x01020304).
fn text_frame(text: &str) -> Vec<u8> {
    let mask = [1u8, 2, 3, 4];
    let mut frame = vec![0x81, 0x80 | u8::try_from(text.len()).expect("short")];
    frame.extend_from_slice(&mask);
    frame.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_is_tunnelled_end_to_end_and_counts_as_one_request_in_flight() {
    let (backend, _tasks) = echo_backend().await;
    let h = Harness::start(&config(&[backend], "{healthCheck: {type: None}}")).await;
    let (mut stream, head) = handshake(h.listen("web").await, "/chat").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("upgrade: websocket"), "{head}");
    assert!(lower.contains("connection: upgrade"), "{head}");
    assert!(
        head.contains(ACCEPT),
        "the endpoint's accept reaches the client: {head}"
    );
    for text in ["hello", "through the sidecar", "and back"] {
        let frame = text_frame(text);
        assert_eq!(echo(&mut stream, &frame).await, frame);
    }
    let open = h.endpoint("web", backend).await.expect("endpoint");
    assert_eq!(open.in_flight, 1, "the tunnel is one request in flight");
    drop(stream);
    h.wait_idle("web").await;
}

/// An HTTP/2 connection to the sidecar that has seen its SETTINGS (extended CONNECT may be
/// sent only once the server has allowed it): one ordinary request goes first.
async fn h2_client(proxy: SocketAddr) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(proxy).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(stream),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    let first = Request::builder()
        .uri(format!("http://{proxy}/declined"))
        .body(Empty::new())
        .expect("request");
    let _ = send.send_request(first).await.expect("a first request");
    send
}

fn extended_connect(proxy: SocketAddr, protocol: &'static str) -> Request<Empty<Bytes>> {
    let mut req = Request::builder()
        .method(http::Method::CONNECT)
        .version(http::Version::HTTP_2)
        .uri(format!("http://{proxy}/chat"))
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "chat")
        .body(Empty::new())
        .expect("request");
    req.extensions_mut()
        .insert(hyper::ext::Protocol::from_static(protocol));
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_over_http2_reaches_an_http1_endpoint_as_an_upgrade_and_echoes() {
    let (backend, _tasks) = echo_backend().await;
    let h = Harness::start(&config(&[backend], "{healthCheck: {type: None}}")).await;
    let proxy = h.listen("web").await;
    let mut client = h2_client(proxy).await;
    let mut response = client
        .send_request(extended_connect(proxy, "websocket"))
        .await
        .expect("an answer to the extended CONNECT");
    // RFC 8441: the switch is a 200, without HTTP/1.1's handshake headers.
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("sec-websocket-accept").is_none());
    assert!(response.headers().get("upgrade").is_none());
    let upgraded = hyper::upgrade::on(&mut response)
        .await
        .expect("the stream becomes the tunnel");
    let mut io = TokioIo::new(upgraded);
    for text in ["over", "http/2"] {
        let frame = text_frame(text);
        io.write_all(&frame).await.expect("write");
        let mut back = vec![0u8; frame.len()];
        tokio::time::timeout(PATIENCE, io.read_exact(&mut back))
            .await
            .expect("echo in time")
            .expect("read");
        assert_eq!(back, frame);
    }
    let open = h.endpoint("web", backend).await.expect("endpoint");
    assert_eq!(open.in_flight, 1, "the tunnel is one request in flight");
    drop(io);
    drop(client);
    h.wait_idle("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_connect_for_another_protocol_is_refused_as_not_implemented() {
    let (backend, _tasks) = echo_backend().await;
    let h = Harness::start(&config(&[backend], "{healthCheck: {type: None}}")).await;
    let proxy = h.listen("web").await;
    let mut client = h2_client(proxy).await;
    let response = client
        .send_request(extended_connect(proxy, "connect-udp"))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::NOT_IMPLEMENTED);
    assert_eq!(
        response.headers()["x-rollcall-reason"],
        "unsupported-protocol"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_upgrade_is_answered_with_the_endpoints_own_status() {
    let (backend, _tasks) = echo_backend().await;
    let h = Harness::start(&config(&[backend], "{healthCheck: {type: None}}")).await;
    let (_stream, head) = handshake(h.listen("web").await, "/declined").await;
    assert!(head.starts_with("HTTP/1.1 426"), "{head}");
    h.wait_idle("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_endpoint_to_take_it_an_upgrade_gets_an_honest_answer() {
    let nothing = support::free_port();
    let h = Harness::start(&config(&[nothing], "{healthCheck: {type: None}}")).await;
    let (_stream, head) = handshake(h.listen("web").await, "/chat").await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("x-rollcall-reason: upstream-connect-failure"),
        "{head}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_shutdown_a_tunnel_keeps_working_through_the_grace_period_then_is_closed() {
    let (backend, _tasks) = echo_backend().await;
    let h = Harness::start(&config(&[backend], "{healthCheck: {type: None}}")).await;
    let (mut stream, head) = handshake(h.listen("web").await, "/chat").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let runtime = std::sync::Arc::clone(&h.sidecar.runtime);
    let grace = Duration::from_millis(800);
    let started = tokio::time::Instant::now();
    let stopping = tokio::spawn(async move { runtime.shutdown_within(grace).await });
    // Still open while the grace period runs.
    let frame = text_frame("still here");
    assert_eq!(echo(&mut stream, &frame).await, frame);
    // Then closed: the read ends.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the tunnel was never closed");
    assert!(
        started.elapsed() >= grace,
        "closed before the grace period ended"
    );
    stopping.await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_the_endpoint_never_answers_ends_at_the_try_timeout() {
    let silent = rollcall_testkit::TestBackend::spawn(rollcall_testkit::Behavior::BlackHole)
        .await
        .expect("backend");
    let h = Harness::start(&config(
        &[silent.addr()],
        "{healthCheck: {type: None}, retries: {perTryTimeout: 300ms}}",
    ))
    .await;
    let (_stream, head) = handshake(h.listen("web").await, "/chat").await;
    assert!(head.starts_with("HTTP/1.1 504"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("x-rollcall-reason: upstream-timeout"),
        "{head}"
    );
    h.wait_idle("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_ends_at_the_request_deadline_when_it_comes_before_the_try_timeout() {
    // The request's deadline holds the handshake as it holds any request: cut at 300 ms, not
    // charged to the endpoint, answered as the deadline passing rather than a 5 s try timeout.
    let silent = rollcall_testkit::TestBackend::spawn(rollcall_testkit::Behavior::BlackHole)
        .await
        .expect("backend");
    let h = Harness::start(&config(
        &[silent.addr()],
        "{healthCheck: {type: None}, retries: {perTryTimeout: 5s}, timeouts: {request: 300ms}}",
    ))
    .await;
    let (_stream, head) = handshake(h.listen("web").await, "/chat").await;
    assert!(head.starts_with("HTTP/1.1 504"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("x-rollcall-reason: deadline-exceeded"),
        "{head}"
    );
    h.wait_idle("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_that_moves_no_byte_for_the_idle_limit_is_closed_and_frees_its_endpoint() {
    let (backend, _tasks) = echo_backend().await;
    let tuning = rollcall_dataplane::pool::Tuning {
        tunnel_idle: Duration::from_millis(500),
        ..Default::default()
    };
    let h = Harness::start_with(&config(&[backend], "{healthCheck: {type: None}}"), tuning).await;
    let (mut stream, head) = handshake(h.listen("web").await, "/chat").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let frame = text_frame("then silence");
    // Taken before the last bytes move: the tunnel's idle clock starts when it moves them,
    // which is before the client has read the echo, so a mark taken after the echo would let
    // a correct close look early (a CI run saw it).
    let quiet = tokio::time::Instant::now();
    assert_eq!(echo(&mut stream, &frame).await, frame);
    let mut rest = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the idle tunnel was never closed");
    assert!(
        quiet.elapsed() >= Duration::from_millis(500),
        "closed before the idle limit"
    );
    h.wait_idle("web").await;
}
