//! The selector: which eligible endpoint gets the next request. One is built for each candidate
//! set (every roster or health change) and swapped in whole by the pool, as in Pingora; picking
//! never allocates and touches only atomics.
//!
//! Costs, compared between two random candidates (power of two choices), lower wins:
//! - `LeastRequest`: `(outstanding + 1) / weight × penalty`;
//! - `PeakEwma`: `latency × (outstanding + 1) / weight × penalty`, where an endpoint with no
//!   successful sample yet borrows the other candidate's latency, so it competes on load alone
//!   and a new endpoint is tried at once;
//! - `penalty = 1 + 10 × (error rate − 5%)` above a 5% noise floor: an endpoint failing 20% of
//!   requests looks 2.5 times as busy, so failing fast never makes it look idle, while the odd
//!   application error does not lose it every tie at low concurrency;
//! - when both have as many requests in flight (at low concurrency, usually none), the lower
//!   cost does not simply win; a coin weighted by the inverse costs decides. So an endpoint at
//!   10% slow-start weight, one failing 20%, or one answering 2.5 times slower than its peers
//!   gets a share in proportion instead of losing every tie: losing every tie is a silent
//!   ejection the health machine never hears of, and for `PeakEwma` it also meant no sample ever
//!   showed a slow endpoint had recovered (bench/failures.sh `slow-recovers`). For that coin
//!   two latencies count as at most [`TIE_LATENCY_RATIO`] apart. When the in-flight counts
//!   differ, the lower cost wins.
//!
//! `PeakEwma` is the default, as in Linkerd: a slow endpoint holds more requests in flight and
//! loses on both counts, so its share falls at least as fast as under least connections, and
//! below it when the slowdown is too mild to show in the in-flight counts.
//!
//! `RoundRobin` is smooth weighted round robin and `RingHash` a consistent hash of the caller's
//! header bytes (without one it falls back to `LeastRequest`). `weight` is always the effective
//! weight: static weight × the health machine's weight factor.
//!
//! Share cap, for every algorithm: a candidate whose picks in the share window would exceed
//! `max_share_multiple` × its fair share (its weight's part of all recent picks) plus a slack of
//! a few picks is passed over for the other choice, the next one in the rotation or on the ring
//! (consistent hashing with bounded loads), or any endpoint under its cap. An endpoint whose
//! error rate is above the 5% noise floor is capped at exactly its fair share. When every allowed endpoint is
//! over its cap the algorithm's own choice stands: availability beats fairness.

use std::cell::RefCell;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rollcall_api::policy::{Algorithm, LoadBalancer};
use tokio::time::Instant;

use super::load::{EndpointLoad, HoldsLoad, Moment};
use super::ring::{Ring, key_hash};
use super::round_robin::Schedule;
use super::share::ShareTracker;

/// Cost multiplier per unit of error rate above the noise floor:
/// `penalty = 1 + ERROR_PENALTY × max(0, error rate − NOISE_ERROR_RATE)`.
const ERROR_PENALTY: f64 = 10.0;

/// Error rates up to this are noise every busy endpoint has: they neither raise the cost nor
/// cap the share. Without a floor one failure (1% of the average) made an endpoint lose every
/// tie at low concurrency, and since it was then never picked its average never recovered: a
/// silent ejection the health machine knew nothing about.
const NOISE_ERROR_RATE: f64 = 0.05;

/// Above this error rate an endpoint may take no more than its fair share.
const FAILING_ERROR_RATE: f64 = NOISE_ERROR_RATE;

/// Picks an endpoint may take beyond its cap, so small counts (a quiet pool, a fresh window)
/// never trip it.
const SHARE_SLACK: f64 = 5.0;

/// Weight factors are clamped to `MIN_WEIGHT_FACTOR..=1.0` (NaN counts as 1).
const MIN_WEIGHT_FACTOR: f64 = 0.01;

/// Random draws before falling back to a scan when most candidates are excluded.
const RANDOM_DRAWS: usize = 16;

/// Round-robin winners over their cap passed over before the first one stands.
const ROUND_ROBIN_CAP_TRIES: usize = 3;

/// Endpoints over their cap passed on the ring before the key's owner stands.
const RING_CAP_PROBES: usize = 8;

/// Latency floor in seconds, so a zero estimate still ranks by outstanding requests.
const MIN_LATENCY_SECS: f64 = 1e-6;

