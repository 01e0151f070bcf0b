//! The three proxies under test: their configs (one place, so the settings that must match do
//! match), their child processes (stopped with SIGTERM, then killed; never left behind) and a
//! way to ask each one whether it considers backend 2 down.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use rollcall_testkit::client;
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::{Instant, timeout};

use crate::config::{Shape, haproxy_cfg, nginx_conf, rollcall_yaml};

/// How long a proxy gets to answer `GET /` with 200.
const UP_WITHIN: Duration = Duration::from_secs(10);

/// The proxies, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rollcall,
    Haproxy,
    Nginx,
}

pub const ALL: [Kind; 3] = [Kind::Rollcall, Kind::Haproxy, Kind::Nginx];

/// Where the binaries are and where configs and logs go.
#[derive(Clone, Debug)]
pub struct Setup {
    pub sidecar: PathBuf,
    /// rollcall's balancer where the others balance by least requests (default: its own).
    pub rollcall_algorithm: Option<&'static str>,
    pub haproxy: PathBuf,
    pub nginx: PathBuf,
    pub dir: PathBuf,
}

/// Where to ask a proxy about its servers.
#[derive(Clone, Copy, Debug)]
pub struct StatusView {
    kind: Kind,
    addr: SocketAddr,
}

/// A running proxy.
pub struct Running {
    pub kind: Kind,
    pub listen: SocketAddr,
    /// Rollcall's admin listener or HAProxy's stats listener; nginx has none.
    status: Option<SocketAddr>,
    child: Child,
    pub log: PathBuf,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Rollcall => "rollcall",
            Self::Haproxy => "haproxy",
            Self::Nginx => "nginx",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A port nobody listens on right now (the proxy binds it a moment later).
pub fn free_port() -> anyhow::Result<SocketAddr> {
    rollcall_testkit::system::free_port().context("finding a free port")
}

// === impl Running ===

impl Running {
    /// Writes `kind`'s config for `backends` set up as `shape` asks, starts it and waits until `GET /` through it
    /// answers 200.
    /// Its log is `<dir>/<label>-<proxy>.log`.
    pub async fn start(
        kind: Kind,
        setup: &Setup,
        backends: &[SocketAddr],
        shape: Shape,
        label: &str,
    ) -> anyhow::Result<Self> {
        let listen = free_port()?;
        let status = free_port()?;
        let dir = &setup.dir;
        let log = dir.join(format!("{label}-{}.log", kind.name()));
        let mut cmd = match kind {
            Kind::Rollcall => {
                let config = dir.join("rollcall.yaml");
                write(&config, &rollcall_yaml(listen, backends, shape))?;
                let mut cmd = Command::new(&setup.sidecar);
                cmd.arg("--config")
                    .arg(&config)
                    .arg("--admin-listen")
                    .arg(status.to_string())
                    .env(
                        "ROLLCALL_LOG",
                        std::env::var("ROLLCALL_LOG").unwrap_or_else(|_| "info".into()),
                    );
                cmd
            }
            Kind::Haproxy => {
                let config = dir.join("haproxy.cfg");
                write(&config, &haproxy_cfg(listen, status, backends, shape))?;
                let mut cmd = Command::new(&setup.haproxy);
                cmd.arg("-db").arg("-f").arg(&config);
                cmd
            }
            Kind::Nginx => {
                let config = dir.join("nginx.conf");
                for sub in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
                    std::fs::create_dir_all(dir.join("tmp").join(sub))?;
                }
                write(&config, &nginx_conf(listen, dir, backends, shape))?;
                let mut cmd = Command::new(&setup.nginx);
                cmd.arg("-p")
                    .arg(dir)
                    .arg("-e")
                    .arg(dir.join("nginx-error.log"))
                    .arg("-c")
                    .arg(&config)
                    .arg("-g")
                    .arg("daemon off;");
                cmd
            }
        };
        let out = std::fs::File::create(&log).with_context(|| format!("creating {log:?}"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", kind.name()))?;
        let mut running = Self {
            kind,
            listen,
            status: (kind != Kind::Nginx).then_some(status),
            child,
            log,
        };
        if let Err(e) = running.wait_up().await {
            running.stop().await;
            return Err(e);
        }
        Ok(running)
    }

    async fn wait_up(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + UP_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited with {status} before answering; the end of {}:\n{}",
                    self.kind.name(),
                    self.log.display(),
                    self.log_tail()
                );
            }
            if let Ok(Ok(reply)) =
                timeout(Duration::from_secs(1), client::get(self.listen, "/")).await
                && reply.status.is_success()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not answer 200 on http://{}/ within {UP_WITHIN:?}; the end of {}:\n{}",
                    self.kind.name(),
                    self.listen,
                    self.log.display(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The proxy's own view of its servers; `None` for nginx (the open-source build has none).
    pub fn view(&self) -> Option<StatusView> {
        self.status.map(|addr| StatusView {
            kind: self.kind,
            addr,
        })
    }

    /// Saves the proxy's own counters next to its log (rollcall `/metrics`, HAProxy stats CSV),
    /// for reading after the run.
    pub async fn save_counters(&self) {
        let (Some(addr), path, ext) = (
            self.status,
            match self.kind {
                Kind::Rollcall => "/metrics",
                _ => "/stats;csv",
            },
            match self.kind {
                Kind::Rollcall => "metrics.txt",
                _ => "stats.csv",
            },
        ) else {
            return;
        };
        if let Ok(Ok(reply)) = timeout(Duration::from_secs(1), client::get(addr, path)).await {
            let file = self.log.with_extension(ext);
            if let Err(e) = std::fs::write(&file, &reply.body) {
                tracing::warn!(error = %e, "writing {}", file.display());
            }
        }
    }

    /// `Some(reason)` once the child has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(format!(
                "{} exited with {status}; see {}",
                self.kind.name(),
                self.log.display()
            )),
            Err(e) => Some(format!("cannot watch {}: {e}", self.kind.name())),
        }
    }

    /// SIGTERM (nginx's master then stops its workers), up to 3 s, then SIGKILL.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            if timeout(Duration::from_secs(3), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        if let Err(e) = self.child.kill().await {
            tracing::warn!(error = %e, "stopping {}", self.kind.name());
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

