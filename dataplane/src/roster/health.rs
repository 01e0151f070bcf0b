//! What a health report says and when one is due, as pure functions of the pools' views. A
//! pool is re-reported when a fact that matters changed (state, reason, since, times ejected,
//! suppression, its own probes' verdict, panic, roster version), never for counters that tick
//! with every probe. The first report of a stream names the sidecar and carries every pool;
//! later ones carry only the pools that changed; with nothing to say for `heartbeat`, an empty report keeps the stream warm.
//! On a `ReportChanges` stream a pool goes complete (in small parts) the first time and when
//! the controller asks, and as the entries that changed after that.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rollcall_api::roster::{
    EndpointHealth, HealthReport, PoolHealth, ProbeVerdict, Refusal, SidecarId,
};
use tokio::time::Instant;

use super::{Running, Versions};
use crate::health::machine::{Reason, State, wall_clock};
use crate::pool::{EndpointView, PoolView};

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
    probe: Option<ProbeVerdict>,
}

/// Endpoint entries per message of a complete report in parts (`ReportChanges`): the same
/// bound as a roster's parts, so no stream's buffers grow with the pool.
pub const PART_ENTRIES: usize = rollcall_api::delta::PART_ENDPOINTS;

/// What has been sent on the current stream.
#[derive(Debug)]
pub(super) struct Sent {
    sidecar: SidecarId,
    identified: bool,
    /// `ReportChanges`: a pool already reported is reported again as its changes only.
    changes: bool,
    pools: HashMap<String, HealthFacts>,
    last: Option<Instant>,
}

/// Reports ready to send, in order, and what to remember once they are all sent.
pub(super) struct Due {
    pub reports: Vec<HealthReport>,
    /// Pools they carry.
    pub pools: usize,
    facts: Vec<(String, HealthFacts)>,
}

// === impl HealthFacts ===

impl HealthFacts {
    pub fn of(running: &Running, view: &PoolView) -> Self {
        Self {
            version: running.version,
            refused: running.refused.clone(),
            panic: view.panic,
            endpoints: view.endpoints.iter().map(EndpointFacts::of).collect(),
        }
    }
}

impl EndpointFacts {
    fn of(e: &EndpointView) -> Self {
        Self {
            addr: e.health.address,
            state: e.health.state,
            reason: e.health.reason,
            since: e.health.since,
            times_ejected: e.health.ejection_multiplier,
            suppressed: e.health.ejection_suppressed,
            probe: e.health.probe_verdict,
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
        .map(|e| endpoint_health(e, now, wall_now))
        .collect();
    health_of(running, view, endpoints, Vec::new())
}

/// A pool's report with `endpoints` as its entries and `removed` as the addresses that left.
fn health_of(
    running: &Running,
    view: &PoolView,
    endpoints: Vec<EndpointHealth>,
    removed: Vec<SocketAddr>,
) -> PoolHealth {
    PoolHealth {
        pool: running.pool.clone(),
        roster_version: running.version,
        panic: view.panic,
        endpoints,
        refused: running.refused.clone(),
        removed,
        complete: false,
        continued: false,
    }
}

fn endpoint_health(e: &EndpointView, now: Instant, wall_now: SystemTime) -> EndpointHealth {
    EndpointHealth {
        addr: e.health.address,
        state: e.health.state,
        reason: e.health.reason.to_string(),
        since_unix_ms: unix_ms(wall_clock(e.health.since, now, wall_now)),
        times_ejected: e.health.ejection_multiplier,
        last_error: e.health.last_error.clone(),
        ejection_suppressed: e.health.ejection_suppressed,
        probe: e.health.probe_verdict,
    }
}

/// What changed in a pool since `sent` (`ReportChanges`): the entries whose facts differ or
/// are new, and the addresses no longer in the view.
fn pool_changes(
    running: &Running,
    view: &PoolView,
    sent: &HealthFacts,
    now: Instant,
    wall_now: SystemTime,
) -> PoolHealth {
    let before: HashMap<SocketAddr, &EndpointFacts> =
        sent.endpoints.iter().map(|e| (e.addr, e)).collect();
    let mut present = std::collections::HashSet::with_capacity(view.endpoints.len());
    let mut endpoints = Vec::new();
    for e in &view.endpoints {
        present.insert(e.health.address);
        if before.get(&e.health.address).copied() != Some(&EndpointFacts::of(e)) {
            endpoints.push(endpoint_health(e, now, wall_now));
        }
    }
    let removed = sent
        .endpoints
        .iter()
        .map(|e| e.addr)
        .filter(|a| !present.contains(a))
        .collect();
    health_of(running, view, endpoints, removed)
}

/// A complete report as `ReportChanges` sends it: parts of at most [`PART_ENTRIES`] entries,
/// the first `complete`, all but the last `continued`.
fn in_parts(health: PoolHealth) -> Vec<PoolHealth> {
    let mut entries = health.endpoints;
    let head = PoolHealth {
        endpoints: Vec::new(),
        ..health
    };
    let mut parts = Vec::new();
    loop {
        let rest = entries.split_off(entries.len().min(PART_ENTRIES));
        parts.push(PoolHealth {
            endpoints: entries,
            complete: parts.is_empty(),
            continued: !rest.is_empty(),
            ..head.clone()
        });
        if rest.is_empty() {
            return parts;
        }
        entries = rest;
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

// === impl Sent ===

impl Sent {
    /// A fresh stream: nothing sent yet. With `changes` (a `ReportChanges` stream) a pool is
    /// reported complete, in parts, the first time and as its changes after that.
    pub fn new(sidecar: SidecarId, changes: bool) -> Self {
        Self {
            sidecar,
            identified: false,
            changes,
            pools: HashMap::new(),
            last: None,
        }
    }

    /// The controller asked for a complete report of `pool`: the next one is.
    pub fn forget(&mut self, pool: &str) {
        self.pools.remove(pool);
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
            let before = self.pools.get(&view.name);
            if before == Some(&current) {
                continue;
            }
            match before {
                Some(sent) if self.changes => {
                    pools.push(pool_changes(running, view, sent, now, wall_now));
                }
                _ => pools.push(pool_health(running, view, now, wall_now)),
            }
            facts.push((view.name.clone(), current));
        }
        let heartbeat_due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= heartbeat);
        if pools.is_empty() && !heartbeat_due {
            return None;
        }
        let sidecar = (!self.identified).then(|| self.sidecar.clone());
        let count = pools.len();
        let reports = if self.changes {
            // Complete reports in parts, one part per message; changes are small and go
            // together in the first.
            let (complete, changes): (Vec<_>, Vec<_>) = pools
                .into_iter()
                .zip(&facts)
                .partition(|(_, (name, _))| !self.pools.contains_key(name));
            let mut reports = Vec::new();
            if sidecar.is_some() || !changes.is_empty() || complete.is_empty() {
                reports.push(HealthReport {
                    sidecar,
                    pools: changes.into_iter().map(|(p, _)| p).collect(),
                });
            }
            for (health, _) in complete {
                reports.extend(in_parts(health).into_iter().map(|part| HealthReport {
                    sidecar: None,
                    pools: vec![part],
                }));
            }
            reports
        } else {
            vec![HealthReport { sidecar, pools }]
        };
        Some(Due {
            reports,
            pools: count,
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
