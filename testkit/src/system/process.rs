//! Child processes of the whole-system runs: the real binaries, each logging to its own file,
//! killed when their handle drops (so a failed test or Ctrl-C never leaves one behind), stopped
//! gracefully with SIGTERM when asked, and located next to the running executable.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// One running binary.
pub struct Process {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

/// The directory holding the workspace's binaries: the running executable's own (the demo),
/// or the profile directory above `deps/` (a test).
pub fn binary_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the running executable")?;
    let dir = exe
        .parent()
        .context("the executable has no directory")?
        .to_path_buf();
    Ok(if dir.ends_with("deps") {
        dir.parent().map(Path::to_path_buf).unwrap_or(dir)
    } else {
        dir
    })
}

/// The workspace binary `name`. `cargo test --workspace` builds every binary before it runs
/// a test (each crate with binaries has integration tests); running one crate's tests alone
/// needs `cargo build --bins` first, and this says so.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let path = binary_dir()?.join(name);
    if !path.is_file() {
        bail!(
            "{} not found; build the binaries first: cargo build --bins",
            path.display()
        );
    }
    Ok(path)
}

// === impl Process ===

impl Process {
    /// Start `command` as `name`, stdout and stderr into `dir/<name>.log`.
    pub fn spawn(name: &str, mut command: Command, dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let log = dir.join(format!("{name}.log"));
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Self {
            name: name.to_string(),
            child,
            log,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `Some(reason)` once the child has exited, with the end of its log.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(format!(
                "{} exited with {status}; the end of its log ({}):\n{}",
                self.name,
                self.log.display(),
                self.log_tail(30)
            )),
            Err(e) => Some(format!("cannot watch {}: {e}", self.name)),
        }
    }

    /// Send SIGTERM and return at once (the process shuts down in its own time).
    pub fn signal_term(&self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
    }

    /// Wait up to `within` for the process to exit by itself; its exit status, if it did.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(within, self.child.wait())
            .await
            .ok()?
            .ok()
    }

    /// SIGTERM, then up to `grace` for it to exit, then SIGKILL. Returns whether it exited on
    /// its own.
    pub async fn terminate(&mut self, grace: Duration) -> bool {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
                return true;
            }
        }
        self.kill().await;
        false
    }

    /// SIGKILL and wait: the process gets no chance to clean up (a crash).
    pub async fn kill(&mut self) {
        if let Err(e) = self.child.kill().await {
            tracing::debug!(error = %e, "killing {}", self.name);
        }
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Poll `ready` every 50 ms until it holds, the process exits, or `within` passes.
pub async fn wait_ready<F, Fut>(
    process: &mut Process,
    within: Duration,
    what: &str,
    mut ready: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(reason) = process.exited() {
            bail!("{reason}");
        }
        if ready().await {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "{} was not {what} within {within:?}; the end of its log ({}):\n{}",
                process.name,
                process.log.display(),
                process.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
