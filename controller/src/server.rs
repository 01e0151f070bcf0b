//! The gRPC roster server: `Watch` streams rosters from the `RosterHub` (snapshot first, then
//! changes, latest wins), `Report` feeds sidecar health into the `ReportStore`. Every request
//! passes the `gate` before any of its body is read (its token verified by `auth` from the
//! headers, its source's failures and its pod's connections bounded, each message's declared
//! size checked), then the `identity` interceptor; its pools are authorised (`authz`); one
//! Watch and one Report per pod (`sessions`); the pools per watch are bounded, so no caller can
//! exhaust the server. The port
//! speaks TLS with a renewable certificate when given one (`tls`). A verified sidecar is told
//! the zone it runs in (`zones`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rollcall_api::proto::encoded::v1::roster_server::RosterServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;

use crate::Result;
use crate::metrics::Metrics;
use crate::roster::RosterHub;
use crate::status::ReportStore;

pub(crate) mod admit;
pub mod auth;
pub mod authz;
pub mod frame_limit;
pub mod gate;
pub mod grants;
pub mod identity;
mod service;
pub mod sessions;
pub mod throttle;
pub mod tls;
mod transport;
pub mod zones;

pub use identity::{Caller, identify};
pub use service::RosterService;

/// Bounds on what a client may send, checked on each message's length prefix before it is
/// read (`gate`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest `WatchRequest`: 256 pools with names of ordinary length and what the caller
    /// holds of each fit in a tenth of it.
    pub max_watch_request: usize,
    /// Largest message on `ReportChanges`: one part of a report carries at most 64 endpoints
    /// (`rollcall_api::delta::PART_ENDPOINTS`), each well under a KiB.
    pub max_report_part: usize,
    /// Largest message on the legacy `Report`: one pool's complete report (about 100 bytes an
    /// endpoint: 40,000 endpoints).
    pub max_report: usize,
    /// Largest outbound message (one pool's roster).
    pub max_encoding_message_size: usize,
    /// Pools one `Watch` may name.
    pub max_pools_per_watch: usize,
    /// How often a Watch re-checks its cross-namespace grants (and how long an allowed answer
    /// is cached): a withdrawn RoleBinding ends the stream within twice this.
    pub grant_recheck: Duration,
    /// Connections not yet authenticated, per source address and in total (`throttle`).
    pub pending: throttle::PendingLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_watch_request: 64 * 1024,
            max_report_part: 256 * 1024,
            max_report: 4 * 1024 * 1024,
            max_encoding_message_size: 64 * 1024 * 1024,
            max_pools_per_watch: 256,
            grant_recheck: Duration::from_secs(60),
            pending: throttle::PendingLimits::default(),
        }
    }
}

impl Limits {
    /// The largest message a request to `path` may declare (an unknown method: the smallest).
    pub fn message_limit(&self, path: &str) -> usize {
        let method = path
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(SERVICE_NAME))
            .and_then(|p| p.strip_prefix('/'));
        match method {
            Some("Watch") => self.max_watch_request,
            Some("ReportChanges") => self.max_report_part,
            Some("Report") => self.max_report,
            _ => self.max_watch_request.min(self.max_report_part),
        }
    }

    /// The largest message any method accepts (tonic's own bound, behind the gate's).
    fn largest(&self) -> usize {
        self.max_watch_request
            .max(self.max_report_part)
            .max(self.max_report)
    }
}

/// The gRPC service's full name, as request paths carry it.
const SERVICE_NAME: &str = "rollcall.v1.Roster";

/// Shared state the server reads and writes.
#[derive(Clone, Debug)]
pub struct State {
    pub hub: Arc<RosterHub>,
    pub reports: Arc<ReportStore>,
    pub metrics: Metrics,
    /// Turns true when the process is shutting down: open streams end with UNAVAILABLE.
    pub closing: watch::Receiver<bool>,
    /// Verifies callers' tokens.
    pub auth: Arc<auth::Authenticator>,
    /// Decides which pools a verified caller may watch.
    pub authz: Arc<authz::Authorizer>,
    /// One Watch and one Report stream per pod.
    pub sessions: Arc<sessions::Sessions>,
    /// The zones verified sidecars run in.
    pub zones: Arc<zones::Zones>,
    /// Fleet health: who checks what, and the fleet's verdicts.
    pub fleet: Arc<crate::fleet::Fleet>,
}

impl State {
    /// Fresh state; `closing` ends every open stream when it turns true.
    pub fn new(
        metrics: Metrics,
        closing: watch::Receiver<bool>,
        mode: auth::Mode,
        grant_recheck: Duration,
    ) -> Self {
        Self {
            hub: Arc::new(RosterHub::new()),
            reports: Arc::new(ReportStore::new()),
            metrics: metrics.clone(),
            closing,
            authz: Arc::new(
                authz::Authorizer::with_metrics(&mode, metrics.clone()).allowing_for(grant_recheck),
            ),
            zones: Arc::new(match &mode {
                auth::Mode::TokenReview { client, .. } => zones::Zones::new(client.clone()),
                auth::Mode::Insecure => zones::Zones::default(),
            }),
            auth: Arc::new(auth::Authenticator::with_metrics(mode, metrics.clone())),
            sessions: Arc::default(),
            fleet: Arc::default(),
        }
    }

    /// State whose streams never close by themselves and whose callers are not authenticated
    /// (tests).
    pub fn open(metrics: Metrics) -> Self {
        Self::new(
            metrics,
            watch::channel(false).1,
            auth::Mode::Insecure,
            Limits::default().grant_recheck,
        )
    }

    /// Resolves once the process is shutting down (never, when nobody can close it).
    pub async fn closed(&self) {
        let mut closing = self.closing.clone();
        if closing.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Serve the roster API on `listener` until `shutdown` resolves: over TLS with `tls`
/// (handshakes through `tls::incoming`), else plaintext h2c. Connections are HTTP/2 only, with
/// the settings of `transport`.
pub async fn serve(
    listener: TcpListener,
    state: State,
    limits: Limits,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let admission = gate::Gate::new(state.auth.clone(), limits, state.metrics.clone());
    // The fleet's views live as long as the server that streams them.
    let closing = state.clone();
    let _fleet = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(crate::fleet::run(
        state.fleet.clone(),
        state.hub.clone(),
        state.reports.clone(),
        async move { closing.closed().await },
    )));
    let svc = RosterServer::new(RosterService::new(state, limits))
        .max_decoding_message_size(limits.largest())
        .max_encoding_message_size(limits.max_encoding_message_size);
    let routes = Routes::new(InterceptedService::new(svc, identify));
    match tls {
        Some(config) => {
            let incoming = tls::incoming(listener, config, admission.clone());
            transport::serve(incoming, routes, admission, shutdown).await;
        }
        None => {
            let incoming = tls::plaintext(listener, admission.clone());
            transport::serve(incoming, routes, admission, shutdown).await;
        }
    }
    Ok(())
}
