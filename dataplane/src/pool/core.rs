//! The state one pool's owner keeps, and every change to it, synchronously: rosters, request
//! verdicts, probe results and ticks go in; routing snapshots come out. Only the owner task
//! (`owner.rs`) holds a `Core`, so changes happen one at a time, in the order they arrived, and
//! each snapshot is built from the state after the change it follows: no snapshot can be lost to
//! a race, and an endpoint that returns while its drain finishes is never removed after its
//! return. No lock is taken anywhere in here.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::time::Instant;

use super::endpoint::{Endpoint, PoolSeries};
use super::endpoint_set::EndpointSet;
use super::routing::Routing;
use super::settings::{PoolSettings, Tuning};
use super::view::{self, PoolView};
use crate::balance::{Candidate, Selector, ShareTracker};
use crate::config::EndpointConfig;
use crate::drain::{self, EndpointDrains};
use crate::health::machine::{Event, HealthSettings, PoolHealth, RouteClass, State};
use crate::metrics::Metrics;
use crate::outcome::Verdict;
use crate::upstream::{IDLE_TIMEOUT, IdleConnections};

pub(super) struct Core {
    name: Arc<str>,
    settings: Arc<PoolSettings>,
    tuning: Tuning,
    health: PoolHealth,
    endpoints: EndpointSet,
    /// Idle HTTP/1.1 connections of every endpoint, under `Tuning::max_idle_connections`.
    idle: Arc<IdleConnections>,
    drains: EndpointDrains,
    share: Arc<ShareTracker>,
    metrics: Arc<Metrics>,
    series: Arc<PoolSeries>,
    /// Every zone the pool's endpoints have named, each held once.
    zones: Vec<Arc<str>>,
    /// Version of the last snapshot built.
    version: u64,
    /// Something routing depends on changed since the last snapshot.
    dirty: bool,
    /// The last snapshot has an endpoint ramping up: every tick changes its weight.
    ramping: bool,
    /// The last snapshot kept new requests in the sidecar's zone.
    in_zone: bool,
}

