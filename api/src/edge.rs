//! The one place protobuf meets the domain: conversions between `crate::proto::v1` messages
//! and `crate::roster` types. Inbound messages are checked here (addresses parse, ports fit,
//! pool references are Kubernetes names, the policy JSON is a `PoolPolicy`), so code past the
//! edge never sees a malformed value.

use std::net::{IpAddr, SocketAddr};

use crate::policy::PoolPolicy;
use crate::proto::v1 as pb;
use crate::roster::{
    Endpoint, EndpointHealth, EndpointState, FleetHealth, HealthReport, HeldRoster, PoolHealth,
    PoolRef, PoolState, ProbeVerdict, Refusal, Roster, RosterUpdate, SidecarId, UnavailableReason,
    WatchRequest, valid_name,
};

/// Why an inbound message was refused.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    #[error("missing field {0}")]
    MissingField(&'static str),
    #[error("{0:?} is not an IP address")]
    InvalidAddress(String),
    #[error("port {0} is out of range 1-65535")]
    InvalidPort(u32),
    #[error("{0:?} is not a valid namespace/name pool reference")]
    InvalidPoolRef(String),
    #[error("policy is not a valid PoolPolicy: {0}")]
    InvalidPolicy(#[source] serde_json::Error),
    #[error("a roster delta or part of a state arrived unassembled (see crate::delta)")]
    Unassembled,
}

fn socket_addr(ip: &str, port: u32) -> Result<SocketAddr, EdgeError> {
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| EdgeError::InvalidAddress(ip.to_string()))?;
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or(EdgeError::InvalidPort(port))?;
    Ok(SocketAddr::new(ip, port))
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

// === PoolRef ===

impl From<&PoolRef> for pb::PoolRef {
    fn from(p: &PoolRef) -> Self {
        Self {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        }
    }
}

impl TryFrom<pb::PoolRef> for PoolRef {
    type Error = EdgeError;
    fn try_from(p: pb::PoolRef) -> Result<Self, EdgeError> {
        if valid_name(&p.namespace) && valid_name(&p.name) {
            Ok(PoolRef::new(p.namespace, p.name))
        } else {
            Err(EdgeError::InvalidPoolRef(format!(
                "{}/{}",
                p.namespace, p.name
            )))
        }
    }
}

fn pool_ref(p: Option<pb::PoolRef>) -> Result<PoolRef, EdgeError> {
    p.ok_or(EdgeError::MissingField("pool"))?.try_into()
}

// === SidecarId and WatchRequest ===

impl From<&SidecarId> for pb::SidecarIdentity {
    fn from(s: &SidecarId) -> Self {
        Self {
            pod: s.pod.clone(),
            namespace: s.namespace.clone(),
            instance: s.instance.clone(),
        }
    }
}

impl From<pb::SidecarIdentity> for SidecarId {
    fn from(s: pb::SidecarIdentity) -> Self {
        Self {
            namespace: s.namespace,
            pod: s.pod,
            instance: s.instance,
        }
    }
}

impl From<&WatchRequest> for pb::WatchRequest {
    fn from(w: &WatchRequest) -> Self {
        Self {
            sidecar: Some((&w.sidecar).into()),
            pools: w.pools.iter().map(Into::into).collect(),
            accepts_deltas: w.accepts_deltas,
            held: w
                .held
                .iter()
                .map(|h| pb::HeldRoster {
                    pool: Some((&h.pool).into()),
                    version: h.version,
                    fingerprint: h.fingerprint.clone(),
                })
                .collect(),
            fleet_health: w.fleet_health,
        }
    }
}

impl TryFrom<pb::WatchRequest> for WatchRequest {
    type Error = EdgeError;
    fn try_from(w: pb::WatchRequest) -> Result<Self, EdgeError> {
        Ok(Self {
            sidecar: w.sidecar.map(Into::into).unwrap_or_default(),
            pools: w
                .pools
                .into_iter()
                .map(TryInto::try_into)
                .collect::<Result<_, _>>()?,
            accepts_deltas: w.accepts_deltas,
            held: w
                .held
                .into_iter()
                .map(|h| {
                    Ok(HeldRoster {
                        pool: pool_ref(h.pool)?,
                        version: h.version,
                        fingerprint: h.fingerprint,
                    })
                })
                .collect::<Result<_, EdgeError>>()?,
            fleet_health: w.fleet_health,
        })
    }
}

// === Roster ===

impl From<&Endpoint> for pb::Endpoint {
    fn from(e: &Endpoint) -> Self {
        Self {
            ip: e.addr.ip().to_string(),
            port: e.addr.port().into(),
            pod: e.pod.clone().unwrap_or_default(),
            zone: e.zone.clone().unwrap_or_default(),
            ready: e.ready,
            serving: e.serving,
            terminating: e.terminating,
            weight: e.weight.max(1),
        }
    }
}

impl TryFrom<pb::Endpoint> for Endpoint {
    type Error = EdgeError;
    fn try_from(e: pb::Endpoint) -> Result<Self, EdgeError> {
        Ok(Self {
            addr: socket_addr(&e.ip, e.port)?,
            pod: non_empty(e.pod),
            zone: non_empty(e.zone),
            ready: e.ready,
            serving: e.serving,
            terminating: e.terminating,
            weight: e.weight.max(1),
        })
    }
}

impl TryFrom<&Roster> for pb::PoolRoster {
    type Error = serde_json::Error;
    fn try_from(r: &Roster) -> Result<Self, serde_json::Error> {
        Ok(pool_roster(r, serde_json::to_string(&r.policy)?))
    }
}

/// The wire form of `r` whose policy is already serialized (`serde_json::to_string(&r.policy)`).
fn pool_roster(r: &Roster, policy_json: String) -> pb::PoolRoster {
    pb::PoolRoster {
        endpoints: r.endpoints.iter().map(Into::into).collect(),
        policy_json,
        service: r.service.clone(),
    }
}

impl TryFrom<pb::PoolRoster> for Roster {
    type Error = EdgeError;
    fn try_from(r: pb::PoolRoster) -> Result<Self, EdgeError> {
        let policy: PoolPolicy = if r.policy_json.is_empty() {
            PoolPolicy::default()
        } else {
            let (policy, dropped) = crate::policy::from_json_lenient(&r.policy_json)
                .map_err(EdgeError::InvalidPolicy)?;
            if !dropped.is_empty() {
                tracing::warn!(
                    service = %r.service,
                    fields = ?dropped,
                    "roster policy has fields this version does not know (a newer controller?); ignoring them"
                );
            }
            policy
        };
        let mut endpoints = r
            .endpoints
            .into_iter()
            .map(Endpoint::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        endpoints.sort_by_key(|e| e.addr);
        endpoints.dedup_by_key(|e| e.addr);
        Ok(Self {
            endpoints,
            policy,
            service: r.service,
        })
    }
}

impl From<UnavailableReason> for pb::unavailable::Reason {
    fn from(r: UnavailableReason) -> Self {
        use pb::unavailable::Reason as R;
        match r {
            UnavailableReason::PoolNotFound => R::PoolNotFound,
            UnavailableReason::PoolDeleted => R::PoolDeleted,
            UnavailableReason::ServiceNotFound => R::ServiceNotFound,
            UnavailableReason::PortNotFound => R::PortNotFound,
            UnavailableReason::NotPermitted => R::NotPermitted,
            UnavailableReason::InvalidPolicy => R::InvalidPolicy,
            UnavailableReason::Other => R::Unspecified,
        }
    }
}

impl From<pb::unavailable::Reason> for UnavailableReason {
    fn from(r: pb::unavailable::Reason) -> Self {
        use pb::unavailable::Reason as R;
        match r {
            R::PoolNotFound => Self::PoolNotFound,
            R::PoolDeleted => Self::PoolDeleted,
            R::ServiceNotFound => Self::ServiceNotFound,
            R::PortNotFound => Self::PortNotFound,
            R::NotPermitted => Self::NotPermitted,
            R::InvalidPolicy => Self::InvalidPolicy,
            R::Unspecified => Self::Other,
        }
    }
}

impl TryFrom<&RosterUpdate> for pb::RosterUpdate {
    type Error = serde_json::Error;
    fn try_from(u: &RosterUpdate) -> Result<Self, serde_json::Error> {
        let policy_json = match &u.state {
            PoolState::Roster(r) => serde_json::to_string(&r.policy)?,
            PoolState::Unavailable { .. } => String::new(),
        };
        Ok(roster_update(u, policy_json))
    }
}

/// The wire form of `u` whose roster's policy is already serialized (`policy_json`, ignored
/// when `u` has no roster), for a caller that needed the JSON before (the controller
/// fingerprints it on publishing).
pub fn roster_update(u: &RosterUpdate, policy_json: String) -> pb::RosterUpdate {
    let state = match &u.state {
        PoolState::Roster(r) => pb::roster_update::State::Roster(pool_roster(r, policy_json)),
        PoolState::Unavailable { reason, message } => {
            pb::roster_update::State::Unavailable(pb::Unavailable {
                reason: pb::unavailable::Reason::from(*reason).into(),
                message: message.clone(),
            })
        }
    };
    pb::RosterUpdate {
        pool: Some((&u.pool).into()),
        version: u.version,
        state: Some(state),
        continued: false,
        fingerprint: Vec::new(),
        fleet: None,
    }
}

impl TryFrom<pb::RosterUpdate> for RosterUpdate {
    type Error = EdgeError;
    fn try_from(u: pb::RosterUpdate) -> Result<Self, EdgeError> {
        if u.continued {
            return Err(EdgeError::Unassembled);
        }
        let state = match u.state.ok_or(EdgeError::MissingField("state"))? {
            pb::roster_update::State::Roster(r) => PoolState::Roster(r.try_into()?),
            pb::roster_update::State::Delta(_) => return Err(EdgeError::Unassembled),
            pb::roster_update::State::Unavailable(un) => PoolState::Unavailable {
                // An unknown reason from a newer controller reads as `Other`.
                reason: pb::unavailable::Reason::try_from(un.reason)
                    .unwrap_or(pb::unavailable::Reason::Unspecified)
                    .into(),
                message: un.message,
            },
        };
        Ok(Self {
            pool: pool_ref(u.pool)?,
            version: u.version,
            state,
        })
    }
}

// === Health reports ===

impl From<EndpointState> for pb::EndpointState {
    fn from(s: EndpointState) -> Self {
        match s {
            EndpointState::Unknown => Self::Unknown,
            EndpointState::Healthy => Self::Healthy,
            EndpointState::Ejected => Self::Ejected,
            EndpointState::Probation => Self::Probation,
            EndpointState::Draining => Self::Draining,
        }
    }
}

impl From<pb::EndpointState> for EndpointState {
    fn from(s: pb::EndpointState) -> Self {
        match s {
            pb::EndpointState::Unspecified | pb::EndpointState::Unknown => Self::Unknown,
            pb::EndpointState::Healthy => Self::Healthy,
            pb::EndpointState::Ejected => Self::Ejected,
            pb::EndpointState::Probation => Self::Probation,
            pb::EndpointState::Draining => Self::Draining,
        }
    }
}

impl From<&EndpointHealth> for pb::EndpointHealth {
    fn from(e: &EndpointHealth) -> Self {
        Self {
            ip: e.addr.ip().to_string(),
            port: e.addr.port().into(),
            state: pb::EndpointState::from(e.state).into(),
            reason: e.reason.clone(),
            since_unix_ms: e.since_unix_ms,
            times_ejected: e.times_ejected,
            last_error: e.last_error.clone().unwrap_or_default(),
            ejection_suppressed: e.ejection_suppressed,
            probe: match e.probe {
                None => pb::ProbeVerdict::Unspecified,
                Some(ProbeVerdict::Passing) => pb::ProbeVerdict::Passing,
                Some(ProbeVerdict::Failing) => pb::ProbeVerdict::Failing,
            }
            .into(),
        }
    }
}

impl TryFrom<pb::EndpointHealth> for EndpointHealth {
    type Error = EdgeError;
    fn try_from(e: pb::EndpointHealth) -> Result<Self, EdgeError> {
        Ok(Self {
            addr: socket_addr(&e.ip, e.port)?,
            state: pb::EndpointState::try_from(e.state)
                .unwrap_or(pb::EndpointState::Unspecified)
                .into(),
            reason: e.reason,
            since_unix_ms: e.since_unix_ms,
            times_ejected: e.times_ejected,
            last_error: non_empty(e.last_error),
            ejection_suppressed: e.ejection_suppressed,
            // An unknown value is no verdict: it never counts as a vote.
            probe: match pb::ProbeVerdict::try_from(e.probe) {
                Ok(pb::ProbeVerdict::Passing) => Some(ProbeVerdict::Passing),
                Ok(pb::ProbeVerdict::Failing) => Some(ProbeVerdict::Failing),
                _ => None,
            },
        })
    }
}

impl From<&PoolHealth> for pb::PoolHealth {
    fn from(p: &PoolHealth) -> Self {
        Self {
            pool: Some((&p.pool).into()),
            roster_version: p.roster_version,
            panic: p.panic,
            endpoints: p.endpoints.iter().map(Into::into).collect(),
            refused_version: p.refused.as_ref().map_or(0, |r| r.version),
            refused_reason: p
                .refused
                .as_ref()
                .map(|r| r.reason.clone())
                .unwrap_or_default(),
            removed: p
                .removed
                .iter()
                .map(|a| pb::EndpointAddress {
                    ip: a.ip().to_string(),
                    port: a.port().into(),
                })
                .collect(),
            complete: p.complete,
            continued: p.continued,
        }
    }
}

impl TryFrom<pb::PoolHealth> for PoolHealth {
    type Error = EdgeError;
    fn try_from(p: pb::PoolHealth) -> Result<Self, EdgeError> {
        Ok(Self {
            pool: pool_ref(p.pool)?,
            roster_version: p.roster_version,
            panic: p.panic,
            endpoints: p
                .endpoints
                .into_iter()
                .map(TryInto::try_into)
                .collect::<Result<_, _>>()?,
            // Only a refusal of something newer than what it runs is news.
            refused: (p.refused_version > p.roster_version).then_some(Refusal {
                version: p.refused_version,
                reason: p.refused_reason,
            }),
            removed: p
                .removed
                .iter()
                .map(|a| socket_addr(&a.ip, a.port))
                .collect::<Result<_, _>>()?,
            complete: p.complete,
            continued: p.continued,
        })
    }
}

impl From<&HealthReport> for pb::HealthReport {
    fn from(r: &HealthReport) -> Self {
        Self {
            sidecar: r.sidecar.as_ref().map(Into::into),
            pools: r.pools.iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<pb::HealthReport> for HealthReport {
    type Error = EdgeError;
    fn try_from(r: pb::HealthReport) -> Result<Self, EdgeError> {
        Ok(Self {
            sidecar: r.sidecar.map(Into::into),
            pools: r
                .pools
                .into_iter()
                .map(TryInto::try_into)
                .collect::<Result<_, _>>()?,
        })
    }
}

// === Fleet health ===

fn addresses(addrs: &[SocketAddr]) -> Vec<pb::EndpointAddress> {
    addrs
        .iter()
        .map(|a| pb::EndpointAddress {
            ip: a.ip().to_string(),
            port: a.port().into(),
        })
        .collect()
}

fn parse_addresses(addrs: &[pb::EndpointAddress]) -> Result<Vec<SocketAddr>, EdgeError> {
    addrs.iter().map(|a| socket_addr(&a.ip, a.port)).collect()
}

impl From<&FleetHealth> for pb::FleetHealth {
    fn from(f: &FleetHealth) -> Self {
        Self {
            roster_version: f.roster_version,
            probe_all: f.probe_all,
            checkers: f.checkers,
            assigned: addresses(&f.assigned),
            unchecked: addresses(&f.unchecked),
            pending: addresses(&f.pending),
            failing: addresses(&f.failing),
        }
    }
}

impl TryFrom<&pb::FleetHealth> for FleetHealth {
    type Error = EdgeError;
    fn try_from(f: &pb::FleetHealth) -> Result<Self, EdgeError> {
        Ok(Self {
            roster_version: f.roster_version,
            probe_all: f.probe_all,
            checkers: f.checkers,
            assigned: parse_addresses(&f.assigned)?,
            unchecked: parse_addresses(&f.unchecked)?,
            pending: parse_addresses(&f.pending)?,
            failing: parse_addresses(&f.failing)?,
        })
    }
}

/// The `Watch` message that carries `fleet` for `pool` at its roster `version`, and nothing else.
pub fn fleet_update(pool: &PoolRef, version: u64, fleet: &FleetHealth) -> pb::RosterUpdate {
    pb::RosterUpdate {
        pool: Some(pool.into()),
        version,
        fleet: Some(Box::new(fleet.into())),
        ..pb::RosterUpdate::default()
    }
}

#[cfg(test)]
mod tests;
