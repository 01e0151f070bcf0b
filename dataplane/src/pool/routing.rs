//! The routing snapshot the request path reads without a lock, how it is rebuilt from the
//! health machine's routes, and how one try picks from it: probation endpoints get their
//! trickle first, then the balancer chooses among the normal ones, and a terminating endpoint is
//! used only when nothing else can serve.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use rand::Rng;
use tokio::time::Instant;

use super::{Endpoint, NoEndpoint, Pool};
use crate::balance::{Candidate, Selector};
use crate::health::machine::RouteClass;

/// What the request path routes on; rebuilt after every health change.
pub(super) struct Routing {
    pub(super) selector: Selector,
    pub(super) by_addr: HashMap<SocketAddr, Arc<Endpoint>>,
    pub(super) probation: Vec<Arc<Endpoint>>,
    pub(super) fallback: Vec<Arc<Endpoint>>,
    pub(super) total: usize,
    /// Some endpoint is still ramping up (slow start): rebuild on every tick.
    pub(super) ramping: bool,
}

impl Pool {
    /// Pick an endpoint for a try, never one in `exclude` while another can serve.
    pub fn pick(
        &self,
        hash_key: Option<&[u8]>,
        exclude: &[SocketAddr],
    ) -> Result<Arc<Endpoint>, NoEndpoint> {
        let routing = self.routing.load();
        let now = Instant::now();
        let untried = |e: &&Arc<Endpoint>| !exclude.contains(&e.addr);
        let share = self.settings.load().probation_share;
        if !routing.probation.is_empty()
            && rand::rng().random_bool(share.clamp(0.0, 1.0))
            && let Some(endpoint) = choose(&routing.probation, untried)
        {
            return Ok(endpoint);
        }
        if let Some(candidate) = routing.selector.pick(hash_key, exclude, now)
            && let Some(endpoint) = routing.by_addr.get(&candidate.addr)
        {
            return Ok(Arc::clone(endpoint));
        }
        if let Some(endpoint) =
            choose(&routing.probation, untried).or_else(|| choose(&routing.fallback, untried))
        {
            return Ok(endpoint);
        }
        Err(if routing.total == 0 {
            NoEndpoint {
                reason: "no-endpoints",
                message: format!("pool {} has no endpoints", self.name),
            }
        } else if !exclude.is_empty() {
            NoEndpoint {
                reason: "endpoints-exhausted",
                message: format!(
                    "pool {}: every eligible endpoint was tried and failed",
                    self.name
                ),
            }
        } else {
            NoEndpoint {
                reason: "no-healthy-endpoints",
                message: format!(
                    "pool {}: none of its {} endpoints is eligible (ejected or draining)",
                    self.name, routing.total
                ),
            }
        })
    }

    /// Build a new routing snapshot from the health machine's routes.
    pub(super) fn rebuild(&self, now: Instant) {
        let routes = self.health.lock().routes(now);
        let endpoints = self.endpoints.read();
        let mut candidates = Vec::new();
        let mut by_addr = HashMap::new();
        let mut probation = Vec::new();
        let mut fallback = Vec::new();
        for route in &routes.endpoints {
            let Some(endpoint) = endpoints.get(&route.addr) else {
                continue;
            };
            match route.class {
                RouteClass::Normal => {
                    candidates.push(Candidate {
                        addr: route.addr,
                        load: Arc::clone(&endpoint.load),
                        weight_factor: route.weight_factor,
                    });
                    by_addr.insert(route.addr, Arc::clone(endpoint));
                }
                RouteClass::Probation => probation.push(Arc::clone(endpoint)),
                RouteClass::TerminatingFallback => fallback.push(Arc::clone(endpoint)),
            }
        }
        let settings = self.settings.load();
        let ramping = candidates.iter().any(|c| c.weight_factor < 1.0);
        let routing = Routing {
            ramping,
            selector: Selector::new(
                &settings.policy.load_balancer,
                candidates,
                Arc::clone(&self.share),
            ),
            by_addr,
            probation,
            fallback,
            total: endpoints
                .values()
                .filter(|e| e.removed_at.lock().is_none())
                .count(),
        };
        self.routing.store(Arc::new(routing));
    }
}

fn choose(list: &[Arc<Endpoint>], keep: impl Fn(&&Arc<Endpoint>) -> bool) -> Option<Arc<Endpoint>> {
    let eligible: Vec<&Arc<Endpoint>> = list.iter().filter(keep).collect();
    if eligible.is_empty() {
        return None;
    }
    let i = rand::rng().random_range(0..eligible.len());
    Some(Arc::clone(eligible[i]))
}
