//! Pooled keep-alive connections that cannot carry the next request, against real sockets on
//! 127.0.0.1: a request that pops them goes on at once to a connection that can, instead of
//! waiting on each of them.
//!
//! Two ways a pooled connection goes bad: its backend dies (killed: its sockets close), and an
//! upload the endpoint answered early is still being written when its answer ends, so the
//! connection is neither closed nor ready for the next request (the endpoint then stops reading,
//! the client stops sending: it stays so). The first is noticed by the connection's own task at
//! once (measured: not one pooled connection of a killed backend was found unready); the second
//! is what cost a request the whole connect timeout per connection popped.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use http::StatusCode;
use parking_lot::Mutex;
use rollcall_dataplane::pool::Http1Engine;
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::{Harness, config, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The sum of the series of counter `name` whose labels include every one of `labels`.
fn counter(metrics: &str, name: &str, labels: &[String]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|label| l.contains(label.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Tries on `endpoint` that ended with `outcome` (`rollcall_attempts_total`).
fn attempts(metrics: &str, endpoint: SocketAddr, outcome: &str) -> u64 {
    counter(
        metrics,
        "rollcall_attempts_total",
        &[
            format!("endpoint=\"{endpoint}\""),
            format!("outcome=\"{outcome}\""),
        ],
    )
}

/// Every GET, 200 or not, with what went wrong.
struct Traffic {
    stop: Arc<AtomicBool>,
    /// GETs answered since `mark`.
    since_mark: Arc<AtomicU64>,
    marked: Arc<AtomicBool>,
    failures: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    fn start(listen: SocketAddr, clients: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let since_mark = Arc::new(AtomicU64::new(0));
        let marked = Arc::new(AtomicBool::new(false));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..clients)
            .map(|_| {
                let (stop, since_mark, marked, failures) = (
                    stop.clone(),
                    since_mark.clone(),
                    marked.clone(),
                    failures.clone(),
                );
                tokio::spawn(async move {
                    let mut conn = Conn::http1(listen).await.expect("connect to the sidecar");
                    while !stop.load(Ordering::Relaxed) {
                        let reply = conn.get("/").await;
                        if marked.load(Ordering::Relaxed) {
                            since_mark.fetch_add(1, Ordering::Relaxed);
                        }
                        match reply {
                            Ok(r) if r.status == StatusCode::OK => {}
                            Ok(r) => failures.lock().push(format!("{} {}", r.status, r.text())),
                            Err(e) => {
                                failures.lock().push(e.to_string());
                                conn = Conn::http1(listen).await.expect("reconnect");
                            }
                        }
                    }
                })
            })
            .collect();
        Self {
            stop,
            since_mark,
            marked,
            failures,
            tasks,
        }
    }

    /// Start counting GETs from now.
    fn mark(&self) {
        self.marked.store(true, Ordering::Relaxed);
    }

    async fn wait_for_gets_since_mark(&self, n: u64) {
        within(async {
            while self.since_mark.load(Ordering::Relaxed) < n {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await;
    }

    async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.expect("client task");
        }
        std::mem::take(&mut *self.failures.lock())
    }
}

/// A backend killed under load while it holds pooled connections: every GET after the kill is
/// answered by the live one, the dead one's tries end as refused connects, resets (the GETs in
/// flight at the kill) or dead pooled connections (free retries), and none waits for a clock.
/// Detection is off, so the dead backend keeps being picked and its pooled connections popped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_backends_pooled_connections_hold_up_no_request() {
    let slow = Behavior::slow(std::time::Duration::from_millis(3));
    let live = TestBackend::spawn(slow).await.unwrap();
    let doomed = TestBackend::spawn(slow).await.unwrap();
    // A connect timeout longer than the request's: a request made to wait one out on a pooled
    // connection is cut by its deadline (504), which the test would see.
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 0, consecutive5xx: 0}, timeouts: {connect: 10s, request: 5s}}";
    let h = Harness::start(&config(&[live.addr(), doomed.addr()], policy)).await;
    let traffic = Traffic::start(h.listen("web").await, 16);
    within(doomed.wait_until(|s| s.open_connections >= 6)).await;

    doomed.kill().await;
    traffic.mark();
    traffic.wait_for_gets_since_mark(1000).await;
    let failures = traffic.stop().await;
    h.wait_idle("web").await;

    assert!(failures.is_empty(), "GETs failed: {failures:?}");
    let metrics = h.metrics();
    assert_eq!(
        attempts(&metrics, doomed.addr(), "timeout"),
        0,
        "a try on the dead backend waited out its allowance"
    );
    // `cancelled` counts dead pooled connections (free retries) and tries cut by a deadline;
    // only the first may be here.
    let dead_pooled = counter(
        &metrics,
        "rollcall_retries_total",
        &[r#"reason="dead_pooled_connection""#.to_owned()],
    );
    let cancelled = attempts(&metrics, doomed.addr(), "cancelled");
    assert!(
        cancelled <= dead_pooled,
        "{cancelled} tries on the dead backend were cut, {dead_pooled} of them dead pooled connections"
    );
    assert!(
        attempts(&metrics, doomed.addr(), "connect_failure") > 0,
        "the dead backend was still picked after the kill"
    );
}

/// The endpoint of the second test: answers a GET with 200 and keeps the connection; answers an
/// upload at once, before reading its body (as a backend refusing it does), then goes dark on
/// that connection, neither reading nor closing.
async fn early_answering_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_early(stream));
        }
    });
    addr
}

