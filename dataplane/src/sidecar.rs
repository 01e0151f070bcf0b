//! Starting and stopping the whole sidecar: load the config (refusing to start on a bad one),
//! bind the admin listener, start the pools, then follow config changes — from a file
//! (`start`) or from the controller's roster stream (`start_controlled`). `main.rs` is a thin
//! shell over these, and integration tests call them directly.
//!
//! Stopping is `terminate` on SIGTERM, the way a Kubernetes pod should leave (`drain::shutdown`
//! has the plan): `/ready` turns not-ready at once, traffic is served as usual for the pre-stop
//! window, then every listener stops accepting at the same moment and tells its clients
//! (`Connection: close`, GOAWAY), the requests in flight get the grace period, and every pool
//! closes its connections.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::access_log::{AccessLog, AccessLogConfig};
use crate::admin::{self, AdminState, Readiness};
use crate::config::{self, SidecarConfig};
use crate::drain::ShutdownPlan;
use crate::metrics::Metrics;
use crate::pool::Tuning;
use crate::roster::{self, RosterOptions};
use crate::runtime::Runtime;

/// How the sidecar is started.
#[derive(Clone, Debug)]
pub struct Options {
    pub config: PathBuf,
    pub admin_listen: SocketAddr,
    /// How often the config file is re-read (it is also re-read on SIGHUP).
    pub reload_interval: Duration,
}

/// How the sidecar is started when the controller supplies the rosters.
#[derive(Clone, Debug)]
pub struct ControlledOptions {
    pub admin_listen: SocketAddr,
    pub roster: RosterOptions,
}

/// What both modes share beyond where they listen: the request path's knobs, the exit plan
/// and the access log.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub tuning: Tuning,
    pub shutdown: ShutdownPlan,
    /// Opened at start (`tuning.access_log` is then set from it); `None`: off.
    pub access_log: Option<AccessLogConfig>,
}

/// A running sidecar.
pub struct Sidecar {
    pub admin_addr: SocketAddr,
    pub runtime: Arc<Runtime>,
    pub metrics: Arc<Metrics>,
    admin: Arc<AdminState>,
    shutdown: ShutdownPlan,
    tasks: Vec<JoinHandle<()>>,
    /// Flushed at the end of a shutdown.
    access_log: Option<Arc<AccessLog>>,
}

/// How long a stopping sidecar waits for the access log lines already queued to be written.
const ACCESS_LOG_FLUSH: Duration = Duration::from_secs(2);

