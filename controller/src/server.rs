//! The gRPC roster server: `Watch` streams rosters from the `RosterHub` (snapshot first, then
//! changes, latest wins), `Report` feeds sidecar health into the `ReportStore`. Every call
//! passes the `identity` interceptor first, then has its token verified (`auth`) and its pools
//! authorised (`authz`); one Watch and one Report per pod (`sessions`); message sizes and the
//! number of pools per watch are bounded, so one bad client cannot exhaust the server. The port
//! speaks TLS with a renewable certificate when given one (`tls`). A verified sidecar is told
//! the zone it runs in (`zones`).

use std::future::Future;
use std::sync::Arc;

use rollcall_api::proto::encoded::v1::roster_server::RosterServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;

use crate::Result;
use crate::metrics::Metrics;
use crate::roster::RosterHub;
use crate::status::ReportStore;

mod admit;
pub mod auth;
pub mod authz;
pub mod identity;
mod service;
pub mod sessions;
pub mod tls;
mod transport;
pub mod zones;

pub use identity::{Caller, identify};
pub use service::RosterService;

/// Bounds on what a client may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest inbound message (a `WatchRequest` or one `HealthReport`).
    pub max_decoding_message_size: usize,
    /// Largest outbound message (one pool's roster).
    pub max_encoding_message_size: usize,
    /// Pools one `Watch` may name.
    pub max_pools_per_watch: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_decoding_message_size: 4 * 1024 * 1024,
            max_encoding_message_size: 64 * 1024 * 1024,
            max_pools_per_watch: 256,
        }
    }
}

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
}

impl State {
    /// Fresh state; `closing` ends every open stream when it turns true.
    pub fn new(metrics: Metrics, closing: watch::Receiver<bool>, mode: auth::Mode) -> Self {
        Self {
            hub: Arc::new(RosterHub::new()),
            reports: Arc::new(ReportStore::new()),
            metrics,
            closing,
            authz: Arc::new(authz::Authorizer::new(&mode)),
            zones: Arc::new(match &mode {
                auth::Mode::TokenReview { client, .. } => zones::Zones::new(client.clone()),
                auth::Mode::Insecure => zones::Zones::default(),
            }),
            auth: Arc::new(auth::Authenticator::new(mode)),
            sessions: Arc::default(),
        }
    }

    /// State whose streams never close by themselves and whose callers are not authenticated
    /// (tests).
    pub fn open(metrics: Metrics) -> Self {
        Self::new(metrics, watch::channel(false).1, auth::Mode::Insecure)
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
    let svc = RosterServer::new(RosterService::new(state, limits))
        .max_decoding_message_size(limits.max_decoding_message_size)
        .max_encoding_message_size(limits.max_encoding_message_size);
    let routes = Routes::new(InterceptedService::new(svc, identify));
    match tls {
        Some(config) => transport::serve(tls::incoming(listener, config), routes, shutdown).await,
        None => transport::serve(tls::plaintext(listener), routes, shutdown).await,
    }
    Ok(())
}
