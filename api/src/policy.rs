//! The routing policy of one pool: every field of the `BackendPool` spec except the Service it
//! names. The sidecar's roster file and the controller's CRD share these types, so a field means
//! the same thing in both places and has one default. Every field is optional on the wire; the
//! defaults are defined here (docs/design.md says why). `validate` catches what a schema cannot
//! (cross-field rules) and says which field is wrong and why, in words a person can act on.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod units;
mod validate;
mod wire;

pub use units::{DurationString, Percent};
pub use validate::{PolicyError, RetryOn, describe};
pub use wire::from_json_lenient;

/// The whole policy of one pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PoolPolicy {
    /// Protocol spoken to the endpoints.
    pub protocol: Protocol,
    /// How requests are spread over eligible endpoints.
    pub load_balancer: LoadBalancer,
    /// Active probes.
    pub health_check: HealthCheck,
    /// Passive detection from real traffic, ejection and re-admission.
    pub outlier_detection: OutlierDetection,
    /// Below this share of eligible endpoints the sidecar distrusts its sensors and routes to
    /// every endpoint that is not draining.
    pub panic_threshold: Percent,
    /// Ramp a re-admitted endpoint's weight up over a window.
    pub slow_start: SlowStart,
    /// How endpoints leave.
    pub draining: Draining,
    /// Retry rules.
    pub retries: Retries,
    /// Connect and overall request deadlines.
    pub timeouts: Timeouts,
}

impl Default for PoolPolicy {
    fn default() -> Self {
        Self {
            protocol: Protocol::default(),
            load_balancer: LoadBalancer::default(),
            health_check: HealthCheck::default(),
            outlier_detection: OutlierDetection::default(),
            panic_threshold: Percent::new(50.0),
            slow_start: SlowStart::default(),
            draining: Draining::default(),
            retries: Retries::default(),
            timeouts: Timeouts::default(),
        }
    }
}

/// Protocol spoken to the endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Protocol {
    /// HTTP/1.1 with keep-alive.
    #[default]
    #[serde(rename = "HTTP1")]
    Http1,
    /// HTTP/2 with prior knowledge (h2c).
    #[serde(rename = "HTTP2")]
    Http2,
    /// gRPC over HTTP/2 (h2c).
    #[serde(rename = "GRPC")]
    Grpc,
}

/// Balancing algorithm and its knobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct LoadBalancer {
    pub algorithm: Algorithm,
    /// Header whose value is hashed by `RingHash`; required when the algorithm is `RingHash`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_header: Option<String>,
    /// No endpoint receives more than this multiple of its fair share of recent requests.
    pub max_share_multiple: f64,
    /// Prefer endpoints in the sidecar's own zone (off unless enabled).
    pub zone_aware: ZoneAware,
}

impl Default for LoadBalancer {
    fn default() -> Self {
        Self {
            algorithm: Algorithm::default(),
            hash_header: None,
            max_share_multiple: 2.0,
            zone_aware: ZoneAware::default(),
        }
    }
}

/// Zone-aware routing: while enough of the sidecar's own zone is eligible, only endpoints there
/// get new requests; below that, every zone does (spill-over). Needs the sidecar's zone
/// (`--zone` / `ROLLCALL_ZONE`) and endpoint zones in the roster; without either it is off.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ZoneAware {
    pub enabled: bool,
    /// The share of the local zone's endpoints that must be eligible (and at least one) for
    /// traffic to stay in the zone.
    pub min_healthy: Percent,
}

impl Default for ZoneAware {
    fn default() -> Self {
        Self {
            enabled: false,
            min_healthy: Percent::new(70.0),
        }
    }
}

/// Balancing algorithm. Health is a gate in front of every one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Algorithm {
    /// Power of two random choices, fewer outstanding requests wins.
    LeastRequest,
    /// Smooth weighted round robin.
    RoundRobin,
    /// Power of two random choices by peak-EWMA latency (successes only) times outstanding
    /// requests: latency-aware, the default.
    #[default]
    PeakEwma,
    /// Consistent hash of a request header.
    RingHash,
}

/// Active probing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HealthCheck {
    /// `TCP` (connect), `HTTP` (GET `path`, expect `expectedStatuses`) or `None` (passive only).
    #[serde(rename = "type")]
    pub kind: HealthCheckType,
    /// Path probed by `HTTP` checks.
    pub path: String,
    /// Status range counted as healthy by `HTTP` checks, e.g. `200-399`.
    pub expected_statuses: StatusRange,
    pub interval: DurationString,
    pub timeout: DurationString,
    /// Random spread added to each interval so sidecars do not probe in lock-step.
    pub jitter: Percent,
    /// Consecutive probe successes that count as evidence an ejected endpoint is back.
    pub healthy_threshold: u32,
    /// Consecutive probe failures that eject an endpoint.
    pub unhealthy_threshold: u32,
    /// The service `GRPC` checks ask about; empty for the server as a whole.
    pub grpc_service: String,
    /// Fleet health: how many sidecars probe each endpoint for the whole pool, their verdicts
    /// shared through the controller (at most 16). `0`, or a pool with no more sidecars than
    /// this, has every sidecar probe every endpoint.
    pub checkers: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            kind: HealthCheckType::default(),
            path: "/healthz".into(),
            expected_statuses: StatusRange::default(),
            interval: DurationString::secs(2),
            timeout: DurationString::secs(1),
            jitter: Percent::new(10.0),
            healthy_threshold: 2,
            unhealthy_threshold: 3,
            grpc_service: String::new(),
            checkers: DEFAULT_CHECKERS,
        }
    }
}

/// Checkers per endpoint when the policy does not say.
pub const DEFAULT_CHECKERS: u32 = 3;
/// Most checkers per endpoint a policy may ask for.
pub const MAX_CHECKERS: u32 = 16;

