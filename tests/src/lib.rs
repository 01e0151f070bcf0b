//! Helpers shared by the end-to-end tests in `tests/`: a run directory per test (its
//! processes' logs stay there when it fails), reading a BackendPool's status, and waiting for
//! the Events the controller records. The processes themselves come from
//! `rollcall_testkit::system`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use rollcall_testkit::{Behavior, TestBackend, system};
use serde_json::Value;

/// How long any one expected thing may take before the test fails (generous: a loaded
/// 2-core machine runs several of these at once).
pub const PATIENCE: Duration = Duration::from_secs(45);

/// A fresh directory for one test's logs and kubeconfig.
pub fn run_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rollcall-e2e-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    eprintln!("{test}: logs in {}", dir.display());
    dir
}

/// Controller flags for tests: a short Lease, so a standby takes over a killed leader within
/// seconds, and a restart grace longer than a sidecar's reconnect.
pub fn controller_flags() -> Vec<String> {
    [
        "--lease-duration",
        "4s",
        "--lease-grace",
        "2s",
        "--restart-grace",
        "20s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The local API server (logs in `dir`) holding the demo's CRD, namespaces, Service `shop/web`
/// and its EndpointSlices for three fresh backends (in zone-a, zone-b and zone-c), then `more`
/// objects (YAML or JSON), all applied as field manager `manager`.
pub async fn demo_api(
    dir: &std::path::Path,
    manager: &str,
    more: &[String],
) -> anyhow::Result<(system::LocalApi, Vec<TestBackend>)> {
    let api = system::LocalApi::start(dir, &[]).await?;
    let mut backends = Vec::new();
    for _ in 0..3 {
        backends.push(TestBackend::spawn(Behavior::ok()).await?);
    }
    let demo = [
        system::CRD_YAML.to_string(),
        system::NAMESPACE_YAML.to_string(),
        system::SERVICE_YAML.to_string(),
        system::slices_yaml(&backends),
    ];
    for yaml in demo.iter().chain(more) {
        api.apply(yaml, manager).await?;
    }
    Ok((api, backends))
}

/// Poll `process`'s log until it contains `needle`; panics with the log after `PATIENCE`.
pub async fn wait_log(process: &rollcall_testkit::system::Process, needle: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let log = process.log_tail(200);
        if log.contains(needle) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never logged {needle:?}; its log:\n{log}",
            process.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The status's ejection entry for `address`.
pub fn ejection<'a>(status: &'a Value, address: &str) -> Option<&'a Value> {
    status["ejections"]
        .as_array()?
        .iter()
        .find(|e| e["address"].as_str() == Some(address))
}

/// `status.endpoints.<field>`.
pub fn count(status: &Value, field: &str) -> u64 {
    status["endpoints"][field].as_u64().unwrap_or(0)
}

/// `status.sidecars.<field>`.
pub fn sidecars(status: &Value, field: &str) -> u64 {
    status["sidecars"][field].as_u64().unwrap_or(0)
}

/// The status of condition `kind` (`"True"`, `"False"`).
pub fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a str> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"].as_str() == Some(kind))?["status"]
        .as_str()
}

/// Events with `reason` about the pool, as `kubectl get events` lists them (core v1).
pub async fn events(
    client: &kube::Client,
    namespace: &str,
    reason: &str,
) -> anyhow::Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let listed = api
        .list(&kube::api::ListParams::default().fields(&format!("reason={reason}")))
        .await?;
    Ok(listed.items)
}

/// Wait for an Event with `reason` whose message satisfies `matches`.
pub async fn wait_event(
    client: &kube::Client,
    namespace: &str,
    reason: &str,
    matches: impl Fn(&str) -> bool,
) -> anyhow::Result<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields(&format!("reason={reason}"));
    let mut stream = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(event))) if matches(event.message.as_deref().unwrap_or("")) => {
                return Ok(event);
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => bail!("no {reason} Event matched within {PATIENCE:?}"),
        }
    }
}
