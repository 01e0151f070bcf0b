//! Starting and stopping the whole sidecar: load the config (refusing to start on a bad one),
//! bind the admin listener, start the pools, then follow config changes — from a file
//! (`start`) or from the controller's roster stream (`start_controlled`). `main.rs` is a thin
//! shell over these, and integration tests call them directly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::{self, AdminState};
use crate::config::{self, SidecarConfig};
use crate::metrics::Metrics;
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

/// A running sidecar.
pub struct Sidecar {
    pub admin_addr: SocketAddr,
    pub runtime: Arc<Runtime>,
    pub metrics: Arc<Metrics>,
    tasks: Vec<JoinHandle<()>>,
}

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
    #[error(transparent)]
    Roster(#[from] roster::OptionsError),
    #[error("cannot set up metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// Start everything and return once every pool listens.
pub async fn start(options: Options) -> Result<Sidecar, StartError> {
    let (initial, loaded) = SidecarConfig::load_bytes(&options.config)?;
    let mut sidecar = Sidecar::boot(options.admin_listen, &initial).await?;
    let (tx, mut rx) = watch::channel(Arc::new(initial));
    sidecar.tasks.push(config::watch::spawn(
        options.config.clone(),
        loaded,
        options.reload_interval,
        tx,
        Arc::clone(&sidecar.metrics),
    ));
    let follower = Arc::clone(&sidecar.runtime);
    sidecar.tasks.push(tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let config = rx.borrow_and_update().clone();
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
    let channel = options.roster.channel()?;
    let mut sidecar = Sidecar::boot(options.admin_listen, &options.roster.initial_config()).await?;
    let roster = roster::spawn(&options.roster, channel, Arc::clone(&sidecar.runtime));
    sidecar.tasks.extend(roster.tasks);
    tracing::info!(admin = %sidecar.admin_addr, controller = %options.roster.controller, "sidecar started");
    Ok(sidecar)
}

impl Sidecar {
    /// What both modes share: metrics, runtime, admin listener, and the first configuration.
    async fn boot(admin_listen: SocketAddr, initial: &SidecarConfig) -> Result<Self, StartError> {
        let metrics = Arc::new(Metrics::new()?);
        let runtime = Arc::new(Runtime::new(Arc::clone(&metrics)));
        let admin_error = |source| StartError::Admin {
            addr: admin_listen,
            source,
        };
        let admin_listener = admin::bind(admin_listen).await.map_err(admin_error)?;
        let admin_addr = admin_listener.local_addr().map_err(admin_error)?;
        let state = Arc::new(AdminState {
            runtime: Arc::clone(&runtime),
            metrics: Arc::clone(&metrics),
            ready: AtomicBool::new(false),
        });
        let tasks = vec![tokio::spawn(admin::serve(
            admin_listener,
            Arc::clone(&state),
        ))];
        if let Err(error) = runtime.apply(initial).await {
            runtime.shutdown().await;
            for task in &tasks {
                task.abort();
            }
            return Err(StartError::Pools(error));
        }
        state.ready.store(true, Ordering::Release);
        Ok(Self {
            admin_addr,
            runtime,
            metrics,
            tasks,
        })
    }
}

impl Sidecar {
    /// Stop accepting, let in-flight requests finish, close everything.
    pub async fn shutdown(self) {
        for task in &self.tasks {
            task.abort();
        }
        self.runtime.shutdown().await;
    }
}
