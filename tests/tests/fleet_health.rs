//! Fleet health end to end: six real sidecars on the local API server, the real controller,
//! three real backends. Each endpoint is probed by its three checkers only; a failing health
//! check is ejected at every sidecar through the controller and readmitted the same way;
//! killed checkers are replaced; with the controller gone every sidecar probes for itself and
//! routing never stops. Every wait is for an event (a status, a sidecar's view or metrics),
//! bounded by `PATIENCE`.

use std::time::Duration;

use rollcall_e2e::{PATIENCE, controller_flags, ejection, run_dir};
use rollcall_testkit::client::{self, Conn};
use rollcall_testkit::system::{Sidecar, Stack, StackOptions};
use serde_json::Value;

const SIDECARS: usize = 6;

/// The demo pool with 1 s HTTP checks, three checkers per endpoint, and room to eject one of
/// three endpoints.
const POOL: &str = r#"apiVersion: rollcall.dev/v1alpha1
kind: BackendPool
metadata:
  name: web
  namespace: shop
spec:
  service:
    name: web
    port: http
  healthCheck:
    type: HTTP
    path: /healthz
    interval: 1s
    timeout: 500ms
    checkers: 3
  outlierDetection:
    baseEjectionTime: 5s
    maxEjectionPercent: 50
"#;

fn fleet(status: &Value, field: &str) -> Option<u64> {
    status["fleetHealth"][field].as_u64()
}

/// The endpoints' raw entries in a sidecar's `/endpoints`.
async fn endpoints(sidecar: &Sidecar) -> Vec<Value> {
    let Ok(Ok(reply)) = tokio::time::timeout(
        Duration::from_millis(500),
        client::get(sidecar.admin, "/endpoints"),
    )
    .await
    else {
        return Vec::new();
    };
    let json: Value = reply.json().unwrap_or_default();
    json["pools"][0]["endpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// How many of `sidecars` probe `address` themselves (they have a verdict of their own on it).
async fn probing(sidecars: &[&Sidecar], address: &str) -> usize {
    let mut n = 0;
    for s in sidecars {
        if endpoints(s)
            .await
            .iter()
            .any(|e| e["address"].as_str() == Some(address) && e.get("probeVerdict").is_some())
        {
            n += 1;
        }
    }
    n
}

/// A sidecar's `rollcall_fleet_probes_total` for `role`.
async fn probes_by_role(sidecar: &Sidecar, role: &str) -> u64 {
    let text = sidecar.metrics().await.unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("rollcall_fleet_probes_total{") && l.contains(&format!("role=\"{role}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Wait until `done` holds, polling every 100 ms, for at most `PATIENCE`.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let waited = tokio::time::timeout(PATIENCE, async {
        while !done().await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_sidecars_share_the_health_checks_and_every_one_acts_on_the_fleets_verdict() {
    let dir = run_dir("fleet-health");
    let mut stack = Stack::start(
        &dir,
        StackOptions {
            sidecars: SIDECARS,
            pool_yaml: Some(POOL.into()),
            controller_flags: controller_flags(),
            ..StackOptions::default()
        },
    )
    .await
    .expect("the system starts");
    stack
        .wait_status(PATIENCE, "6 sidecars, every endpoint checked by 3", |s| {
            fleet(s, "sidecars") == Some(SIDECARS as u64)
                && fleet(s, "checkers") == Some(3)
                && fleet(s, "fullyChecked") == Some(3)
        })
        .await
        .unwrap();

    // Each endpoint is probed by exactly its three checkers, not by all six.
    let all: Vec<&Sidecar> = stack.sidecars.iter().collect();
    for i in 0..3 {
        let address = stack.backend_address(i);
        until(&format!("{address} probed by 3 sidecars"), || {
            let (all, address) = (&all, &address);
            async move { probing(all, address).await == 3 }
        })
        .await;
    }
    // Measured at the backend: 12 health checks take at least 12/4.5 s at three checkers a
    // second (everyone probing, six a second, would take 2 s).
    let backend = &stack.backends[0];
    backend.reset_counters();
    let started = tokio::time::Instant::now();
    backend.wait_for_health_checks(12).await;
    let rate = 12.0 / started.elapsed().as_secs_f64();
    assert!(
        rate < 4.5,
        "{rate:.1} health checks a second at one backend"
    );

    // b1's health check fails (it still answers traffic, but no sidecar sends any): the
    // fleet's verdict ejects it at all six sidecars.
    let victim = stack.backend_address(0);
    backend.set_healthz(false);
    stack
        .wait_status(PATIENCE, "b1 ejected by 6 of 6 sidecars", |s| {
            ejection(s, &victim).is_some_and(|e| {
                e["ejectedBy"].as_u64() == Some(SIDECARS as u64)
                    && e["of"].as_u64() == Some(SIDECARS as u64)
            })
        })
        .await
        .unwrap();
    let status = stack
        .wait_status(PATIENCE, "the fleet fails b1", |s| {
            s["fleetHealth"]["failing"]
                .as_array()
                .is_some_and(|f| f.iter().any(|e| e["address"].as_str() == Some(&victim)))
        })
        .await
        .unwrap();
    let failing = &status["fleetHealth"]["failing"][0];
    assert!(failing["failing"].as_u64().unwrap_or(0) >= 2, "{failing}");
    backend.set_healthz(true);
    stack
        .wait_status(PATIENCE, "b1 readmitted everywhere", |s| {
            ejection(s, &victim).is_none() && fleet(s, "fullyChecked") == Some(3)
        })
        .await
        .unwrap();

    // Two sidecars die: their endpoints get new checkers among the four left.
    for sidecar in &mut stack.sidecars[..2] {
        sidecar.process.kill().await;
    }
    stack
        .wait_status(PATIENCE, "4 sidecars, every endpoint checked by 3", |s| {
            fleet(s, "sidecars") == Some(4) && fleet(s, "fullyChecked") == Some(3)
        })
        .await
        .unwrap();
    let left: Vec<&Sidecar> = stack.sidecars[2..].iter().collect();
    for i in 0..3 {
        let address = stack.backend_address(i);
        until(&format!("{address} probed by 3 of the 4 left"), || {
            let (left, address) = (&left, &address);
            async move { probing(left, address).await == 3 }
        })
        .await;
    }

    // The controller dies: every sidecar left probes for itself, and routes all along.
    for controller in &mut stack.controllers {
        controller.process.kill().await;
    }
    for sidecar in &left {
        until("every sidecar falls back to probing", || async move {
            probes_by_role(sidecar, "fallback").await > 0
        })
        .await;
    }
    for i in 0..3 {
        let address = stack.backend_address(i);
        until(&format!("{address} probed by all 4"), || {
            let (left, address) = (&left, &address);
            async move { probing(left, address).await == 4 }
        })
        .await;
    }
    for sidecar in &left {
        let mut conn = Conn::http1(sidecar.listen).await.unwrap();
        for _ in 0..10 {
            let reply = conn.get("/").await.unwrap();
            assert!(reply.status.is_success(), "{}", reply.status);
        }
    }
}
