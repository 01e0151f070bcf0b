//! The roster protocol's domain types: what the controller sends (a versioned roster per pool)
//! and what a sidecar reports (per-endpoint health). These are the types both binaries work
//! with; the protobuf form exists only at the wire (`crate::edge` converts).

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use crate::policy::PoolPolicy;

/// gRPC metadata in which a sidecar names its pod on every call (the identity the controller
/// attributes reports to until sidecars authenticate).
pub const POD_METADATA: &str = "rollcall-pod";
/// gRPC metadata in which a sidecar names its namespace on every call.
pub const NAMESPACE_METADATA: &str = "rollcall-namespace";
/// Response metadata of `Watch` in which the controller tells a verified sidecar the zone its
/// node is in (`topology.kubernetes.io/zone`); absent when it cannot tell.
pub const ZONE_METADATA: &str = "rollcall-zone";

/// A `BackendPool`, by namespace and name. Written `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PoolRef {
    pub namespace: String,
    pub name: String,
}

/// Who a sidecar is: its pod and a random id per process.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SidecarId {
    pub namespace: String,
    pub pod: String,
    pub instance: String,
}

/// A sidecar's subscription.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchRequest {
    pub sidecar: SidecarId,
    pub pools: Vec<PoolRef>,
    /// The caller assembles deltas and multi-part states (`crate::delta::Assembler`).
    pub accepts_deltas: bool,
    /// Rosters the caller holds from an earlier stream.
    pub held: Vec<HeldRoster>,
    /// The caller takes part in fleet health: it probes what it is assigned.
    pub fleet_health: bool,
}

/// The fleet's health checking of one pool as one sidecar takes part in it (the `.proto`
/// contract, "Fleet health").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetHealth {
    /// The roster version whose endpoints the lists name.
    pub roster_version: u64,
    /// Everyone probes every endpoint.
    pub probe_all: bool,
    pub checkers: u32,
    /// The endpoints this sidecar checks.
    pub assigned: Vec<SocketAddr>,
    /// No checker's verdict for two probe intervals: probe them yourself.
    pub unchecked: Vec<SocketAddr>,
    /// No checker's verdict yet.
    pub pending: Vec<SocketAddr>,
    /// The fleet says their health check fails.
    pub failing: Vec<SocketAddr>,
}

/// A fleet-health checker's verdict on one endpoint: its probes' debounced judgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ProbeVerdict {
    Passing,
    Failing,
}

/// A roster a sidecar holds: which version, and its fingerprint (`crate::delta::fingerprint`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldRoster {
    pub pool: PoolRef,
    pub version: u64,
    pub fingerprint: Vec<u8>,
}

/// One endpoint of a roster, with its EndpointSlice conditions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub pod: Option<String>,
    pub zone: Option<String>,
    /// May receive new traffic.
    pub ready: bool,
    /// Can answer, even while terminating.
    pub serving: bool,
    /// Leaving.
    pub terminating: bool,
    /// Relative weight, at least 1.
    pub weight: u32,
}

impl Endpoint {
    /// An endpoint at `addr` that is ready and serving, of weight 1, with no pod or zone named.
    pub fn serving(addr: SocketAddr) -> Self {
        Self {
            addr,
            pod: None,
            zone: None,
            ready: true,
            serving: true,
            terminating: false,
            weight: 1,
        }
    }
}

/// The complete routing state of one pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Roster {
    /// Sorted by address, each address once.
    pub endpoints: Vec<Endpoint>,
    pub policy: PoolPolicy,
    /// `namespace/name:port` of the Service, for humans.
    pub service: String,
}

/// Why the controller has no roster for a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnavailableReason {
    PoolNotFound,
    PoolDeleted,
    ServiceNotFound,
    PortNotFound,
    NotPermitted,
    InvalidPolicy,
    Other,
}

/// What the controller knows about a pool: a roster or why there is none.
#[allow(clippy::large_enum_variant)] // `Unavailable` is rare; rosters are what moves.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolState {
    Roster(Roster),
    Unavailable {
        reason: UnavailableReason,
        message: String,
    },
}