/// Why the sidecar could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("cannot listen for admin requests on {addr}: {source}")]
    Admin {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Pools(#[source] std::io::Error),
    /// The access log could not be opened (the message names the file).
    #[error("{0}")]
    AccessLog(std::io::Error),
    #[error(transparent)]
    Roster(#[from] roster::OptionsError),
    #[error("cannot set up metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// Start everything with the default run options and return once every pool listens.
pub async fn start(options: Options) -> Result<Sidecar, StartError> {
    start_with(options, RunOptions::default()).await
}

/// Start everything and return once every pool listens.
pub async fn start_with(options: Options, run: RunOptions) -> Result<Sidecar, StartError> {
    // Looked at before the read, so a change during it is seen by the watcher.
    let looked_at = std::time::SystemTime::now();
    let version = config::watch::version_of(&options.config).ok();
    let (initial, loaded) = SidecarConfig::load_bytes(&options.config)?;
    let mut sidecar = Sidecar::boot(options.admin_listen, &initial, run).await?;
    // The running config is not kept: the pools hold what they need of it, and the watcher
    // compares digests. A channel of one: a reload waits while the last one is applied.
    drop(initial);
    let (tx, mut rx) = mpsc::channel(1);
    sidecar.tasks.push(config::watch::spawn(
        options.config.clone(),
        loaded,
        version,
        looked_at,
        options.reload_interval,
        tx,
        Arc::clone(&sidecar.metrics),
    ));
    let follower = Arc::clone(&sidecar.runtime);
    sidecar.tasks.push(tokio::spawn(async move {
        while let Some(config) = rx.recv().await {
            if let Err(error) = follower.apply(&config).await {
                tracing::error!(%error, "config applied only in part");
            }
        }
    }));
    tracing::info!(admin = %sidecar.admin_addr, config = %options.config.display(), "sidecar started");
    Ok(sidecar)
}

/// Start with the pools' rosters coming from the controller: every pool listens at once
/// (answering 503 `no-endpoints` until its first roster), then follows the `Watch` stream and
/// reports health on `Report`.
pub async fn start_controlled(options: ControlledOptions) -> Result<Sidecar, StartError> {
    start_controlled_with(options, RunOptions::default()).await
}

/// `start_controlled` with chosen run options.
pub async fn start_controlled_with(
    options: ControlledOptions,
    run: RunOptions,
) -> Result<Sidecar, StartError> {
    let channel = options.roster.channel()?;
    let mut sidecar =
        Sidecar::boot(options.admin_listen, &options.roster.initial_config(), run).await?;
    let roster = roster::spawn(&options.roster, channel, Arc::clone(&sidecar.runtime));
    sidecar.tasks.extend(roster.tasks);
    tracing::info!(admin = %sidecar.admin_addr, controller = %options.roster.controller, "sidecar started");
    Ok(sidecar)
}

impl Sidecar {
    /// What both modes share: metrics, runtime, admin listener, and the first configuration.
    async fn boot(
        admin_listen: SocketAddr,
        initial: &SidecarConfig,
        run: RunOptions,
    ) -> Result<Self, StartError> {
        let metrics = Arc::new(Metrics::new()?);
        let mut tuning = run.tuning;
        let access_log = match &run.access_log {
            Some(config) => Some(
                AccessLog::open(config, &metrics.access_log_dropped)
                    .map_err(StartError::AccessLog)?,
            ),
            None => None,
        };
        tuning.access_log = access_log.clone();
        let runtime = Arc::new(Runtime::with_tuning(Arc::clone(&metrics), tuning));
        let admin_error = |source| StartError::Admin {
            addr: admin_listen,
            source,
        };
        let admin_listener = admin::bind(admin_listen).await.map_err(admin_error)?;
        let admin_addr = admin_listener.local_addr().map_err(admin_error)?;
        let admin = Arc::new(AdminState {
            runtime: Arc::clone(&runtime),
            metrics: Arc::clone(&metrics),
            readiness: Readiness::default(),
        });
        let tasks = vec![tokio::spawn(admin::serve(
            admin_listener,
            Arc::clone(&admin),
        ))];
        if let Err(error) = runtime.apply(initial).await {
            runtime.shutdown_within(Duration::ZERO).await;
            for task in &tasks {
                task.abort();
            }
            return Err(StartError::Pools(error));
        }
        admin.readiness.ready();
        Ok(Self {
            admin_addr,
            runtime,
            metrics,
            admin,
            shutdown: run.shutdown,
            tasks,
            access_log,
        })
    }

    /// Stop at once: not ready, stop accepting, give in-flight requests the grace period,
    /// close everything. For tests and embedders; the binary uses `terminate`.
    pub async fn shutdown(self) {
        self.admin.readiness.stopping();
        self.finish().await;
    }

    /// Leave as SIGTERM asks: not ready now, serve through the pre-stop window (cut short when
    /// `hurry` completes: a second signal), then stop accepting and drain within the grace.
    pub async fn terminate(self, hurry: impl Future<Output = ()>) {
        let signalled = Instant::now();
        self.admin.readiness.stopping();
        let stop_accepting = self.shutdown.stop_accepting(signalled, None);
        tracing::info!(pre_stop = ?self.shutdown.pre_stop, grace = ?self.shutdown.grace, "told to stop: not ready; serving through the pre-stop window");
        tokio::select! {
            _ = tokio::time::sleep_until(stop_accepting) => {}
            _ = hurry => tracing::info!("second signal: ending the pre-stop window early"),
        }
        self.finish().await;
    }

    async fn finish(self) {
        tracing::info!(grace = ?self.shutdown.grace, "stopping every listener; requests in flight get the grace period");
        self.runtime.shutdown_within(self.shutdown.grace).await;
        for task in &self.tasks {
            task.abort();
        }
        if let Some(log) = &self.access_log
            && !log.flush(ACCESS_LOG_FLUSH).await
        {
            tracing::warn!(within = ?ACCESS_LOG_FLUSH, "access log lines queued at shutdown were not all written in time");
        }
        tracing::info!("stopped");
    }
}
