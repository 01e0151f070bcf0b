//! The controller process's life, in order. Both ports listen from the start. As a standby it
//! competes for the Lease: not ready, and refusing streams with UNAVAILABLE so sidecars go to
//! the leader. As leader it reconciles and serves until the Lease is lost, can no longer be
//! confirmed (a partition: kube-lease-manager alone would keep leading), or SIGTERM/Ctrl-C
//! arrives. Then, in that order: not ready, every stream ended with UNAVAILABLE (sidecars
//! reconnect to the next leader and keep routing meanwhile), the Lease released so a standby
//! takes over at once, and exit — cleanly after a shutdown, with an error after losing the
//! lead, so the pod restarts as a standby rather than carrying state over. With
//! `leader_slice` the leader names itself in the EndpointSlice of the Service sidecars dial
//! while it leads (`leader_slice`), and every running replica answers `/readyz/replica`, so
//! standbys are Ready (rolling updates, PodDisruptionBudgets) without getting connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

use crate::http::Readiness;
use crate::leader::{self, LeaseSettings};
use crate::leader_slice::LeaderSlice;
use crate::lease_runtime::LeaseRuntime;
use crate::metrics::Metrics;
use crate::reconcile::Settings;
use crate::server::tls::{RELOAD_EVERY, RosterTls, TlsFiles};
use crate::server::{self, Limits, State};
use crate::{Error, Result, http, run};

/// How the process was configured.
#[derive(Clone, Debug)]
pub struct Options {
    pub grpc_listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub lease: LeaseSettings,
    pub settings: Settings,
    pub limits: Limits,
    pub authentication: Authentication,
    /// TLS on the roster port; `None`: plaintext h2c.
    pub tls: Option<TlsFiles>,
    /// Run leader election on its own thread and client (`lease_runtime`); `None`: on the
    /// caller's runtime and `client`.
    pub lease_runtime: Option<Arc<LeaseRuntime>>,
    /// Name this replica (`lease.namespace`/`lease.identity`) in the EndpointSlice of the
    /// Service sidecars dial while it leads (`leader_slice`).
    pub leader_slice: Option<LeaderSliceSettings>,
}

/// The EndpointSlice the leader names itself in, and the address it writes there.
#[derive(Clone, Debug)]
pub struct LeaderSliceSettings {
    pub name: String,
    pub ip: std::net::IpAddr,
}

/// How sidecars prove who they are.
#[derive(Clone, Debug)]
pub enum Authentication {
    /// A projected ServiceAccount token for `audience`, checked with TokenReview.
    TokenReview { audience: String },
    /// Nobody is checked: local development only.
    Insecure,
}

/// How the process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// SIGTERM or Ctrl-C: everything closed in order.
    Stopped,
    /// Leadership ended for this reason; restart as a standby.
    LostLead(String),
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

