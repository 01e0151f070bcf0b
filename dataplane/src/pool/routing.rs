//! The routing snapshot: what the request path routes on, published whole by the pool's owner
//! and read without a lock. Each carries a version (one more than the last one published, by the
//! one owner that publishes, so a newer snapshot can never be replaced by an older one) and the
//! pool's settings of that moment, so one load gives a consistent view.
//!
//! How one try picks from it: probation endpoints get their trickle first, then the balancer
//! chooses among the normal ones, and a terminating endpoint is used only when nothing else can
//! serve. Picking allocates nothing.

use std::net::SocketAddr;
use std::sync::Arc;

use rand::Rng;
use tokio::time::Instant;

use super::endpoint::Endpoint;
use super::settings::PoolSettings;
use crate::balance::{Candidate, Selector};
use crate::health::machine::RouteClass;
use crate::local_answer::{LocalAnswer, LocalReason};

/// What the request path routes on.
pub struct Routing {
    pub version: u64,
    pub settings: Arc<PoolSettings>,
    pub(super) name: Arc<str>,
    /// Picks among the normal endpoints (the sidecar's zone's, with zone-aware routing), and
    /// hands back the pool's endpoint itself: no lookup after the pick.
    pub(super) selector: Selector<Endpoint>,
    /// Zone-aware routing keeping first tries in the sidecar's zone: the selector over every
    /// zone, for retries. `None` otherwise.
    pub(super) spill: Option<Selector<Endpoint>>,
    pub(super) probation: Vec<Arc<Endpoint>>,
    pub(super) fallback: Vec<Arc<Endpoint>>,
    /// Endpoints in the roster (draining ones that left it not counted).
    pub(super) total: usize,
    /// Some endpoint is still ramping up (slow start): rebuild on every tick.
    pub(super) ramping: bool,
}

/// Why no endpoint could be picked: the answer, and a sentence for its body.
#[derive(Debug)]
pub struct NoEndpoint {
    pub answer: LocalAnswer,
    pub message: String,
}

impl Routing {
    /// Pick an endpoint for a try, never one in `exclude` (tried already by this request).
    pub fn pick(
        &self,
        hash_key: Option<&[u8]>,
        exclude: &[SocketAddr],
        now: Instant,
    ) -> Result<Arc<Endpoint>, NoEndpoint> {
        let share = self.settings.probation_share;
        if !self.probation.is_empty()
            && rand::rng().random_bool(share.clamp(0.0, 1.0))
            && let Some(endpoint) = choose(&self.probation, exclude)
        {
            return Ok(endpoint);
        }
        // A first try stays in the sidecar's zone (when zone-aware routing holds it there); a
        // retry may go anywhere: the failure may be the zone's.
        let candidate = match &self.spill {
            Some(spill) if !exclude.is_empty() => spill.pick(hash_key, exclude, now),
            _ => self.selector.pick(hash_key, exclude, now),
        };
        if let Some(candidate) = candidate {
            return Ok(Arc::clone(&candidate.endpoint));
        }
        if let Some(endpoint) =
            choose(&self.probation, exclude).or_else(|| choose(&self.fallback, exclude))
        {
            return Ok(endpoint);
        }
        Err(self.no_endpoint(exclude))
    }

    /// Whether `addr` is routed at all (normal, on probation, or as a last resort).
    pub fn routes_to(&self, addr: SocketAddr) -> bool {
        self.normal().iter().any(|c| c.addr() == addr)
            || [&self.probation, &self.fallback]
                .iter()
                .any(|list| list.iter().any(|e| e.addr() == addr))
    }

    /// Whether an endpoint other than `exclude` and `also` could take a retry.
    pub fn has_untried(&self, exclude: &[SocketAddr], also: SocketAddr) -> bool {
        let untried = |addr: &SocketAddr| *addr != also && !exclude.contains(addr);
        self.normal().iter().any(|c| untried(&c.addr()))
            || self.probation.iter().any(|e| untried(&e.addr()))
            || self.fallback.iter().any(|e| untried(&e.addr()))
    }

    /// Every routed endpoint and how (for tests and the owner's checks).
    pub fn routed(&self) -> Vec<(SocketAddr, RouteClass)> {
        let mut routed: Vec<(SocketAddr, RouteClass)> = self
            .normal()
            .iter()
            .map(|c| (c.addr(), RouteClass::Normal))
            .chain(
                self.probation
                    .iter()
                    .map(|e| (e.addr(), RouteClass::Probation)),
            )
            .chain(
                self.fallback
                    .iter()
                    .map(|e| (e.addr(), RouteClass::TerminatingFallback)),
            )
            .collect();
        routed.sort_by_key(|(addr, _)| *addr);
        routed
    }

    /// Every normal endpoint, in address order: the candidates of the selector over every zone.
    fn normal(&self) -> &[Candidate<Endpoint>] {
        self.spill.as_ref().unwrap_or(&self.selector).candidates()
    }

    fn no_endpoint(&self, exclude: &[SocketAddr]) -> NoEndpoint {
        let (reason, message) = if self.total == 0 {
            (
                LocalReason::NoEndpoints,
                format!("pool {} has no endpoints", self.name),
            )
        } else if !exclude.is_empty() {
            (
                LocalReason::EndpointsExhausted,
                format!(
                    "pool {}: every eligible endpoint was tried and failed",
                    self.name
                ),
            )
        } else {
            (
                LocalReason::NoHealthyEndpoints,
                format!(
                    "pool {}: none of its {} endpoints is eligible (ejected or draining)",
                    self.name, self.total
                ),
            )
        };
        NoEndpoint {
            answer: LocalAnswer {
                status: 503,
                reason,
            },
            message,
        }
    }
}

/// A random endpoint of `list` not in `exclude`, without allocating: a random start, then the
/// first allowed one from there.
fn choose(list: &[Arc<Endpoint>], exclude: &[SocketAddr]) -> Option<Arc<Endpoint>> {
    if list.is_empty() {
        return None;
    }
    let start = rand::rng().random_range(0..list.len());
    (0..list.len())
        .map(|k| &list[(start + k) % list.len()])
        .find(|e| !exclude.contains(&e.addr()))
        .cloned()
}
