//! `rollcall-controller run` as a child process: pointed at a kubeconfig, with its own gRPC and
//! metrics ports and Lease identity, and ways to ask whether it is ready (a synced leader).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use super::free_port;
use super::process::{Process, binary, wait_ready};
use crate::client;

/// A running controller replica.
pub struct Controller {
    pub process: Process,
    pub identity: String,
    pub grpc: SocketAddr,
    pub metrics: SocketAddr,
    kubeconfig: std::path::PathBuf,
    dir: std::path::PathBuf,
    flags: Vec<String>,
}

impl Controller {
    /// Start a replica called `identity` against `kubeconfig`; it competes for the Lease in
    /// `rollcall-system`, which must exist.
    pub async fn start(
        kubeconfig: &Path,
        identity: &str,
        dir: &Path,
        flags: &[String],
    ) -> anyhow::Result<Self> {
        Self::start_on(kubeconfig, identity, dir, free_port()?, free_port()?, flags).await
    }

    /// Start on given ports (a restart keeps its address, as a Service would).
    pub async fn start_on(
        kubeconfig: &Path,
        identity: &str,
        dir: &Path,
        grpc: SocketAddr,
        metrics: SocketAddr,
        flags: &[String],
    ) -> anyhow::Result<Self> {
        let mut command = Command::new(controller_binary()?);
        command
            .arg("run")
            .args(["--grpc-listen", &grpc.to_string()])
            .args(["--metrics-listen", &metrics.to_string()])
            .args([
                "--identity",
                identity,
                "--lease-namespace",
                "rollcall-system",
            ])
            .args(flags)
            .env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            );
        let process = Process::spawn(identity, command, dir)?;
        Ok(Self {
            process,
            identity: identity.to_string(),
            grpc,
            metrics,
            kubeconfig: kubeconfig.to_path_buf(),
            dir: dir.to_path_buf(),
            flags: flags.to_vec(),
        })
    }

    /// Kill the process (SIGKILL: no clean-up, a crash) and start it again on the same ports,
    /// as a restarted pod behind the same Service.
    pub async fn crash_and_restart(&mut self) -> anyhow::Result<()> {
        self.process.kill().await;
        let restarted = Self::start_on(
            &self.kubeconfig.clone(),
            &self.identity.clone(),
            &self.dir.clone(),
            self.grpc,
            self.metrics,
            &self.flags.clone(),
        )
        .await?;
        *self = restarted;
        Ok(())
    }

    /// This replica behind the controller's Service.
    pub fn replica(&self) -> super::Replica {
        super::Replica {
            serve: self.grpc,
            ready: self.metrics,
        }
    }

    /// `http://127.0.0.1:PORT`, what sidecars are pointed at.
    pub fn url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// Whether `/readyz` answers 200 (leading, caches synced).
    pub async fn is_ready(&self) -> bool {
        matches!(
            tokio::time::timeout(Duration::from_millis(500), client::get(self.metrics, "/readyz")).await,
            Ok(Ok(reply)) if reply.status.is_success()
        )
    }

    /// Wait until this replica leads and serves.
    pub async fn wait_ready(&mut self, within: Duration) -> anyhow::Result<()> {
        let metrics = self.metrics;
        wait_ready(&mut self.process, within, "ready (leading, synced)", || async move {
            matches!(
                tokio::time::timeout(Duration::from_millis(500), client::get(metrics, "/readyz")).await,
                Ok(Ok(reply)) if reply.status.is_success()
            )
        })
        .await
    }
}

/// Which controller binary to run: `$ROLLCALL_CONTROLLER` when set (the fleet benchmark runs
/// the controller as shipped, built with its own profile, next to a simulation built with
/// `--release`), else the workspace binary next to this one.
fn controller_binary() -> anyhow::Result<std::path::PathBuf> {
    match std::env::var_os("ROLLCALL_CONTROLLER") {
        Some(path) if !path.is_empty() => {
            let path = std::path::PathBuf::from(path);
            anyhow::ensure!(
                path.is_file(),
                "ROLLCALL_CONTROLLER={} is not a file",
                path.display()
            );
            Ok(path)
        }
        _ => binary("rollcall-controller"),
    }
}
