//! The sidecar's link to the controller: the roster client (`watch`) turns the `Watch` stream
//! into `SidecarConfig`s for `Runtime::apply`, and the health reporter (`report`) streams what
//! the pools see back on `Report`. The decisions are pure and tested on their own: which roster
//! a pool runs (`book`), what a report says and whether anything changed (`health`), how long
//! to wait before reconnecting (`backoff`). The two loops only carry messages between them.
//!
//! Both streams share one lazily connected channel, present the pod's ServiceAccount token
//! (`credentials`), keep routing on the last roster while the controller is away, and
//! reconnect with full-jitter exponential back-off.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rollcall_api::proto::v1::roster_client::RosterClient;
use rollcall_api::roster::{PoolRef, Refusal, SidecarId};
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::config::SidecarConfig;
use crate::runtime::Runtime;

mod backoff;
pub(crate) mod book;
mod credentials;
mod dial;
mod health;
mod reporter;
mod watch;

pub use backoff::Backoff;
pub use book::{Book, Outcome};
pub use credentials::{Credentials, TokenError};
pub use dial::ControllerCa;
pub use health::{HealthFacts, pool_health};

/// Largest roster message accepted from the controller (one pool's complete roster).
pub const MAX_ROSTER_MESSAGE: usize = 64 * 1024 * 1024;
/// Largest health report sent (the controller refuses more than 4 MiB).
pub const MAX_REPORT_MESSAGE: usize = 4 * 1024 * 1024;

/// The roster client as both loops use it: every call carries the token.
pub(crate) type Client = RosterClient<InterceptedService<Channel, Credentials>>;

/// One pool the sidecar routes to: `namespace/name=listen`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolBinding {
    pub pool: PoolRef,
    pub listen: SocketAddr,
}

/// How the sidecar talks to the controller.
#[derive(Clone, Debug)]
pub struct RosterOptions {
    /// `http://host:port` of the controller's roster service.
    pub controller: String,
    pub pools: Vec<PoolBinding>,
    pub sidecar: SidecarId,
    /// An empty report after this long without one.
    pub heartbeat: Duration,
    /// At most one change report per interval; changes within it are coalesced.
    pub report_interval: Duration,
    pub backoff: Backoff,
    pub connect_timeout: Duration,
    /// The projected ServiceAccount token presented on every call (`None`: none, for a
    /// controller run with `--insecure-no-auth`).
    pub token_file: Option<PathBuf>,
    /// The CA that signed the controller's roster certificate; needed for `https://`.
    pub controller_ca: Option<ControllerCa>,
    /// The name the controller's certificate must carry when the URL's host is not it (the
    /// controller dialled by address).
    pub controller_server_name: Option<String>,
    /// Dial an `http://` controller that is not on this host (refused otherwise).
    pub insecure_plaintext: bool,
    /// Take part in fleet health: probe only what the controller assigns (on by default).
    pub fleet_health: bool,
}

/// Why the controller options were refused.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("--controller {url:?} is not a usable URL: {source}")]
    Controller {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("--controller {0:?}: write http://HOST:PORT (h2c) or https://HOST:PORT (TLS)")]
    Scheme(String),
    #[error(
        "--controller {0:?} is https://: give the CA that signed its certificate with --controller-ca"
    )]
    NoCa(String),
    #[error("a controller CA or server name is given but --controller {0:?} is not https://")]
    CaWithoutTls(String),
    #[error(
        "--controller {0:?} is plaintext to another host: anyone on the path would read this pod's token and could answer as the controller. Use https:// with --controller-ca (the chart does by default), or pass --insecure-plaintext-controller to accept that"
    )]
    Plaintext(String),
    #[error("cannot read --controller-ca {path}: {source}")]
    ReadCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the controller CA from {0} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    CaNotPem(String),
    #[error("the controller CA from {origin}: {source}")]
    Tls {
        origin: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("--controller needs at least one --pool NAMESPACE/NAME=LISTEN")]
    NoPools,
    #[error("--pool {0} is given twice")]
    DuplicatePool(PoolRef),
    #[error("--pool {pool}: {listen} is already the listen address of another pool")]
    DuplicateListen { pool: PoolRef, listen: SocketAddr },
}

/// The running roster client and reporter.
pub struct RosterTasks {
    pub tasks: Vec<JoinHandle<()>>,
}

/// What each runtime pool runs, keyed by runtime pool name (`namespace/name`).
pub(crate) type Versions = BTreeMap<String, Running>;

/// The roster version a pool runs (0 before it has one) and a newer one it refused, if any:
/// what its health reports acknowledge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Running {
    pub pool: PoolRef,
    pub version: u64,
    pub refused: Option<Refusal>,
}

// === impl PoolBinding ===

impl FromStr for PoolBinding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (pool, listen) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: write a pool as NAMESPACE/NAME=LISTEN"))?;
        let pool: PoolRef = pool.parse()?;
        let listen = listen
            .parse()
            .map_err(|e| format!("{s:?}: {listen:?} is not an ip:port listen address ({e})"))?;
        Ok(Self { pool, listen })
    }
}

// === impl RosterOptions ===

