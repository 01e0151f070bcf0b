//! What a health report says and when one is due, as pure functions of the pools' views. A
//! pool is re-reported when a fact that matters changed (state, reason, since, times ejected,
//! suppression, panic, roster version), never for counters that tick with every probe. The first
//! report of a stream names the sidecar and carries every pool; later ones carry only the pools
//! that changed; with nothing to say for `heartbeat`, an empty report keeps the stream warm.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rollcall_api::roster::{
    EndpointHealth, EndpointState, HealthReport, PoolHealth, Refusal, SidecarId,
};
use tokio::time::Instant;

use super::{Running, Versions};
use crate::health::machine::{Reason, State, wall_clock};
use crate::pool::PoolView;

/// The facts of one pool whose change is worth a report.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthFacts {
    version: u64,
    refused: Option<Refusal>,
    panic: bool,
    endpoints: Vec<EndpointFacts>,
}

#[derive(Clone, Debug, PartialEq)]
struct EndpointFacts {
    addr: SocketAddr,
    state: State,
    reason: Reason,
    since: Instant,
    times_ejected: u32,
    suppressed: bool,
}

/// What has been sent on the current stream.
#[derive(Debug)]
pub(super) struct Sent {
    sidecar: SidecarId,
    identified: bool,
    pools: HashMap<String, HealthFacts>,
    last: Option<Instant>,
}

/// A report ready to send, and what to remember once it is sent.
pub(super) struct Due {
    pub report: HealthReport,
    facts: Vec<(String, HealthFacts)>,
}

// === impl HealthFacts ===

impl HealthFacts {
    pub fn of(running: &Running, view: &PoolView) -> Self {
        Self {
            version: running.version,
            refused: running.refused.clone(),
            panic: view.panic,
            endpoints: view
                .endpoints
                .iter()
                .map(|e| EndpointFacts {
                    addr: e.health.address,
                    state: e.health.state,
                    reason: e.health.reason,
                    since: e.health.since,
                    times_ejected: e.health.ejection_multiplier,
                    suppressed: e.health.ejection_suppressed,
                })
                .collect(),
        }
    }
}

/// A pool's complete health as the protocol carries it.
pub fn pool_health(
    running: &Running,
    view: &PoolView,
    now: Instant,
    wall_now: SystemTime,
) -> PoolHealth {
    let endpoints = view
        .endpoints
        .iter()
        .map(|e| EndpointHealth {
            addr: e.health.address,
            state: endpoint_state(e.health.state),
            reason: e.health.reason.to_string(),
            since_unix_ms: unix_ms(wall_clock(e.health.since, now, wall_now)),
            times_ejected: e.health.ejection_multiplier,
            last_error: e.health.last_error.clone(),
            ejection_suppressed: e.health.ejection_suppressed,
        })
        .collect();
    PoolHealth {
        pool: running.pool.clone(),
        roster_version: running.version,
        panic: view.panic,
        endpoints,
        refused: running.refused.clone(),
    }
}

fn endpoint_state(s: State) -> EndpointState {
    match s {
        State::Unknown => EndpointState::Unknown,
        State::Healthy => EndpointState::Healthy,
        State::Ejected => EndpointState::Ejected,
        State::Probation => EndpointState::Probation,
        State::Draining => EndpointState::Draining,
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

// === impl Sent ===

impl Sent {
    /// A fresh stream: nothing sent yet.
    pub fn new(sidecar: SidecarId) -> Self {
        Self {
            sidecar,
            identified: false,
            pools: HashMap::new(),
            last: None,
        }
    }

    /// The report due now, if any: the pools whose facts changed since they were last sent
    /// (every pool on a fresh stream), else a heartbeat once `heartbeat` has passed. Pools
    /// that have had no roster message yet are not reported.
    pub fn due(
        &self,
        views: &[PoolView],
        versions: &Versions,
        heartbeat: Duration,
        now: Instant,
        wall_now: SystemTime,
    ) -> Option<Due> {
        let mut facts = Vec::new();
        let mut pools = Vec::new();
        for view in views {
            let Some(running) = versions.get(&view.name) else {
                continue;
            };
            let current = HealthFacts::of(running, view);
            if self.pools.get(&view.name) != Some(&current) {
                pools.push(pool_health(running, view, now, wall_now));
                facts.push((view.name.clone(), current));
            }
        }
        let heartbeat_due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= heartbeat);
        if pools.is_empty() && !heartbeat_due {
            return None;
        }
        let sidecar = (!self.identified).then(|| self.sidecar.clone());
        Some(Due {
            report: HealthReport { sidecar, pools },
            facts,
        })
    }

    /// `due` was handed to the stream.
    pub fn sent(&mut self, due: Due, now: Instant) {
        self.identified = true;
        self.pools.extend(due.facts);
        self.last = Some(now);
    }
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