/// On a tie in load, the coin weighs two latencies at most this far apart: an endpoint however
/// much slower than its rival still wins one tie in six, so it keeps getting the requests that
/// would show it recovered (about 4% of the traffic when 100 times slower than two peers, as
/// least connections gives it). When the loads differ the real latencies are compared.
const TIE_LATENCY_RATIO: f64 = 5.0;

thread_local! {
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::from_rng(&mut rand::rng()));
}

/// What a selector chooses among: an endpoint with an address and a load. In a pool, the
/// pool's own endpoint, so a candidate is that endpoint and no copy of its address or load.
pub trait Balanced: HoldsLoad {
    fn addr(&self) -> SocketAddr;
}

/// One eligible endpoint, as the health machine hands it over.
#[derive(Debug)]
pub struct Candidate<E> {
    pub endpoint: Arc<E>,
    /// Slow start and probation scale the static weight by this (0.1..=1.0).
    pub weight_factor: f64,
}

/// Picks endpoints among one candidate set. Immutable apart from atomics; rebuild on change.
#[derive(Debug)]
pub struct Selector<E> {
    algorithm: Algorithm,
    hash_header: Option<String>,
    max_share_multiple: f64,
    candidates: Vec<Candidate<E>>,
    /// The candidates' effective weights added up when the selector was built: a candidate's
    /// fair share is its effective weight over this. Each weight is worked out when it is
    /// needed (a load and a clamp), not kept: 16 bytes an endpoint in a wide pool.
    total_weight: f64,
    share: Arc<ShareTracker>,
    round_robin: Option<Schedule>,
    ring: Option<Arc<Ring>>,
}

/// What one pick knows.
struct Pick<'a> {
    exclude: &'a [SocketAddr],
    now: Moment,
    tick: u64,
    total: u64,
}

#[derive(Clone, Copy)]
enum Cost {
    Requests,
    Latency,
}

// === impl Candidate ===

impl<E: Balanced> Candidate<E> {
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr()
    }

    pub fn load(&self) -> &EndpointLoad {
        self.endpoint.load()
    }
}

impl<E> Clone for Candidate<E> {
    fn clone(&self) -> Self {
        Self {
            endpoint: Arc::clone(&self.endpoint),
            weight_factor: self.weight_factor,
        }
    }
}

// === impl Selector ===

impl<E: Balanced> Selector<E> {
    /// Build over `candidates` (a repeated address keeps its first entry). `share` belongs to
    /// the pool and is shared by every selector built for it.
    pub fn new(
        config: &LoadBalancer,
        candidates: Vec<Candidate<E>>,
        share: Arc<ShareTracker>,
    ) -> Self {
        let mut seen = HashSet::with_capacity(candidates.len());
        let candidates: Vec<Candidate<E>> = candidates
            .into_iter()
            .filter(|c| seen.insert(c.addr()))
            .collect();
        let weights: Vec<f64> = candidates.iter().map(effective_weight).collect();
        let total_weight: f64 = weights.iter().sum();
        let round_robin = (config.algorithm == Algorithm::RoundRobin)
            .then(|| Schedule::new(weights.iter().copied()));
        let ring = (config.algorithm == Algorithm::RingHash)
            .then(|| share.ring(candidates.iter().map(|c| c.addr()).zip(weights).collect()));
        let multiple = config.max_share_multiple;
        Self {
            algorithm: config.algorithm,
            hash_header: config.hash_header.clone(),
            max_share_multiple: if multiple.is_nan() {
                LoadBalancer::default().max_share_multiple
            } else {
                multiple.max(1.0)
            },
            candidates,
            total_weight,
            share,
            round_robin,
            ring,
        }
    }

    /// The endpoint for the next try of a request, never one in `exclude` (the endpoints this
    /// request already tried). `hash_key` is the value of [`Selector::hash_header`], if the
    /// request carries it. `None` only when every candidate is excluded or there are none.
    /// The pick is counted in the pool's share window.
    pub fn pick(
        &self,
        hash_key: Option<&[u8]>,
        exclude: &[SocketAddr],
        now: Instant,
    ) -> Option<&Candidate<E>> {
        RNG.with_borrow_mut(|rng| self.pick_with(rng, hash_key, exclude, now))
    }

