//! The sidecar under demonstration: its config file, its child process (killed when this handle
//! drops, so ctrl-c never leaves it behind) and a reader for its admin `/endpoints` view.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use rollcall_testkit::client;
use serde_json::Value;
use tokio::process::{Child, Command};

/// How long the sidecar gets to answer `/ready`.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// A running `rollcall-sidecar`.
pub struct Sidecar {
    child: Child,
    pub listen: SocketAddr,
    pub admin: SocketAddr,
    pub log: PathBuf,
}

/// One endpoint as `/endpoints` reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointView {
    pub address: String,
    pub state: String,
    pub reason: Option<String>,
    pub since_seconds: Option<f64>,
}

/// The demo pool as `/endpoints` reports it.
#[derive(Clone, Debug, Default)]
pub struct PoolView {
    pub panic: bool,
    pub endpoints: Vec<EndpointView>,
}

/// The binary next to this one, or a message saying how to build it.
pub fn find_binary(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(path) => path,
        None => std::env::current_exe()?.with_file_name("rollcall-sidecar"),
    };
    if !path.is_file() {
        bail!(
            "{} not found; build it first: cargo build --release --bins",
            path.display()
        );
    }
    Ok(path)
}

/// A port nobody listens on right now (the sidecar binds it a moment later).
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("finding a free port")?;
    Ok(probe.local_addr()?)
}

/// The sidecar config for one pool over `backends`: HTTP probes every 500ms and a 5s base
/// ejection, so the demo shows detection and re-admission within seconds.
pub fn config_yaml(listen: SocketAddr, backends: &[SocketAddr]) -> String {
    let mut yaml = format!("pools:\n- name: demo\n  listen: \"{listen}\"\n  endpoints:\n");
    for addr in backends {
        yaml.push_str(&format!(
            "  - {{address: \"{addr}\", zone: a, weight: 1, terminating: false}}\n"
        ));
    }
    yaml.push_str(concat!(
        "  policy:\n",
        "    healthCheck: {type: HTTP, path: /healthz, interval: 500ms, timeout: 250ms}\n",
        "    outlierDetection: {baseEjectionTime: 5s}\n",
    ));
    yaml
}

// === impl Sidecar ===

impl Sidecar {
    /// Starts the binary with `config`, logging to a file in `dir`, and waits for `/ready`.
    pub async fn start(
        binary: &Path,
        config: &Path,
        listen: SocketAddr,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let admin = free_port()?;
        let log = dir.join("sidecar.log");
        let out = std::fs::File::create(&log).with_context(|| format!("creating {log:?}"))?;
        let child = Command::new(binary)
            .arg("--config")
            .arg(config)
            .arg("--admin-listen")
            .arg(admin.to_string())
            .env(
                "ROLLCALL_LOG",
                std::env::var("ROLLCALL_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut sidecar = Self {
            child,
            listen,
            admin,
            log,
        };
        sidecar.wait_ready().await?;
        Ok(sidecar)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "rollcall-sidecar exited with {status} before it was ready; its log:\n{}",
                    self.log_tail()
                );
            }
            if let Ok(reply) = client::get(self.admin, "/ready").await
                && reply.status.is_success()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "rollcall-sidecar did not answer 200 on http://{}/ready within {READY_WITHIN:?}; its log:\n{}",
                    self.admin,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The pool `name` as the admin endpoint reports it; `None` when it does not answer.
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

    /// `Some(reason)` once the child has exited, with the tail of its log.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(format!(
                "rollcall-sidecar exited with {status}; the end of its log ({}):\n{}",
                self.log.display(),
                self.log_tail()
            )),
            Err(e) => Some(format!("cannot watch rollcall-sidecar: {e}")),
        }
    }

    /// Stops the child and waits for it.
    pub async fn stop(mut self) {
        if let Err(e) = self.child.kill().await {
            tracing::warn!(error = %e, "stopping rollcall-sidecar");
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
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
        assert!(parse_pool(&json, "missing").is_none());
    }

    #[test]
    fn config_names_every_backend() {
        let backends: Vec<SocketAddr> = ["127.0.0.1:1", "127.0.0.1:2"]
            .iter()
            .map(|a| a.parse().expect("addr"))
            .collect();
        let yaml = config_yaml("127.0.0.1:3".parse().expect("addr"), &backends);
        assert!(yaml.contains("listen: \"127.0.0.1:3\""));
        assert_eq!(yaml.matches("zone: a").count(), 2);
    }
}