async fn closed(mut closing: watch::Receiver<bool>) {
    if closing.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Compete for the Lease, on the election's own runtime when there is one.
async fn elect(
    runtime: Option<&Arc<LeaseRuntime>>,
    client: &Client,
    lease: &LeaseSettings,
) -> Result<leader::Leadership> {
    match runtime {
        Some(runtime) => {
            let (client, lease) = (runtime.client(), lease.clone());
            runtime
                .run(async move { leader::elect(client, &lease).await })
                .await?
        }
        None => leader::elect(client.clone(), lease).await,
    }
}

/// Watch that this replica still holds a valid Lease (`leader::confirm`), on the election's
/// own runtime when there is one.
async fn confirm(
    runtime: Option<Arc<LeaseRuntime>>,
    client: Client,
    lease: LeaseSettings,
    margin: Duration,
) -> String {
    match runtime {
        Some(runtime) => {
            let client = runtime.client();
            runtime
                .run(async move { leader::confirm(client, &lease, margin).await })
                .await
                .unwrap_or_else(|e| e.to_string())
        }
        None => leader::confirm(client, &lease, margin).await,
    }
}

/// Reconcile and serve until the lead ends, or a shutdown signal comes; why it ended.
#[allow(clippy::too_many_arguments)]
async fn lead(
    client: Client,
    runtime: Option<Arc<LeaseRuntime>>,
    lease: &LeaseSettings,
    leadership: &leader::Leadership,
    mut signalled: watch::Receiver<bool>,
    state: State,
    settings: Settings,
    ready: Arc<AtomicBool>,
) -> Outcome {
    let (ended_tx, mut ended) = watch::channel::<Option<Outcome>>(None);
    let mut is_leader = leadership.is_leader.clone();
    let (watch_client, watch_lease) = (client.clone(), lease.clone());
    let watcher = tokio::spawn(async move {
        let margin = watch_lease.step_down_margin();
        let outcome = tokio::select! {
            _ = is_leader.wait_for(|leads| !*leads) => Outcome::LostLead("lost the leader lease".into()),
            why = confirm(runtime, watch_client, watch_lease, margin) => Outcome::LostLead(why),
            _ = signalled.wait_for(|s| *s) => Outcome::Stopped,
        };
        let _ = ended_tx.send(Some(outcome));
    });
    let mut stop = ended.clone();
    run::run(client, state, settings, ready, async move {
        let _ = stop.wait_for(Option::is_some).await;
    })
    .await;
    watcher.abort();
    let outcome = ended.borrow_and_update().clone();
    outcome.unwrap_or_else(|| Outcome::LostLead("the controller stopped by itself".into()))
}

/// Run until shut down or no longer leading.
pub async fn run(client: Client, options: Options) -> Result<Outcome> {
    let (closing_tx, closing_rx) = watch::channel(false);
    let auth = match &options.authentication {
        Authentication::TokenReview { audience } => server::auth::Mode::TokenReview {
            client: client.clone(),
            audience: audience.clone(),
        },
        Authentication::Insecure => {
            tracing::warn!(
                "sidecars are not authenticated (--insecure-no-auth): local development only"
            );
            server::auth::Mode::Insecure
        }
    };
    // The reloader lives as long as this run (aborted when it returns, however it returns).
    let (tls, _reloader, certificate) = match options.tls.clone() {
        Some(files) => {
            let (tls, waiting_for) = RosterTls::start(files).map_err(Error::Tls)?;
            let config = Arc::clone(&tls.config);
            match waiting_for {
                None => {
                    tracing::info!(cert = %tls.files.cert.display(), "roster port speaks TLS");
                }
                Some(error) => tracing::warn!(%error, every = ?RELOAD_EVERY,
                    "no roster certificate to serve yet (a chart-managed install gets it from the injector); not ready until one loads"),
            }
            let resolver = Arc::clone(&tls.resolver);
            let reloader = AbortOnDropHandle::new(tokio::spawn(tls.keep_fresh(RELOAD_EVERY)));
            (Some(config), Some(reloader), Some(resolver))
        }
        None => (None, None, None),
    };
    let state = State::new(
        Metrics::new()?,
        closing_rx.clone(),
        auth,
        options.limits.grant_recheck,
    );
    let readiness = Arc::new(Readiness {
        certificate,
        ..Readiness::default()
    });
    let ready = Arc::clone(&readiness.serving);
    let grpc = TcpListener::bind(options.grpc_listen)
        .await
        .map_err(|e| Error::Listen(options.grpc_listen, e))?;
    let ops = TcpListener::bind(options.metrics_listen)
        .await
        .map_err(|e| Error::Listen(options.metrics_listen, e))?;
    let grpc_task = tokio::spawn(server::serve(
        grpc,
        state.clone(),
        options.limits,
        tls,
        closed(closing_rx.clone()),
    ));
    let (ops_stop, ops_stopped) = tokio::sync::oneshot::channel::<()>();
    // The operations port answers the kubelet's probes: served on the election's runtime
    // when there is one, with its listener registered there, so a main runtime busy for
    // seconds with a reconnecting fleet does not fail them.
    let ops = ops
        .into_std()
        .map_err(|e| Error::Listen(options.metrics_listen, e))?;
    let ops_serve = {
        let (metrics, readiness) = (state.metrics.clone(), Arc::clone(&readiness));
        async move {
            match TcpListener::from_std(ops) {
                Ok(ops) => {
                    let stopped = async {
                        let _ = ops_stopped.await;
                    };
                    http::serve(ops, metrics, readiness, stopped).await;
                }
                Err(error) => tracing::error!(%error, "cannot serve the operations port"),
            }
        }
    };
    let ops_task = match &options.lease_runtime {
        Some(runtime) => runtime.spawn(ops_serve),
        None => tokio::spawn(ops_serve),
    };

    let lease = options.lease.clone();
    let (signal_tx, signalled) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = signal_tx.send(true);
    });
    // The slice's writes go over the election's client: they must not queue behind the
    // main runtime's work any more than renewals do.
    let slice_client = options
        .lease_runtime
        .as_ref()
        .map_or_else(|| client.clone(), |runtime| runtime.client());
    let slice = options.leader_slice.as_ref().map(|s| {
        LeaderSlice::new(
            slice_client,
            &lease.namespace,
            &s.name,
            &lease.identity,
            s.ip,
        )
    });
    if let Some(slice) = &slice {
        // A container restarted after a crash may still be named from its last lead.
        slice.step_down().await;
    }
    let runtime = options.lease_runtime.as_ref();
    let mut leadership = elect(runtime, &client, &lease).await?;
    readiness.replica.store(true, Ordering::Release);
    tracing::info!(identity = %lease.identity, "standing by for the leader lease");
    let mut standby_signal = signalled.clone();
    let outcome = loop {
        tokio::select! {
            _ = standby_signal.wait_for(|s| *s) => break Outcome::Stopped,
            () = leader::freed(client.clone(), &lease) => {
                // The leader let go: compete again now rather than at its Lease's expiry.
                tracing::debug!("the leader lease is free; competing for it");
                let previous = std::mem::replace(
                    &mut leadership,
                    elect(runtime, &client, &lease).await?,
                );
                previous.release(Duration::from_secs(2)).await;
            }
            acquired = leadership.acquired() => {
                if !acquired {
                    break Outcome::LostLead("leader election stopped".into());
                }
                tracing::info!("leading: reconciling and serving rosters");
                let held = slice
                    .clone()
                    .map(|slice| AbortOnDropHandle::new(tokio::spawn(slice.hold())));
                let why = lead(client.clone(), runtime.cloned(), &lease, &leadership, signalled.clone(), state.clone(), options.settings, ready.clone()).await;
                drop(held);
                break why;
            }
        }
    };
    match &outcome {
        Outcome::Stopped => tracing::info!("shutting down"),
        Outcome::LostLead(why) => tracing::warn!(reason = %why, "giving up the lead"),
    }
    ready.store(false, Ordering::Release);
    readiness.replica.store(false, Ordering::Release);
    if let Some(slice) = &slice {
        slice.step_down().await;
    }
    let _ = closing_tx.send(true);
    if tokio::time::timeout(Duration::from_secs(5), grpc_task)
        .await
        .is_err()
    {
        tracing::warn!("the roster server did not stop within 5s");
    }
    leadership.release(Duration::from_secs(5)).await;
    let _ = ops_stop.send(());
    let _ = ops_task.await;
    Ok(outcome)
}
