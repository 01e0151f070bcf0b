//! A pool's policy turned into what the request path reads: parsed once per config, swapped
//! whole on reload (inside the routing snapshot), never re-parsed per request. `Tuning` holds the
//! sidecar-wide knobs of the request path that come from the command line.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use rollcall_api::policy::{Algorithm, PoolPolicy, Protocol};

use crate::access_log::AccessLog;
use crate::retry::RetryRules;
use crate::upstream::{DEFAULT_MAX_IDLE_PER_POOL, KeepAlive};

#[derive(Clone, Debug)]
pub struct PoolSettings {
    pub policy: PoolPolicy,
    pub http2: bool,
    pub retry: RetryRules,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub per_try_timeout: Duration,
    /// Header hashed by `RingHash`.
    pub hash_header: Option<HeaderName>,
    /// Share of requests offered to endpoints on probation, 0–1.
    pub probation_share: f64,
    pub drain_timeout: Duration,
}

/// Knobs of the request path shared by every pool (command-line flags).
#[derive(Clone, Debug)]
pub struct Tuning {
    /// A client's request body that sends nothing for this long is ended: `408`, charged to
    /// no endpoint. Zero disables. nginx's `client_body_timeout`.
    pub request_body_idle: Duration,
    /// An endpoint's response body that sends nothing for this long is cut and charged to the
    /// endpoint. Zero disables. nginx's `proxy_read_timeout`.
    pub response_body_idle: Duration,
    /// An upgraded tunnel (WebSocket) that moves no byte either way for this long is closed.
    /// Zero disables. HAProxy's `timeout tunnel`.
    pub tunnel_idle: Duration,
    /// HTTP/2 PING keep-alive to the endpoints.
    pub keepalive: KeepAlive,
    /// Idle HTTP/1.1 keep-alive connections a pool keeps over all its endpoints; past it the
    /// one idle longest is closed. nginx's `keepalive`.
    pub max_idle_connections: usize,
    /// The zone the sidecar runs in, for zone-aware routing.
    pub local_zone: Option<Arc<str>>,
    /// The access log, when it is on (`--access-log`).
    pub access_log: Option<Arc<AccessLog>>,
    /// What serves a client's HTTP/1.x connection (`--http1-engine`).
    pub http1_engine: Http1Engine,
}

/// What serves the HTTP/1 side of a client's connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Http1Engine {
    /// hyper's HTTP/1 server, for every connection.
    Hyper,
    /// The sidecar's own (`crate::proxy::fast`) for HTTP/1.x requests it handles; a connection
    /// turns to hyper's at the first request it does not (HTTP/2, an upgrade), before reading
    /// any of it. The default: cheaper per request than HAProxy (docs/benchmarks.md).
    #[default]
    Fast,
}

impl std::str::FromStr for Http1Engine {
    type Err = String;

    fn from_str(engine: &str) -> Result<Self, String> {
        match engine {
            "hyper" => Ok(Self::Hyper),
            "fast" => Ok(Self::Fast),
            other => Err(format!(
                "unknown HTTP/1 engine {other:?}: `fast` or `hyper`"
            )),
        }
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            request_body_idle: Duration::from_secs(60),
            response_body_idle: Duration::from_secs(60),
            tunnel_idle: Duration::from_secs(3600),
            keepalive: KeepAlive::default(),
            max_idle_connections: DEFAULT_MAX_IDLE_PER_POOL,
            local_zone: None,
            access_log: None,
            http1_engine: Http1Engine::Fast,
        }
    }
}

impl PoolSettings {
    pub fn new(policy: &PoolPolicy) -> Self {
        let hash_header = match policy.load_balancer.algorithm {
            Algorithm::RingHash => policy
                .load_balancer
                .hash_header
                .as_deref()
                .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok()),
            _ => None,
        };
        Self {
            http2: matches!(policy.protocol, Protocol::Http2 | Protocol::Grpc),
            retry: RetryRules::from_policy(&policy.retries),
            connect_timeout: policy.timeouts.connect.get(),
            request_timeout: policy.timeouts.request.get(),
            per_try_timeout: policy.retries.per_try_timeout.get(),
            hash_header,
            probation_share: policy.outlier_detection.probation.traffic_share.fraction(),
            drain_timeout: policy.draining.timeout.get(),
            policy: policy.clone(),
        }
    }
}