    /// [`Selector::pick`] with the caller's random number generator (tests seed it).
    pub fn pick_with<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
        hash_key: Option<&[u8]>,
        exclude: &[SocketAddr],
        now: Instant,
    ) -> Option<&Candidate<E>> {
        if !self.any_allowed(exclude) {
            return None;
        }
        let tick = self.share.tick(now);
        let pick = Pick {
            exclude,
            now: Moment::of(now),
            tick,
            total: self.share.total_at(tick),
        };
        let index = match (&self.round_robin, &self.ring, hash_key) {
            (Some(round_robin), _, _) => self.round_robin(round_robin, &pick),
            (_, Some(ring), Some(key)) => self.ring(ring, key, &pick),
            _ if self.algorithm == Algorithm::PeakEwma => self.p2c(rng, &pick, Cost::Latency),
            _ => self.p2c(rng, &pick, Cost::Requests),
        }?;
        self.share
            .record(self.candidates[index].load().picks(), tick);
        self.candidates.get(index)
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The header whose bytes the proxy passes as `hash_key`; `None` unless hashing.
    pub fn hash_header(&self) -> Option<&str> {
        match self.algorithm {
            Algorithm::RingHash => self.hash_header.as_deref(),
            _ => None,
        }
    }

    /// The candidates, without repeated addresses, in the order given.
    pub fn candidates(&self) -> &[Candidate<E>] {
        &self.candidates
    }

    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    fn any_allowed(&self, exclude: &[SocketAddr]) -> bool {
        // Addresses are unique, so more candidates than exclusions leaves one allowed.
        self.candidates.len() > exclude.len()
            || self.candidates.iter().any(|c| !exclude.contains(&c.addr()))
    }

    fn excluded(&self, index: usize, pick: &Pick<'_>) -> bool {
        !pick.exclude.is_empty() && pick.exclude.contains(&self.candidates[index].addr())
    }

    // --- power of two choices ---

    fn p2c<R: Rng + ?Sized>(&self, rng: &mut R, pick: &Pick<'_>, cost: Cost) -> Option<usize> {
        let first = self.draw(rng, pick, None)?;
        let Some(second) = self.draw(rng, pick, Some(first)) else {
            return Some(first);
        };
        let same_load = self.candidates[first].load().outstanding()
            == self.candidates[second].load().outstanding();
        let (cost_first, cost_second) = self.costs(first, second, pick.now, cost, same_load);
        let second_wins = if same_load {
            // No difference in load: a coin weighted by the inverse costs, so weight, slow
            // start, latency and the error penalty shape shares instead of deciding every tie
            // (which starved a ramping, once-failing or once-slow endpoint at low concurrency).
            let odds_second = cost_first / (cost_first + cost_second);
            rng.random::<f64>() < odds_second
        } else {
            cost_second < cost_first
        };
        let (better, worse) = if second_wins {
            (second, first)
        } else {
            (first, second)
        };
        for choice in [better, worse] {
            if !self.stalled(choice, pick) && !self.over_cap(choice, pick) {
                return Some(choice);
            }
        }
        if let Some(any) = self.any_under_cap(rng, pick) {
            return Some(any);
        }
        // Everything live is over its cap: the better live choice, then the better one.
        Some(
            [better, worse]
                .into_iter()
                .find(|&i| !self.stalled(i, pick))
                .unwrap_or(better),
        )
    }

    /// A random allowed candidate other than `other`.
    fn draw<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
        pick: &Pick<'_>,
        other: Option<usize>,
    ) -> Option<usize> {
        let n = self.candidates.len();
        if n == 0 {
            return None;
        }
        let allowed = |i: usize| Some(i) != other && !self.excluded(i, pick);
        for _ in 0..RANDOM_DRAWS {
            let i = rng.random_range(0..n);
            if allowed(i) {
                return Some(i);
            }
        }
        let start = rng.random_range(0..n);
        (0..n).map(|k| (start + k) % n).find(|&i| allowed(i))
    }

    /// The first allowed, live candidate under its cap, scanning from a random place. Only
    /// reached when both random choices are stalled or over their caps.
    fn any_under_cap<R: Rng + ?Sized>(&self, rng: &mut R, pick: &Pick<'_>) -> Option<usize> {
        let n = self.candidates.len();
        let start = rng.random_range(0..n);
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| !self.excluded(i, pick) && !self.stalled(i, pick) && !self.over_cap(i, pick))
    }

    /// Whether the candidate has stopped answering (`EndpointLoad::stalled`).
    fn stalled(&self, index: usize, pick: &Pick<'_>) -> bool {
        self.candidates[index].load().stalled_at(pick.now)
    }

    /// The costs of two candidates; `tie` (as many in flight) brings their latencies within
    /// [`TIE_LATENCY_RATIO`] of each other, for the coin.
    fn costs(&self, a: usize, b: usize, now: Moment, cost: Cost, tie: bool) -> (f64, f64) {
        let (latency_a, latency_b) = match cost {
            Cost::Requests => (1.0, 1.0),
            Cost::Latency => {
                let a = self.candidates[a].load().latency_secs_at(now);
                let b = self.candidates[b].load().latency_secs_at(now);
                let (a, b) = match (a, b) {
                    (Some(a), Some(b)) => (a.max(MIN_LATENCY_SECS), b.max(MIN_LATENCY_SECS)),
                    (Some(known), None) | (None, Some(known)) => (known, known),
                    (None, None) => (1.0, 1.0),
                };
                if tie {
                    (a.min(b * TIE_LATENCY_RATIO), b.min(a * TIE_LATENCY_RATIO))
                } else {
                    (a, b)
                }
            }
        };
        (
            self.cost(a, latency_a.max(MIN_LATENCY_SECS), now),
            self.cost(b, latency_b.max(MIN_LATENCY_SECS), now),
        )
    }

    fn cost(&self, index: usize, latency: f64, now: Moment) -> f64 {
        let load = self.candidates[index].load();
        let penalty = 1.0 + ERROR_PENALTY * (load.error_rate_at(now) - NOISE_ERROR_RATE).max(0.0);
        let weight = effective_weight(&self.candidates[index]);
        latency * (load.outstanding() as f64 + 1.0) / weight * penalty
    }

    // --- the share cap ---

    /// Whether one more pick would take this candidate over its cap.
    fn over_cap(&self, index: usize, pick: &Pick<'_>) -> bool {
        let fair = effective_weight(&self.candidates[index]) / self.total_weight;
        let multiple = if self.candidates[index].load().error_rate_at(pick.now) > FAILING_ERROR_RATE
        {
            1.0
        } else {
            self.max_share_multiple
        };
        let allowed = multiple * fair * (pick.total + 1) as f64 + SHARE_SLACK;
        (self.candidates[index].load().picks().recent(pick.tick) + 1) as f64 > allowed
    }

    // --- round robin and ring ---

    fn round_robin(&self, round_robin: &Schedule, pick: &Pick<'_>) -> Option<usize> {
        let mut capped = [usize::MAX; ROUND_ROBIN_CAP_TRIES];
        for slot in 0..ROUND_ROBIN_CAP_TRIES {
            let next = round_robin.next(self.share.round_robin_cursor(), |i| {
                self.excluded(i, pick) || capped.contains(&i)
            });
            let Some(index) = next else { break };
            if !self.stalled(index, pick) && !self.over_cap(index, pick) {
                return Some(index);
            }
            capped[slot] = index;
        }
        // Every winner was stalled or over its cap: the first live one stands, else the first.
        let tried = capped.iter().copied().filter(|&i| i != usize::MAX);
        tried
            .clone()
            .find(|&i| !self.stalled(i, pick))
            .or_else(|| tried.clone().next())
    }

    fn ring(&self, ring: &Ring, key: &[u8], pick: &Pick<'_>) -> Option<usize> {
        let mut owner = None;
        let mut probed = 0;
        let mut previous = usize::MAX;
        for index in ring.walk(key_hash(key)) {
            if index == previous || self.excluded(index, pick) {
                continue;
            }
            previous = index;
            if !self.stalled(index, pick) && !self.over_cap(index, pick) {
                return Some(index);
            }
            owner.get_or_insert(index);
            probed += 1;
            if probed == RING_CAP_PROBES {
                break;
            }
        }
        owner
    }
}

fn effective_weight<E: Balanced>(candidate: &Candidate<E>) -> f64 {
    let factor = if candidate.weight_factor.is_nan() {
        1.0
    } else {
        candidate.weight_factor.clamp(MIN_WEIGHT_FACTOR, 1.0)
    };
    f64::from(candidate.load().weight()) * factor
}

#[cfg(test)]
mod latency_tests;
#[cfg(test)]
mod tests;
