//! SIGTERM the way Kubernetes sends it, to the real binary under steady load with slow requests
//! in flight: `/ready` turns not-ready at once while traffic is still served for the pre-stop
//! window, then the listeners stop, every request already in flight is answered within the
//! grace period, and the process exits 0.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;
use parking_lot::Mutex;
use rollcall_testkit::client::{self, Conn};
use rollcall_testkit::{Behavior, TestBackend};
use tokio::process::Command;
use tokio::time::Instant;

const DELAY: Duration = Duration::from_secs(1);
const GRACE: Duration = Duration::from_secs(5);

fn free_port() -> SocketAddr {
    rollcall_testkit::system::free_port().expect("a free port")
}

async fn wait_until(what: &str, check: impl AsyncFn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "waited too long for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_turns_not_ready_serves_through_the_window_answers_everything_and_exits_0() {
    let fast = TestBackend::spawn(Behavior::slow(Duration::from_millis(20)))
        .await
        .unwrap();
    let slow = TestBackend::spawn(Behavior::slow(Duration::from_secs(2)))
        .await
        .unwrap();
    let (fast_listen, slow_listen, admin) = (free_port(), free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sidecar.yaml");
    let policy =
        "{healthCheck: {type: None}, retries: {perTryTimeout: 10s}, timeouts: {request: 20s}}";
    std::fs::write(
        &config,
        format!(
            "pools:\n- name: fast\n  listen: {fast_listen}\n  endpoints: [{{address: \"{}\"}}]\n  policy: {policy}\n- name: slow\n  listen: {slow_listen}\n  endpoints: [{{address: \"{}\"}}]\n  policy: {policy}\n",
            fast.addr(),
            slow.addr()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rollcall-sidecar"))
        .arg("--config")
        .arg(&config)
        .args(["--admin-listen", &admin.to_string()])
        .args(["--shutdown-delay", "1s", "--shutdown-grace", "5s"])
        .env("ROLLCALL_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_until(
        "/ready",
        async || matches!(client::get(admin, "/ready").await, Ok(r) if r.status == StatusCode::OK),
    )
    .await;

    // Steady load: keep-alive clients that leave when told `connection: close`.
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let last_ok = Arc::new(Mutex::new(None::<Instant>));
    let failures = Arc::new(Mutex::new(Vec::<(Instant, String)>::new()));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (stop, served, last_ok, failures) = (
            stop.clone(),
            served.clone(),
            last_ok.clone(),
            failures.clone(),
        );
        workers.push(tokio::spawn(async move {
            let Ok(mut conn) = Conn::http1(fast_listen).await else {
                return;
            };
            while !stop.load(Ordering::Relaxed) {
                match conn.get("/").await {
                    Ok(reply) if reply.status == StatusCode::OK => {
                        served.fetch_add(1, Ordering::Relaxed);
                        *last_ok.lock() = Some(Instant::now());
                        if reply
                            .headers
                            .get("connection")
                            .is_some_and(|v| v == "close")
                        {
                            return;
                        }
                    }
                    Ok(reply) => failures
                        .lock()
                        .push((Instant::now(), format!("{} {}", reply.status, reply.text()))),
                    Err(error) => {
                        failures.lock().push((Instant::now(), error.to_string()));
                        return;
                    }
                }
            }
        }));
    }
    wait_until("steady load", async || served.load(Ordering::Relaxed) >= 20).await;
    let mut slow_requests = Vec::new();
    for _ in 0..3 {
        slow_requests.push(tokio::spawn(client::get(slow_listen, "/")));
    }
    wait_until("slow requests in flight", async || slow.requests() >= 3).await;

    let pid = child.id().unwrap();
    let signalled = Instant::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_until("/ready to turn not-ready", async || {
        matches!(client::get(admin, "/ready").await, Ok(r) if r.status == StatusCode::SERVICE_UNAVAILABLE)
    })
    .await;
    let not_ready = Instant::now();
    assert!(
        not_ready - signalled < DELAY,
        "/ready flipped {:?} after SIGTERM",
        not_ready - signalled
    );
    // A slow request started inside the window is in flight when the listeners stop.
    let late = tokio::spawn(client::get(slow_listen, "/"));
    wait_until("the late slow request in flight", async || {
        slow.requests() >= 4
    })
    .await;

    let status = tokio::time::timeout(DELAY + GRACE + Duration::from_secs(3), child.wait())
        .await
        .expect("the sidecar exited within the pre-stop window and the grace")
        .unwrap();
    let exited = Instant::now();
    stop.store(true, Ordering::Relaxed);
    assert!(status.success(), "exit status {status:?}");
    assert!(
        exited - signalled >= DELAY,
        "it kept serving for the pre-stop window"
    );
    let last_ok = last_ok.lock().expect("load was served");
    assert!(
        last_ok > not_ready,
        "traffic was still served after /ready turned not-ready"
    );
    for request in slow_requests.into_iter().chain([late]) {
        let reply = request.await.unwrap().expect("in-flight request answered");
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
    for worker in workers {
        worker.await.unwrap();
    }
    // Only a keep-alive connection closed while idle, after the window, may end a client
    // without an answer (it can retry: nothing was processed); nothing else may fail.
    let window_end = signalled + DELAY;
    let failures = failures.lock();
    for (at, what) in failures.iter() {
        assert!(
            *at >= window_end && (what.contains("closed") || what.contains("canceled")),
            "a client failed at +{:?}: {what}",
            *at - signalled
        );
    }
}