/// One message of the `Watch` stream.
#[derive(Clone, Debug, PartialEq)]
pub struct RosterUpdate {
    pub pool: PoolRef,
    pub version: u64,
    pub state: PoolState,
}

/// Where an endpoint stands: the health machine's states (docs/design.md, "The endpoint health
/// machine"). One type from the sidecar's machine through the report stream to the controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum EndpointState {
    /// New, no verdict yet: eligible, so a fresh pool does not 503 while it warms up.
    #[default]
    Unknown,
    Healthy,
    /// Not eligible until its ejection time has passed (and probes agree).
    Ejected,
    /// Earning its way back on a trickle of real traffic.
    Probation,
    /// Leaving: no new requests (a terminating one only as a last resort).
    Draining,
}

/// One endpoint's health as one sidecar sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointHealth {
    pub addr: SocketAddr,
    pub state: EndpointState,
    /// PascalCase reason of the last transition; empty when none.
    pub reason: String,
    /// When the endpoint entered `state`, Unix milliseconds.
    pub since_unix_ms: u64,
    pub times_ejected: u32,
    pub last_error: Option<String>,
    /// Would be ejected, kept eligible by `maxEjectionPercent`.
    pub ejection_suppressed: bool,
    /// As a fleet-health checker of the endpoint: its probes' verdict.
    pub probe: Option<ProbeVerdict>,
}

/// The health of one pool as one sidecar sees it: complete, or (`ReportChanges`) the entries
/// that changed since its previous report on the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolHealth {
    pub pool: PoolRef,
    pub roster_version: u64,
    pub panic: bool,
    pub endpoints: Vec<EndpointHealth>,
    /// A newer roster the sidecar refused (it keeps routing on `roster_version`).
    pub refused: Option<Refusal>,
    /// In a report of changes only: endpoints no longer reported. Empty in a complete report.
    pub removed: Vec<SocketAddr>,
    /// `ReportChanges`: this starts a complete report (otherwise: changes, or a later part).
    pub complete: bool,
    /// `ReportChanges`: more parts of this complete report follow.
    pub continued: bool,
}

/// A roster version a sidecar would not run, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub version: u64,
    pub reason: String,
}

/// One message of the `Report` stream; no pools means a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthReport {
    pub sidecar: Option<SidecarId>,
    pub pools: Vec<PoolHealth>,
}

// === impl PoolRef ===

impl PoolRef {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PoolRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl FromStr for PoolRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((ns, name)) if valid_name(ns) && valid_name(name) => Ok(Self::new(ns, name)),
            _ => Err(format!(
                "{s:?} is not a pool reference; write it as namespace/name"
            )),
        }
    }
}

/// A Kubernetes object name (DNS subdomain, at most 253 characters).
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

// === impl SidecarId ===

impl fmt::Display for SidecarId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.pod)?;
        if !self.instance.is_empty() {
            write!(f, "#{}", self.instance)?;
        }
        Ok(())
    }
}

// === impl UnavailableReason ===

impl UnavailableReason {
    /// The pool itself is gone: stop routing to it.
    pub fn pool_gone(self) -> bool {
        matches!(self, Self::PoolNotFound | Self::PoolDeleted)
    }

    /// PascalCase, as in a Kubernetes condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PoolNotFound => "PoolNotFound",
            Self::PoolDeleted => "PoolDeleted",
            Self::ServiceNotFound => "ServiceNotFound",
            Self::PortNotFound => "PortNotFound",
            Self::NotPermitted => "NotPermitted",
            Self::InvalidPolicy => "InvalidPolicy",
            Self::Other => "Unavailable",
        }
    }
}

impl fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === impl EndpointState ===

impl EndpointState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::Healthy => "Healthy",
            Self::Ejected => "Ejected",
            Self::Probation => "Probation",
            Self::Draining => "Draining",
        }
    }

    /// Counts towards the pool's eligible share (the panic computation).
    pub fn is_eligible(self) -> bool {
        matches!(self, Self::Unknown | Self::Healthy)
    }

    /// Counts against `maxEjectionPercent`.
    pub fn is_out(self) -> bool {
        matches!(self, Self::Ejected | Self::Probation)
    }
}

impl fmt::Display for EndpointState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