/// Kind of active probe. TCP is the default: it is safe against any listening server, where an
/// HTTP path that the application does not serve would eject every endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HealthCheckType {
    #[default]
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "HTTP")]
    Http,
    /// `grpc.health.v1.Health/Check` over h2c for `grpcService`; healthy when it says SERVING.
    #[serde(rename = "GRPC")]
    Grpc,
    /// No active probes: passive detection only, re-admission through probation traffic.
    None,
}

/// An inclusive HTTP status range written `200-399` (or a single status, `200`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusRange {
    pub min: u16,
    pub max: u16,
}

impl Default for StatusRange {
    fn default() -> Self {
        Self { min: 200, max: 399 }
    }
}

impl StatusRange {
    pub fn contains(&self, status: u16) -> bool {
        (self.min..=self.max).contains(&status)
    }
}

impl fmt::Display for StatusRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

impl FromStr for StatusRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |p: &str| {
            p.trim()
                .parse::<u16>()
                .ok()
                .filter(|c| (100..=599).contains(c))
                .ok_or_else(|| format!("{s:?} is not a status range like \"200-399\""))
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => {
                let v = parse(s)?;
                (v, v)
            }
        };
        if min > max {
            return Err(format!("status range {s:?} ends before it starts"));
        }
        Ok(Self { min, max })
    }
}

impl Serialize for StatusRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StatusRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for StatusRange {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StatusRange".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[1-5][0-9][0-9](-[1-5][0-9][0-9])?$",
            "description": "Inclusive HTTP status range, e.g. 200-399"
        })
    }
}

/// Passive detection and ejection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OutlierDetection {
    /// Consecutive gateway errors (connect refused, reset, timeout, 502/503/504) that eject at
    /// once, without waiting for a probe. 0 disables.
    pub consecutive_gateway_errors: u32,
    /// Consecutive 5xx answers (and gateway errors) that eject. 0 disables.
    #[serde(rename = "consecutive5xx")]
    pub consecutive_5xx: u32,
    /// Error rate over a sliding window.
    pub error_rate: ErrorRate,
    /// First ejection lasts this long; the n-th lasts n times as long.
    pub base_ejection_time: DurationString,
    /// Cap on one ejection's length.
    pub max_ejection_time: DurationString,
    /// Never eject more than this share of the pool (0–100); an endpoint that would go over
    /// stays eligible and is flagged.
    pub max_ejection_percent: u32,
    /// How an ejected endpoint earns its way back.
    pub probation: Probation,
}

impl Default for OutlierDetection {
    fn default() -> Self {
        Self {
            consecutive_gateway_errors: 3,
            consecutive_5xx: 5,
            error_rate: ErrorRate::default(),
            base_ejection_time: DurationString::secs(30),
            max_ejection_time: DurationString::secs(300),
            max_ejection_percent: 50,
            probation: Probation::default(),
        }
    }
}

/// Error-rate ejection: rate, not count, because a busy endpoint always has some failures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ErrorRate {
    /// Eject above this share of failed requests in the window. `0%` disables.
    pub threshold: Percent,
    pub window: DurationString,
    /// Fewer requests than this in the window never eject.
    pub min_requests: u32,
}

impl Default for ErrorRate {
    fn default() -> Self {
        Self {
            threshold: Percent::new(20.0),
            window: DurationString::secs(10),
            min_requests: 20,
        }
    }
}

/// Probation: the way back from ejection, on a trickle of real traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Probation {
    /// Consecutive successes (requests or probes) that make a probation endpoint healthy.
    pub successes: u32,
    /// Share of the pool's requests offered to endpoints on probation.
    pub traffic_share: Percent,
}

impl Default for Probation {
    fn default() -> Self {
        Self {
            successes: 5,
            traffic_share: Percent::new(5.0),
        }
    }
}

/// Slow start after re-admission.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SlowStart {
    /// Weight ramps from 10% to 100% over this window; `0s` disables.
    pub window: DurationString,
}

impl Default for SlowStart {
    fn default() -> Self {
        Self {
            window: DurationString::secs(30),
        }
    }
}

/// Draining.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Draining {
    /// In-flight requests of a leaving endpoint get this long before their connections close.
    pub timeout: DurationString,
}

impl Default for Draining {
    fn default() -> Self {
        Self {
            timeout: DurationString::secs(30),
        }
    }
}

/// Retry rules (docs/design.md, "Retries").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Retries {
    /// Total tries per request, the first included.
    pub attempts: u32,
    pub per_try_timeout: DurationString,
    pub budget: RetryBudget,
    /// Which failures may be retried: `connect-failure`, `reset`, a status (`502`) or `5xx`.
    pub retry_on: Vec<String>,
    /// Requests carrying this header are retried even when not idempotent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key_header: Option<String>,
}

impl Default for Retries {
    fn default() -> Self {
        Self {
            attempts: 2,
            per_try_timeout: DurationString::secs(4),
            budget: RetryBudget::default(),
            retry_on: ["connect-failure", "reset", "502", "503", "504"]
                .map(String::from)
                .to_vec(),
            idempotency_key_header: None,
        }
    }
}

/// Retries may be at most `percent` of requests over a window, plus a floor per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RetryBudget {
    pub percent: u32,
    pub min_per_second: u32,
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self {
            percent: 20,
            min_per_second: 10,
        }
    }
}

/// Deadlines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Timeouts {
    pub connect: DurationString,
    /// Overall deadline of one request, all tries included.
    pub request: DurationString,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: DurationString::secs(1),
            request: DurationString::secs(12),
        }
    }
}

#[cfg(test)]
mod tests;
