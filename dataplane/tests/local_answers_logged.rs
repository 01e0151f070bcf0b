//! Every answer the sidecar makes itself leaves a trace at `info`: one line per reason per
//! second in each pool, naming the status, the reason and the tries behind it, and the next
//! line counting the answers that went without one. Its own binary, because it installs the
//! process-wide log subscriber it reads.

mod support;

use std::io::Write;
use std::sync::Arc;

use parking_lot::Mutex;

use rollcall_testkit::client::Conn;
use support::{Harness, config, free_port, within};

/// A log sink the test can read back: every line the subscriber writes, as JSON.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The `fields` of every "answered locally" line so far.
    fn local_answers(&self) -> Vec<serde_json::Value> {
        let bytes = self.0.lock().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|line| line["fields"]["message"] == "answered locally")
            .map(|line| line["fields"].clone())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_endpoint_s_503s_are_logged_once_a_second_with_their_tries_and_count() {
    let captured = Captured::default();
    let sink = captured.clone();
    tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || sink.clone())
        .init();

    // Nothing listens at either endpoint: every try is refused, a retry goes to the other one, and with detection off nothing is ejected,
    // so every request ends in the sidecar's own 503 after all its tries.
    let refused = [free_port(), free_port()];
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 0, consecutive5xx: 0, errorRate: {threshold: 0%}}, retries: {attempts: 2}}";
    let h = Harness::start(&config(&refused, policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();

    let mut answered = 0u64;
    let started = tokio::time::Instant::now();
    for _ in 0..20 {
        let reply = conn.get("/").await.unwrap();
        assert_eq!(reply.status.as_u16(), 503, "{}", reply.text());
        answered += 1;
    }
    let burst = started.elapsed();
    let lines = captured.local_answers();
    assert!(
        !lines.is_empty(),
        "the first local answer is logged at once"
    );
    let first = &lines[0];
    assert_eq!(first["pool"], "web");
    assert_eq!(first["status"], 503);
    assert_eq!(first["reason"], "upstream-connect-failure");
    assert_eq!(first["tries"], 2, "a try at each endpoint: {first}");
    assert_eq!(first["suppressed"], 0);
    assert!(
        first["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "the detail says what failed: {first}"
    );
    // One line per started second of the burst at most.
    assert!(
        lines.len() as u64 <= burst.as_secs() + 1,
        "{} lines in {burst:?}: {lines:?}",
        lines.len()
    );

    // Keep answering until a later line arrives: it counts the answers that had none.
    let later = within(async {
        loop {
            let reply = conn.get("/").await.unwrap();
            assert_eq!(reply.status.as_u16(), 503);
            answered += 1;
            let lines = captured.local_answers();
            if lines.len() >= 2 {
                return lines;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    let logged: u64 = later
        .iter()
        .map(|line| 1 + line["suppressed"].as_u64().unwrap())
        .sum();
    assert!(
        later[1]["suppressed"].as_u64().unwrap() > 0,
        "the second line stands for the answers since the first: {later:?}"
    );
    assert!(
        logged <= answered,
        "every line stands for answers that happened: {logged} of {answered}"
    );
}