async fn serve_early(mut stream: TcpStream) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        };
        let upload = buf.starts_with(b"POST");
        buf.drain(..head_end);
        let answer: &[u8] = if upload {
            b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 9\r\n\r\ntoo large"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n"
        };
        if stream.write_all(answer).await.is_err() {
            return;
        }
        if upload {
            // Dark: the socket stays open, nothing more is read or written.
            std::future::pending::<()>().await;
        }
    }
}

/// A client that starts an upload of `content-length` far beyond what it sends, reads the
/// early answer, and keeps its connection open without sending the rest.
async fn stalled_upload(listen: SocketAddr) -> (TcpStream, u16) {
    let mut stream = TcpStream::connect(listen).await.expect("connect");
    let head = format!(
        "POST /upload HTTP/1.1\r\nhost: web\r\ncontent-length: 10000000\r\n\r\n{}",
        "x".repeat(1024)
    );
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut got = Vec::new();
    while !got.ends_with(b"too large") {
        let mut chunk = [0u8; 1024];
        let n = stream.read(&mut chunk).await.expect("read the answer");
        assert!(n > 0, "the sidecar closed instead of answering");
        got.extend_from_slice(&chunk[..n]);
    }
    let status = std::str::from_utf8(&got[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (stream, status)
}

/// Uploads answered early leave their pooled connections neither closed nor ready (still
/// writing an upload that will not move); each GET after them pops one. Before, each popped
/// connection was waited on for the whole connect timeout (10 s here, past the request's 3 s
/// deadline: every GET got 504 `deadline-exceeded`); now the checkout gives up on them within
/// its one short wait and the GET goes out on a fresh connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_connections_that_cannot_be_used_are_not_waited_on() {
    let backend = early_answering_backend().await;
    let policy = "{healthCheck: {type: None}, timeouts: {connect: 10s, request: 3s}}";
    let h = Harness::start(&config(&[backend], policy)).await;
    let listen = h.listen("web").await;

    const STALLED: usize = 4;
    let mut held = Vec::new();
    for _ in 0..STALLED {
        let (stream, status) = stalled_upload(listen).await;
        assert_eq!(status, 413, "the early answer came through");
        held.push(stream);
    }
    let view = h.endpoint("web", backend).await.expect("the endpoint");
    match Harness::engine_under_test() {
        // hyper's client keeps each connection, still writing its upload.
        Http1Engine::Hyper => {
            assert_eq!(view.open_connections, STALLED, "one connection per upload")
        }
        // The fast engine's own connections close when an answer ends before its upload.
        Http1Engine::Fast => assert_eq!(view.open_connections, 0, "none kept half-used"),
    }

    // One GET per unusable connection and one more, on a keep-alive connection of their own.
    let mut conn = Conn::http1(listen).await.expect("connect");
    for i in 0..=STALLED {
        let reply = conn.get("/").await.expect("an answer");
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "GET {i} got {} {}",
            reply.status,
            reply.text()
        );
    }
    let metrics = h.metrics();
    assert_eq!(
        attempts(&metrics, backend, "success"),
        STALLED as u64 + 1,
        "each GET was answered on its first try"
    );
    assert_eq!(
        attempts(&metrics, backend, "cancelled"),
        0,
        "no try was cut"
    );
    drop(held);
}
