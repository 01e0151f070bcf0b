//! `rollcall-sidecar` as a child process — fed by a config file (the standalone demo) or by the
//! controller (`--controller`, `--pool`) — and a reader for its admin `/endpoints` view.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use super::free_port;
use super::process::{Process, binary, wait_ready};
use crate::client;

/// How long a sidecar gets to answer `/ready`.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// A running sidecar.
pub struct Sidecar {
    pub process: Process,
    /// Where the application sends (the one pool's listener).
    pub listen: SocketAddr,
    pub admin: SocketAddr,
}

/// One endpoint as `/endpoints` reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointView {
    pub address: String,
    pub state: String,
    pub reason: Option<String>,
    pub since_seconds: Option<f64>,
}

/// A pool as `/endpoints` reports it.
#[derive(Clone, Debug, Default)]
pub struct PoolView {
    pub panic: bool,
    pub endpoints: Vec<EndpointView>,
}

impl PoolView {
    pub fn state_of(&self, address: &str) -> Option<&str> {
        self.endpoints
            .iter()
            .find(|e| e.address == address)
            .map(|e| e.state.as_str())
    }
}

/// The sidecars log every failed try and every client that gave up (debug lines of the
/// request path), so a request a test saw fail can be found in their logs.
fn log_env(command: &mut Command) {
    command.env(
        "ROLLCALL_LOG",
        std::env::var("ROLLCALL_LOG")
            .unwrap_or_else(|_| "info,rollcall_dataplane::proxy::forward=debug".into()),
    );
}

// === impl Sidecar ===

impl Sidecar {
    /// Start with a config file (one pool listening on `listen`) and wait for `/ready`.
    pub async fn with_config(
        config: &Path,
        listen: SocketAddr,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let admin = free_port()?;
        let mut command = Command::new(binary("rollcall-sidecar")?);
        command
            .arg("--config")
            .arg(config)
            .args(["--admin-listen", &admin.to_string()]);
        log_env(&mut command);
        Self::ready(Process::spawn("sidecar", command, dir)?, listen, admin).await
    }

    /// Start following `controller` for `pool` (`namespace/name`) as pod `pod`, presenting the
    /// token in `token_file` (`None`: no token), and wait for `/ready` (every pool listening;
    /// the roster may still be on its way).
    pub async fn controlled(
        controller: &str,
        pool: &str,
        pod: &str,
        token_file: Option<&Path>,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        Self::controlled_with(controller, pool, pod, token_file, &[], dir).await
    }

    /// `controlled`, with more command-line arguments (e.g. `--controller-ca`).
    pub async fn controlled_with(
        controller: &str,
        pool: &str,
        pod: &str,
        token_file: Option<&Path>,
        args: &[String],
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let (listen, admin) = (free_port()?, free_port()?);
        let namespace = pool.split('/').next().unwrap_or("default");
        let mut command = Command::new(binary("rollcall-sidecar")?);
        command
            .args(["--controller", controller])
            .args(["--pool", &format!("{pool}={listen}")])
            .args(["--admin-listen", &admin.to_string()])
            .args(["--report-heartbeat", "2s"])
            .env("POD_NAME", pod)
            .env("POD_NAMESPACE", namespace);
        if let Some(token_file) = token_file {
            command.arg("--token-file").arg(token_file);
        }
        command.args(args);
        log_env(&mut command);
        Self::ready(Process::spawn(pod, command, dir)?, listen, admin).await
    }

    async fn ready(
        mut process: Process,
        listen: SocketAddr,
        admin: SocketAddr,
    ) -> anyhow::Result<Self> {
        wait_ready(&mut process, READY_WITHIN, "ready", || async move {
            matches!(client::get(admin, "/ready").await, Ok(reply) if reply.status.is_success())
        })
        .await?;
        Ok(Self {
            process,
            listen,
            admin,
        })
    }

    /// The pool `name` (`shop/web` in controller mode) as the admin endpoint reports it;
    /// `None` when it does not answer.
    pub async fn pool(&self, name: &str) -> Option<PoolView> {
        let reply = tokio::time::timeout(
            Duration::from_millis(500),
            client::get(self.admin, "/endpoints"),
        )
        .await
        .ok()?
        .ok()?;
        let json: Value = reply.json().ok()?;
        parse_pool(&json, name)
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> Option<String> {
        let reply = tokio::time::timeout(
            Duration::from_millis(500),
            client::get(self.admin, "/metrics"),
        )
        .await
        .ok()?
        .ok()?;
        Some(reply.text())
    }
}

/// Reads `{"pools":[{"name", "panic", "endpoints":[{"address","state","reason","sinceSeconds"}]}]}`
/// loosely: unknown fields are ignored, missing optional ones are `None`.
pub fn parse_pool(json: &Value, name: &str) -> Option<PoolView> {
    let pool = json
        .get("pools")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(name))?;
    let endpoints = pool
        .get("endpoints")?
        .as_array()?
        .iter()
        .filter_map(|e| {
            Some(EndpointView {
                address: e.get("address")?.as_str()?.to_owned(),
                state: e.get("state")?.as_str()?.to_owned(),
                reason: e.get("reason").and_then(Value::as_str).map(str::to_owned),
                since_seconds: e.get("sinceSeconds").and_then(Value::as_f64),
            })
        })
        .collect();
    Some(PoolView {
        panic: pool.get("panic").and_then(Value::as_bool).unwrap_or(false),
        endpoints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_admin_contract_and_ignores_extra_fields() {
        let json = serde_json::json!({"pools": [
            {"name": "other", "endpoints": []},
            {"name": "demo", "panic": true, "endpoints": [
                {"address": "127.0.0.1:9001", "state": "Healthy", "reason": "ProbeSucceeded",
                 "sinceSeconds": 1.5, "inFlight": 3},
                {"address": "127.0.0.1:9002", "state": "Ejected"}
            ]}
        ]});
        let pool = parse_pool(&json, "demo").expect("pool");
        assert!(pool.panic);
        assert_eq!(pool.endpoints.len(), 2);
        assert_eq!(pool.endpoints[0].since_seconds, Some(1.5));
        assert_eq!(pool.endpoints[1].reason, None);
        assert_eq!(pool.state_of("127.0.0.1:9002"), Some("Ejected"));
        assert!(parse_pool(&json, "missing").is_none());
    }
}