impl Core {
    pub(super) fn new(
        name: Arc<str>,
        settings: Arc<PoolSettings>,
        tuning: Tuning,
        metrics: Arc<Metrics>,
        now: Instant,
    ) -> Self {
        Self {
            health: PoolHealth::new(HealthSettings::from_policy(&settings.policy)),
            idle: IdleConnections::counted(
                tuning.max_idle_connections,
                Some(metrics.idle_evictions.with_label_values(&[&*name])),
                tuning.keepalive,
            ),
            series: PoolSeries::new(&name, &metrics),
            zones: Vec::new(),
            name,
            settings,
            tuning,
            endpoints: EndpointSet::default(),
            drains: EndpointDrains::default(),
            share: Arc::new(ShareTracker::new(now)),
            metrics,
            version: 0,
            dirty: true,
            ramping: false,
            in_zone: false,
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn settings(&self) -> &Arc<PoolSettings> {
        &self.settings
    }

    /// Every endpoint the pool holds, draining ones included (each is probed while it stays).
    pub(super) fn addresses(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.endpoints.keys().copied()
    }

    /// Apply a roster and policy: new endpoints start Unknown, endpoints that stay keep their
    /// health, endpoints that left drain. Returns the new ones (to be probed).
    pub(super) fn update(
        &mut self,
        roster: &[EndpointConfig],
        settings: Arc<PoolSettings>,
        now: Instant,
    ) -> Vec<SocketAddr> {
        self.health
            .set_settings(HealthSettings::from_policy(&settings.policy));
        self.settings = settings;
        let http2 = self.settings.http2;
        let mut added = Vec::new();
        for config in roster {
            let zone = config.zone.as_deref().map(|z| intern(&mut self.zones, z));
            let new = self.endpoints.add_with(config.address, || {
                Endpoint::new(
                    &self.series,
                    config,
                    zone,
                    http2,
                    &self.tuning,
                    &self.idle,
                    now,
                )
            });
            if new {
                added.push(config.address);
            }
            let Some(endpoint) = self.endpoints.get(&config.address) else {
                continue;
            };
            endpoint.upstream.set_http2(http2);
            endpoint.load.set_weight(config.weight);
            if self.drains.cancel(config.address) {
                endpoint.upstream.undrain();
            }
        }
        let listed: HashSet<SocketAddr> = roster.iter().map(|e| e.address).collect();
        for addr in self.endpoints.keys().filter(|a| !listed.contains(a)) {
            self.drains.start(*addr, now);
        }
        // A zone no endpoint names any more is let go (a pool's zone names only change if its
        // endpoints' topology labels do).
        self.zones.retain(|zone| Arc::strong_count(zone) > 1);
        let entries: Vec<(SocketAddr, bool)> =
            roster.iter().map(|e| (e.address, e.terminating)).collect();
        let events = self.health.apply_roster(&entries, now);
        self.apply(events);
        self.dirty = true;
        added
    }

    /// One request's verdict on its endpoint.
    pub(super) fn record_request(
        &mut self,
        addr: SocketAddr,
        verdict: Verdict,
        detail: &str,
        now: Instant,
    ) {
        let events = self.health.record_request(addr, verdict, detail, now);
        self.apply(events);
    }

    /// One active probe result.
    pub(super) fn record_probe(&mut self, addr: SocketAddr, ok: bool, detail: &str, now: Instant) {
        let result = if ok { "success" } else { "failure" };
        self.metrics
            .probes
            .with_label_values(&[&*self.name, &addr.to_string(), result])
            .inc();
        let events = self.health.record_probe(addr, ok, detail, now);
        self.apply(events);
    }

    /// The fleet's verdict on an endpoint this sidecar does not probe (fleet health), as probe
    /// evidence.
    pub(super) fn record_fleet_verdict(&mut self, addr: SocketAddr, passing: bool, now: Instant) {
        let (label, detail) = if passing {
            ("passing", "")
        } else {
            ("failing", "the fleet's checkers: the health check fails")
        };
        self.metrics
            .fleet_verdicts
            .with_label_values(&[&*self.name, label])
            .inc();
        let events = self.health.record_fleet_verdict(addr, passing, detail, now);
        self.apply(events);
    }

    /// Count one probe this sidecar made itself, by why it probes the endpoint.
    pub(super) fn count_fleet_probe(&self, role: super::fleet::Role) {
        self.metrics
            .fleet_probes
            .with_label_values(&[&*self.name, role.label()])
            .inc();
    }

    /// Whether the pool probes everything itself for want of the controller (fleet health).
    pub(super) fn set_fleet_fallback(&self, on: bool) {
        self.metrics
            .fleet_fallback
            .with_label_values(&[&*self.name])
            .set(i64::from(on));
    }

    /// This sidecar stopped probing `addr` itself: what its probes said no longer stands.
    pub(super) fn forget_own_probes(&mut self, addr: SocketAddr) {
        self.health.forget_own_probes(addr);
        self.dirty = true;
    }

    /// Expiries, slow start, panic, idle connections, and finished drains. Returns the
    /// endpoints forgotten (their probes stop).
    pub(super) fn tick(&mut self, now: Instant) -> Vec<SocketAddr> {
        let events = self.health.tick(now);
        self.apply(events);
        if self.ramping {
            self.dirty = true;
        }
        self.idle.expire(IDLE_TIMEOUT, now);
        for endpoint in self.endpoints.values() {
            endpoint.upstream.expire_idle(IDLE_TIMEOUT, now);
        }
        let endpoints = &self.endpoints;
        let finished = self
            .drains
            .finished(now, self.settings.drain_timeout, |addr| {
                endpoints.get(&addr).map_or(0, |e| e.load.outstanding())
            });
        let mut forgotten = Vec::new();
        for done in finished {
            let Some(endpoint) = self.endpoints.remove(&done.addr) else {
                continue;
            };
            if done.cut > 0 {
                tracing::warn!(pool = %self.name, endpoint = %done.addr, in_flight = done.cut, "drain timeout: closing connections with requests in flight");
            }
            drain::close(&endpoint.upstream);
            self.health.forget(done.addr);
            self.metrics
                .forget_endpoint(&self.name, &done.addr.to_string());
            tracing::info!(pool = %self.name, endpoint = %done.addr, "endpoint drained and removed");
            forgotten.push(done.addr);
            self.dirty = true;
        }
        forgotten
    }

    /// The sidecar's zone as the controller told it (a configured one is never replaced:
    /// `Runtime::adopt_zone` decides).
    pub(super) fn set_local_zone(&mut self, zone: Arc<str>) {
        if self.tuning.local_zone.as_deref() != Some(&zone) {
            self.tuning.local_zone = Some(zone);
            self.dirty = true;
        }
    }

    /// A new snapshot when routing changed since the last one.
    pub(super) fn snapshot(&mut self, now: Instant) -> Option<Routing> {
        self.dirty.then(|| self.next_snapshot(now))
    }

    /// The next snapshot, changed or not.
    pub(super) fn next_snapshot(&mut self, now: Instant) -> Routing {
        self.dirty = false;
        self.version += 1;
        let routing = self.build(now);
        self.ramping = routing.ramping;
        let in_zone = routing.spill.is_some();
        if in_zone != self.in_zone && self.settings.policy.load_balancer.zone_aware.enabled {
            let zone = self.tuning.local_zone.as_deref().unwrap_or("");
            if in_zone {
                tracing::info!(pool = %self.name, %zone, "zone-aware: routing within the sidecar's zone");
            } else {
                tracing::warn!(pool = %self.name, %zone, "zone-aware: too few eligible endpoints in the sidecar's zone, spilling over to every zone");
            }
        }
        self.in_zone = in_zone;
        routing
    }

    /// The pool as `/endpoints` shows it.
    pub(super) fn view(&self, now: Instant) -> PoolView {
        let reports = self.health.reports(now);
        view::build(
            &self.name,
            self.health.panic(),
            reports,
            &self.endpoints,
            now,
        )
    }

    /// The state the health machine says `addr` is in.
    #[cfg(test)]
    pub(super) fn state(&self, addr: SocketAddr) -> Option<State> {
        self.health.state(addr)
    }

    /// Who the health machine routes now, and how (what the next snapshot must say).
    #[cfg(test)]
    pub(super) fn expected_routes(&self, now: Instant) -> Vec<(SocketAddr, RouteClass)> {
        self.health
            .routes(now)
            .endpoints
            .iter()
            .filter(|r| self.endpoints.contains_key(&r.addr))
            .map(|r| (r.addr, r.class))
            .collect()
    }

    /// Close every connection and forget the pool's series (the pool is going away).
    pub(super) fn shutdown(&mut self) {
        for endpoint in self.endpoints.values() {
            drain::close(&endpoint.upstream);
        }
        for addr in self.endpoints.keys() {
            self.metrics.forget_endpoint(&self.name, &addr.to_string());
        }
        self.metrics.forget_pool(&self.name);
    }

    /// Log and count what the health machine decided, and do what it means for connections.
    fn apply(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        self.dirty = true;
        for event in &events {
            view::log_event(&self.name, event, &self.metrics);
            let Event::Transition {
                endpoint, from, to, ..
            } = event
            else {
                continue;
            };
            let Some(ep) = self.endpoints.get(endpoint) else {
                continue;
            };
            match (from, to) {
                (_, State::Draining) => drain::begin(&ep.upstream),
                (State::Draining, _) => ep.upstream.undrain(),
                // A connection that went dark must not outlive the ejection it caused.
                (_, State::Ejected) => ep.upstream.retire(),
                _ => {}
            }
        }
    }

    /// Zone-aware routing: the candidates in the sidecar's zone when the pool asks for it and
    /// enough of that zone is eligible (`loadBalancer.zoneAware.minHealthy` of its routed
    /// endpoints, and at least one); `None` to route across every zone.
    fn local_candidates(
        &self,
        candidates: &[Candidate<Endpoint>],
    ) -> Option<Vec<Candidate<Endpoint>>> {
        let zone_aware = &self.settings.policy.load_balancer.zone_aware;
        let local = self.tuning.local_zone.as_deref()?;
        if !zone_aware.enabled {
            return None;
        }
        let in_zone = |addr: &SocketAddr| {
            self.endpoints
                .get(addr)
                .is_some_and(|e| e.zone.as_deref() == Some(local))
        };
        // Every endpoint of the zone that is not leaving: routed, ejected or on probation.
        let zone_total = self
            .endpoints
            .keys()
            .filter(|addr| in_zone(addr) && self.health.state(**addr) != Some(State::Draining))
            .count();
        let eligible: Vec<Candidate<Endpoint>> = candidates
            .iter()
            .filter(|c| c.endpoint.zone.as_deref() == Some(local))
            .cloned()
            .collect();
        let enough = !eligible.is_empty()
            && eligible.len() as f64 >= zone_aware.min_healthy.fraction() * zone_total as f64;
        enough.then_some(eligible)
    }

    fn build(&self, now: Instant) -> Routing {
        let routes = self.health.routes(now);
        // Sized once: the selector keeps this vector, spare capacity and all.
        let mut candidates = Vec::with_capacity(routes.endpoints.len());
        let mut probation = Vec::new();
        let mut fallback = Vec::new();
        for route in &routes.endpoints {
            let Some(endpoint) = self.endpoints.get(&route.addr) else {
                continue;
            };
            match route.class {
                RouteClass::Normal => {
                    candidates.push(Candidate {
                        endpoint: Arc::clone(endpoint),
                        weight_factor: route.weight_factor,
                    });
                }
                RouteClass::Probation => probation.push(Arc::clone(endpoint)),
                RouteClass::TerminatingFallback => fallback.push(Arc::clone(endpoint)),
            }
        }
        // The health machine lists routes in address order already (`Routing::normal` says so).
        debug_assert!(candidates.windows(2).all(|w| w[0].addr() < w[1].addr()));
        let ramping = candidates.iter().any(|c| c.weight_factor < 1.0);
        let lb = &self.settings.policy.load_balancer;
        let (selector, spill) = match self.local_candidates(&candidates) {
            Some(local) => (
                Selector::new(lb, local, Arc::clone(&self.share)),
                Some(Selector::new(lb, candidates, Arc::clone(&self.share))),
            ),
            None => (Selector::new(lb, candidates, Arc::clone(&self.share)), None),
        };
        Routing {
            version: self.version,
            settings: Arc::clone(&self.settings),
            name: Arc::clone(&self.name),
            selector,
            spill,
            probation,
            fallback,
            total: self.endpoints.len().saturating_sub(self.drains.len()),
            ramping,
        }
    }
}

/// The pool's one copy of `zone`, made the first time an endpoint names it.
fn intern(zones: &mut Vec<Arc<str>>, zone: &str) -> Arc<str> {
    if let Some(known) = zones.iter().find(|z| &***z == zone) {
        return Arc::clone(known);
    }
    let new: Arc<str> = Arc::from(zone);
    zones.push(Arc::clone(&new));
    new
}

#[cfg(test)]
mod tests;