impl RosterOptions {
    /// Defaults for everything but where to connect, what to watch and who we are.
    pub fn new(controller: impl Into<String>, pools: Vec<PoolBinding>, sidecar: SidecarId) -> Self {
        Self {
            controller: controller.into(),
            pools,
            sidecar,
            heartbeat: Duration::from_secs(10),
            report_interval: Duration::from_millis(250),
            backoff: Backoff::default(),
            connect_timeout: Duration::from_secs(2),
            token_file: None,
            controller_ca: None,
            controller_server_name: None,
            insecure_plaintext: false,
            fleet_health: true,
        }
    }

    /// Check the options and build the (lazily connecting) channel.
    pub fn channel(&self) -> Result<Channel, OptionsError> {
        if self.pools.is_empty() {
            return Err(OptionsError::NoPools);
        }
        let mut pools = HashSet::new();
        let mut listens = HashSet::new();
        for binding in &self.pools {
            if !pools.insert(&binding.pool) {
                return Err(OptionsError::DuplicatePool(binding.pool.clone()));
            }
            // Port 0 binds a free port, so several pools may ask for it.
            if binding.listen.port() != 0 && !listens.insert(binding.listen) {
                return Err(OptionsError::DuplicateListen {
                    pool: binding.pool.clone(),
                    listen: binding.listen,
                });
            }
        }
        let endpoint = dial::endpoint(dial::Dial {
            controller: &self.controller,
            ca: self.controller_ca.as_ref(),
            server_name: self.controller_server_name.as_deref(),
            insecure_plaintext: self.insecure_plaintext,
        })?;
        let endpoint = endpoint
            .connect_timeout(self.connect_timeout)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5))
            .keep_alive_while_idle(true);
        Ok(endpoint.connect_lazy())
    }

    /// What the runtime runs before the first roster: every pool listening, with no endpoints.
    pub fn initial_config(&self) -> SidecarConfig {
        Book::new(&self.pools).config()
    }
}

/// Start the roster client and the reporter on `channel`; the runtime already runs
/// `options.initial_config()`.
pub fn spawn(options: &RosterOptions, channel: Channel, runtime: Arc<Runtime>) -> RosterTasks {
    let credentials = Credentials::new(options.token_file.clone());
    let client = RosterClient::with_interceptor(channel, credentials)
        .max_decoding_message_size(MAX_ROSTER_MESSAGE)
        .max_encoding_message_size(MAX_REPORT_MESSAGE);
    let (versions_tx, versions_rx) = channel::channel(Versions::new());
    let watch = tokio::spawn(watch::run(
        client.clone(),
        options.clone(),
        Arc::clone(&runtime),
        versions_tx,
    ));
    let report = tokio::spawn(reporter::run(client, options.clone(), runtime, versions_rx));
    let token_file = options
        .token_file
        .as_ref()
        .map_or_else(|| "none".to_owned(), |p| p.display().to_string());
    tracing::info!(controller = %options.controller, pools = options.pools.len(), sidecar = %options.sidecar, %token_file, "following the controller's rosters");
    RosterTasks {
        tasks: vec![watch, report],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_binding_parses_namespace_name_and_listen() {
        let b: PoolBinding = "shop/checkout=127.0.0.1:15001".parse().unwrap();
        assert_eq!(b.pool, PoolRef::new("shop", "checkout"));
        assert_eq!(b.listen, "127.0.0.1:15001".parse().unwrap());
        assert!("shop/checkout".parse::<PoolBinding>().is_err());
        assert!("checkout=127.0.0.1:1".parse::<PoolBinding>().is_err());
        assert!("shop/checkout=localhost:1".parse::<PoolBinding>().is_err());
    }

    #[test]
    fn options_refuse_duplicates_and_empty_pool_lists() {
        let id = SidecarId::default();
        let b = |s: &str| s.parse::<PoolBinding>().unwrap();
        let opts = |pools| RosterOptions::new("http://127.0.0.1:1", pools, id.clone());
        assert!(matches!(opts(vec![]).channel(), Err(OptionsError::NoPools)));
        let mut tls = opts(vec![b("a/b=127.0.0.1:1")]);
        tls.controller = "grpc://controller:9090".into();
        assert!(matches!(tls.channel(), Err(OptionsError::Scheme(_))));
        tls.controller = "https://controller:9090".into();
        assert!(matches!(tls.channel(), Err(OptionsError::NoCa(_))));
        tls.controller_ca = Some(ControllerCa::File("/nonexistent/ca.crt".into()));
        assert!(matches!(tls.channel(), Err(OptionsError::ReadCa { .. })));
        tls.controller = "http://controller:9090".into();
        assert!(matches!(tls.channel(), Err(OptionsError::CaWithoutTls(_))));
        let dup = opts(vec![b("a/b=127.0.0.1:1"), b("a/b=127.0.0.1:2")]);
        assert!(matches!(dup.channel(), Err(OptionsError::DuplicatePool(_))));
        let dup = opts(vec![b("a/b=127.0.0.1:1"), b("a/c=127.0.0.1:1")]);
        assert!(matches!(
            dup.channel(),
            Err(OptionsError::DuplicateListen { .. })
        ));
    }
}