// === impl StatusView ===

impl StatusView {
    /// Whether the proxy itself says `backend` is out of rotation: rollcall's `/endpoints`
    /// state `Ejected`, HAProxy's stats `DOWN` (or `MAINT`). `None` when it did not answer.
    /// `index` is the backend's zero-based position in the config (HAProxy names it `b<index+1>`).
    pub async fn says_down(self, backend: SocketAddr, index: usize) -> Option<bool> {
        let path = match self.kind {
            Kind::Rollcall => "/endpoints",
            Kind::Haproxy => "/stats;csv",
            Kind::Nginx => return None,
        };
        let reply = timeout(Duration::from_millis(500), client::get(self.addr, path))
            .await
            .ok()?
            .ok()?;
        match self.kind {
            Kind::Rollcall => rollcall_down(&reply.json().ok()?, backend),
            Kind::Haproxy => haproxy_down(&reply.text(), &format!("b{}", index + 1)),
            Kind::Nginx => None,
        }
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `{"pools":[{"name":"bench","endpoints":[{"address","state"}]}]}`.
fn rollcall_down(json: &Value, backend: SocketAddr) -> Option<bool> {
    let address = backend.to_string();
    let endpoint = json
        .get("pools")?
        .as_array()?
        .iter()
        .flat_map(|p| p.get("endpoints").and_then(Value::as_array))
        .flatten()
        .find(|e| e.get("address").and_then(Value::as_str) == Some(address.as_str()))?;
    let state = endpoint.get("state")?.as_str()?;
    Some(state == "Ejected")
}

/// HAProxy's CSV (`# pxname,svname,...,status,...`): the row of server `name` (HAProxy 2.6
/// leaves the `addr` column empty, so the name the config gave it is the key).
fn haproxy_down(csv: &str, name: &str) -> Option<bool> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next()?.trim_start_matches("# ").split(',').collect();
    let col = |c: &str| header.iter().position(|h| *h == c);
    let (svname, status) = (col("svname")?, col("status")?);
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|row| row.get(svname) == Some(&name))
        .and_then(|row| {
            row.get(status)
                .map(|s| s.starts_with("DOWN") || *s == "MAINT")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_status_views() {
        let b: SocketAddr = "127.0.0.1:9002".parse().expect("addr");
        let json = serde_json::json!({"pools": [{"name": "bench", "endpoints": [
            {"address": "127.0.0.1:9001", "state": "Healthy"},
            {"address": "127.0.0.1:9002", "state": "Ejected"}]}]});
        assert_eq!(rollcall_down(&json, b), Some(true));
        let csv = "# pxname,svname,status,addr\nbackends,b1,UP,\nbackends,b2,DOWN 1/2,\n";
        assert_eq!(haproxy_down(csv, "b2"), Some(true));
        assert_eq!(haproxy_down(csv, "b1"), Some(false));
        assert_eq!(haproxy_down(csv, "b9"), None);
    }
}
