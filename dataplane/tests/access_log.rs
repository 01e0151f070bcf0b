//! The access log through a real sidecar on 127.0.0.1: a JSON line per sampled request with
//! the facts of its answer, local answers with their reason, never a query string, nothing at
//! a sample of 0. Each test waits for the lines it expects to be written.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http::StatusCode;
use rollcall_dataplane::access_log::{AccessLogConfig, Destination};
use rollcall_dataplane::sidecar::RunOptions;
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use serde_json::Value;
use support::{Harness, free_port, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Two pools: `web` in front of `web`, `broken` in front of `broken`; fast per-try timeouts.
fn two_pools(web: SocketAddr, broken: SocketAddr) -> String {
    let policy =
        "{healthCheck: {type: None}, retries: {perTryTimeout: 300ms}, timeouts: {connect: 1s}}";
    let (a, b) = (free_port(), free_port());
    format!(
        "pools:\n\
         - name: web\n  listen: {a}\n  endpoints: [{{address: \"{web}\"}}]\n  policy: {policy}\n\
         - name: broken\n  listen: {b}\n  endpoints: [{{address: \"{broken}\"}}]\n  policy: {policy}\n"
    )
}

/// A sidecar writing its access log, at `sample`, to `access.log` in a directory of its own.
async fn logging(yaml: &str, sample: f64) -> (Harness, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("access.log");
    let run = RunOptions {
        access_log: Some(AccessLogConfig {
            destination: Destination::File(path.clone()),
            sample,
        }),
        ..RunOptions::default()
    };
    (Harness::start_run(yaml, run).await, dir, path)
}

/// The file's lines once there are at least `n`, each parsed as JSON.
async fn lines(path: &Path, n: usize) -> Vec<Value> {
    within(async {
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.lines().count() >= n {
                return text
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                    .collect();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// An endpoint that reads a request and closes the connection without answering.
async fn resetting_endpoint() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
        }
    });
    addr
}

fn the<'a>(lines: &'a [Value], pool: &str, path: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["pool"] == pool && l["path"] == path)
        .unwrap_or_else(|| panic!("no line for {pool} {path} in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_gets_a_line_with_the_facts_of_its_answer_and_never_its_query() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let broken = resetting_endpoint().await;
    let (h, _dir, path) = logging(&two_pools(backend.addr(), broken), 1.0).await;
    let web = h.listen("web").await;
    let mut conn = Conn::http1(web).await.unwrap();

    let ok = conn.get("/shop/items?token=secret-1").await.unwrap();
    assert_eq!(ok.status, StatusCode::OK);
    let posted = conn.post("/upload?key=secret-2", "hello").await.unwrap();
    assert_eq!(posted.status, StatusCode::OK);
    backend.set_behavior(Behavior::BlackHole);
    let timed_out = conn.get("/slow").await.unwrap();
    assert_eq!(timed_out.status, StatusCode::GATEWAY_TIMEOUT);
    backend.kill().await;
    let mut fresh = Conn::http1(web).await.unwrap();
    let refused = fresh.get("/gone").await.unwrap();
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    let mut to_broken = Conn::http1(h.listen("broken").await).await.unwrap();
    let reset = to_broken.get("/reset").await.unwrap();
    assert_eq!(reset.status, StatusCode::BAD_GATEWAY);

    let lines = lines(&path, 5).await;
    assert_eq!(lines.len(), 5, "one line per request: {lines:#?}");
    let raw = std::fs::read_to_string(&path).unwrap();
    assert!(
        !raw.contains("secret") && !raw.contains('?'),
        "a query string was logged:\n{raw}"
    );
    let backend_addr = backend.addr().to_string();

    let get = the(&lines, "web", "/shop/items");
    assert_eq!(get["method"], "GET");
    assert_eq!(get["authority"], web.to_string());
    assert_eq!(get["protocol"], "HTTP/1.1");
    assert_eq!(get["status"], 200);
    assert_eq!(get["reason"], Value::Null);
    assert_eq!(get["endpoint"], backend_addr);
    assert_eq!(get["tries"], 1);
    assert_eq!(get["request_bytes"], 0);
    assert_eq!(get["response_bytes"], ok.body.len());
    assert_eq!(get["end"], "complete");
    let (total, first_byte) = (
        get["duration_ms"].as_f64().unwrap(),
        get["first_byte_ms"].as_f64().unwrap(),
    );
    assert!(
        0.0 < first_byte && first_byte <= total,
        "{first_byte} {total}"
    );
    assert!(get["start_time"].as_str().unwrap().ends_with('Z'));

    let post = the(&lines, "web", "/upload");
    assert_eq!(post["method"], "POST");
    assert_eq!(post["request_bytes"], 5);
    assert_eq!(post["status"], 200);

    // The sidecar's own answers: their reason, the endpoint tried, no first byte.
    for (pool, path, status, reason) in [
        ("web", "/slow", 504, "upstream-timeout"),
        ("web", "/gone", 503, "upstream-connect-failure"),
        ("broken", "/reset", 502, "upstream-reset"),
    ] {
        let line = the(&lines, pool, path);
        assert_eq!(line["status"], status, "{line}");
        assert_eq!(line["reason"], reason, "{line}");
        assert_eq!(line["tries"], 1, "{line}");
        assert_eq!(line["first_byte_ms"], Value::Null, "{line}");
        assert_eq!(line["end"], "complete", "{line}");
    }
    assert_eq!(the(&lines, "web", "/gone")["endpoint"], backend_addr);
    assert_eq!(
        the(&lines, "broken", "/reset")["endpoint"],
        broken.to_string()
    );
    assert!(
        h.metrics()
            .lines()
            .all(|l| !l.starts_with("rollcall_access_log_dropped_total") || l.ends_with(" 0")),
        "no line was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_before_its_answer_is_logged_as_gone() {
    let backend = TestBackend::spawn(Behavior::BlackHole).await.unwrap();
    let broken = resetting_endpoint().await;
    let (h, _dir, path) = logging(&two_pools(backend.addr(), broken), 1.0).await;
    let mut client = TcpStream::connect(h.listen("web").await).await.unwrap();
    client
        .write_all(b"GET /waiting HTTP/1.1\r\nhost: web\r\n\r\n")
        .await
        .unwrap();
    within(backend.wait_for_requests(1)).await;
    drop(client);

    let lines = lines(&path, 1).await;
    let line = the(&lines, "web", "/waiting");
    assert_eq!(line["end"], "client-gone", "{line}");
    assert_eq!(line["status"], 0, "no answer was sent: {line}");
    assert_eq!(line["response_bytes"], 0, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_of_zero_writes_nothing() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let broken = resetting_endpoint().await;
    let (h, _dir, path) = logging(&two_pools(backend.addr(), broken), 0.0).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..50 {
        assert_eq!(conn.get("/").await.unwrap().status, StatusCode::OK);
    }
    // Sampling is decided as each request arrives, so by now every line that could exist has
    // been handed over; the writer got none.
    h.wait_for_metric(r#"rollcall_requests_total{outcome="success",pool="web"} 50"#)
        .await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_gets_its_line_when_its_tunnel_closes_with_the_bytes_each_way() {
    let (backend, _tasks) = support::websocket::echo_backend().await;
    let policy = "{healthCheck: {type: None}, timeouts: {connect: 1s}}";
    let yaml = format!(
        "pools:\n- name: chat\n  listen: {}\n  endpoints: [{{address: \"{backend}\"}}]\n  policy: {policy}\n",
        free_port()
    );
    let (h, _dir, path) = logging(&yaml, 1.0).await;
    let chat = h.listen("chat").await;

    let (mut tunnel, head) = support::websocket::handshake(chat, "/socket?room=secret").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let sent = b"twelve bytes";
    assert_eq!(support::websocket::echo(&mut tunnel, sent).await, sent);
    assert_eq!(
        support::websocket::echo(&mut tunnel, b"and 9 more").await,
        b"and 9 more"
    );
    // No line while the tunnel is open: its bytes are not known yet.
    let raw = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(raw.is_empty(), "a line before the tunnel closed: {raw}");
    drop(tunnel);

    let lines = lines(&path, 1).await;
    let line = the(&lines, "chat", "/socket");
    assert_eq!(line["method"], "GET");
    assert_eq!(line["status"], 101);
    assert_eq!(line["end"], "tunnel");
    assert_eq!(line["endpoint"], backend.to_string());
    assert_eq!(line["tries"], 1);
    assert_eq!(line["request_bytes"], 22, "{line}");
    assert_eq!(line["response_bytes"], 22, "{line}");
    assert!(line["first_byte_ms"].as_f64().is_some(), "{line}");
    assert!(!std::fs::read_to_string(&path).unwrap().contains("secret"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_the_sidecar_answers_itself_gets_its_line_with_the_reason() {
    let nobody = free_port();
    let policy = "{healthCheck: {type: None}, timeouts: {connect: 1s}}";
    let yaml = format!(
        "pools:\n- name: chat\n  listen: {}\n  endpoints: [{{address: \"{nobody}\"}}]\n  policy: {policy}\n",
        free_port()
    );
    let (h, _dir, path) = logging(&yaml, 1.0).await;
    let (_stream, head) = support::websocket::handshake(h.listen("chat").await, "/socket").await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    let lines = lines(&path, 1).await;
    let line = the(&lines, "chat", "/socket");
    assert_eq!(line["status"], 503);
    assert_eq!(line["reason"], "upstream-connect-failure");
    assert_eq!(line["end"], "complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_retries_a_connect_failure_only_as_the_pools_retry_on_says() {
    for (retry_on, tries) in [("[connect-failure]", 2), ("[reset]", 1)] {
        // Two endpoints that refuse connections: nothing is ever sent, so only the rules and
        // the budget decide whether the second is tried.
        let (a, b) = (free_port(), free_port());
        let policy = format!(
            "{{healthCheck: {{type: None}}, timeouts: {{connect: 1s}}, retries: {{attempts: 2, retryOn: {retry_on}}}}}"
        );
        let yaml = format!(
            "pools:\n- name: chat\n  listen: {}\n  endpoints: [{{address: \"{a}\"}}, {{address: \"{b}\"}}]\n  policy: {policy}\n",
            free_port()
        );
        let (h, _dir, path) = logging(&yaml, 1.0).await;
        let (_stream, head) =
            support::websocket::handshake(h.listen("chat").await, "/socket").await;
        assert!(head.starts_with("HTTP/1.1 503"), "{retry_on}: {head}");
        let lines = lines(&path, 1).await;
        let line = the(&lines, "chat", "/socket");
        assert_eq!(line["tries"], tries, "retryOn {retry_on}: {line}");
        assert_eq!(line["reason"], "upstream-connect-failure");
    }
}
