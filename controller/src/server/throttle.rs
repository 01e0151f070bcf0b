//! What a caller may cost the controller before it has proved who it is. Two bounds, both by
//! source address:
//!
//! - **Reviews of refused tokens**: a token bucket per source (a burst, then a steady rate),
//!   charged for each token a review refuses. Once a source has had a token refused (its bucket
//!   is below full), each further review is *reserved* from the bucket when it is sent and given
//!   back when the token turns out good (or the API server could not answer), so callers sending
//!   at once cannot overspend it. A source with no refusal to its name reviews freely (only the
//!   reviews in flight over all sources are bounded, `auth`): a fleet of sidecars behind one
//!   address reconnecting together is not throttled for being many. So a source costs the API
//!   server at most the burst, the reviews in flight when its first refusals came back, and the
//!   rate, in reviews of bad tokens, however many connections it opens in parallel.
//! - **Connections not yet authenticated**: a slot is taken when a connection is accepted (before
//!   its TLS handshake) and given back when a request on it authenticates or it closes. Per
//!   source and in total, so one caller cannot hold the memory of thousands of idle connections
//!   or handshakes, nor take every slot from the sidecars reconnecting after a restart.
//!
//! Both tables are bounded: when the failure table is full, the source that failed longest ago
//! is forgotten; a source with no pending connection leaves the pending table.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

/// A source may have this many tokens refused by TokenReview in a burst...
pub const FAILURE_BURST: f64 = 20.0;
/// ...and then this many a second. A sidecar with a stale token is refused once per
/// reconnect; only a client sending garbage runs out.
pub const FAILURES_PER_SECOND: f64 = 2.0;
/// Sources whose failures are remembered at most. When full, the one that failed longest ago
/// is forgotten.
const SOURCES: usize = 10_000;

/// Connections not yet authenticated that one source, and all sources together, may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingLimits {
    pub per_source: usize,
    pub total: usize,
}

impl Default for PendingLimits {
    /// A sidecar authenticates on its first request, a few milliseconds after it connects, so
    /// a source holds more than one pending connection only while many pods behind one
    /// address reconnect together. A connection waiting for its TLS handshake costs about
    /// 9 KiB (2,000 silent ones grew the controller by 18 MiB before this bound:
    /// `bench/flood.sh`), so the total keeps them under about 20 MiB while still letting a
    /// fleet of 1,000 sidecars reconnect at once.
    fn default() -> Self {
        Self {
            per_source: 64,
            total: 2048,
        }
    }
}

/// Why a new connection was closed at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crowded {
    /// Its source already holds its share of connections not yet authenticated.
    Source,
    /// All sources together hold every slot.
    Total,
}

impl Crowded {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Source => "source_unauthenticated",
            Self::Total => "unauthenticated",
        }
    }
}

/// What a source's bucket says to one more review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// No refusal to its name: go ahead, nothing taken.
    Free,
    /// One taken from its bucket: give it back unless the token is refused.
    Reserved,
    /// Its bucket is empty.
    Denied,
}

/// A source's failed authentications, as a token bucket.
#[derive(Clone, Copy, Debug)]
struct Budget {
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn full(now: Instant) -> Self {
        Self {
            tokens: FAILURE_BURST,
            at: now,
        }
    }

    fn refilled(self, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        (self.tokens + elapsed * FAILURES_PER_SECOND).min(FAILURE_BURST)
    }
}

#[derive(Debug, Default)]
struct Pending {
    by_source: HashMap<IpAddr, usize>,
    total: usize,
}

/// The per-source bounds every connection of the roster port shares.
#[derive(Debug)]
pub struct Throttle {
    limits: PendingLimits,
    failures: Mutex<HashMap<IpAddr, Budget>>,
    pending: Mutex<Pending>,
}

impl Throttle {
    pub fn new(limits: PendingLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            failures: Mutex::default(),
            pending: Mutex::default(),
        })
    }

    /// Whether `source` may send one more review now: freely while it has no refusal to its
    /// name (its bucket is full), else by taking one from its bucket, to give back with
    /// [`Self::refund`] unless the review refuses the token.
    pub fn reserve(&self, source: IpAddr, now: Instant) -> Reservation {
        let mut failures = self.failures.lock();
        let Some(budget) = failures.get_mut(&source) else {
            return Reservation::Free;
        };
        let left = budget.refilled(now);
        if left >= FAILURE_BURST {
            return Reservation::Free;
        }
        if left < 1.0 {
            return Reservation::Denied;
        }
        *budget = Budget {
            tokens: left - 1.0,
            at: now,
        };
        Reservation::Reserved
    }

    /// Give back a reservation whose review did not refuse the token.
    pub fn refund(&self, source: IpAddr, now: Instant) {
        if let Some(budget) = self.failures.lock().get_mut(&source) {
            *budget = Budget {
                tokens: (budget.refilled(now) + 1.0).min(FAILURE_BURST),
                at: now,
            };
        }
    }

    /// Charge `source` one refused token that needed no review (the cache knew it was bad):
    /// a source repeating a refused token stays throttled.
    pub fn charge(&self, source: IpAddr, now: Instant) {
        let mut failures = self.failures.lock();
        if !failures.contains_key(&source) {
            make_room(&mut failures, now);
        }
        let budget = failures.entry(source).or_insert_with(|| Budget::full(now));
        *budget = Budget {
            tokens: (budget.refilled(now) - 1.0).max(0.0),
            at: now,
        };
    }

    /// A slot for a new connection from `source` until it authenticates, or why not.
    pub fn hold(self: &Arc<Self>, source: Option<IpAddr>) -> Result<PendingSlot, Crowded> {
        let mut pending = self.pending.lock();
        if pending.total >= self.limits.total {
            return Err(Crowded::Total);
        }
        if let Some(source) = source {
            let held = pending.by_source.entry(source).or_default();
            if *held >= self.limits.per_source {
                return Err(Crowded::Source);
            }
            *held += 1;
        }
        pending.total += 1;
        Ok(PendingSlot {
            throttle: Some(self.clone()),
            source,
        })
    }

    /// Connections not yet authenticated, in total.
    pub fn pending(&self) -> usize {
        self.pending.lock().total
    }
}

/// When the failure table is full, forget the sources whose buckets are full again, then the
/// one that failed longest ago.
fn make_room(failures: &mut HashMap<IpAddr, Budget>, now: Instant) {
    if failures.len() < SOURCES {
        return;
    }
    failures.retain(|_, b| b.refilled(now) < FAILURE_BURST);
    if failures.len() >= SOURCES
        && let Some(oldest) = failures.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| *k)
    {
        failures.remove(&oldest);
    }
}

/// A connection's place among those not yet authenticated; given back on drop.
#[derive(Debug)]
pub struct PendingSlot {
    throttle: Option<Arc<Throttle>>,
    source: Option<IpAddr>,
}

impl PendingSlot {
    /// A slot that counts against nothing (tests, and callers that bound themselves).
    pub fn unbounded() -> Self {
        Self {
            throttle: None,
            source: None,
        }
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        let Some(throttle) = self.throttle.take() else {
            return;
        };
        let mut pending = throttle.pending.lock();
        pending.total = pending.total.saturating_sub(1);
        if let Some(source) = self.source
            && let Some(held) = pending.by_source.get_mut(&source)
        {
            *held = held.saturating_sub(1);
            if *held == 0 {
                pending.by_source.remove(&source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 10));

    #[test]
    fn a_clean_source_reviews_freely_and_one_with_refusals_reserves_from_what_is_left() {
        let t = Throttle::new(PendingLimits::default());
        let t0 = Instant::now();
        // No refusal yet: as many reviews at once as the caller likes, nothing taken.
        for _ in 0..100 {
            assert_eq!(t.reserve(A, t0), Reservation::Free);
        }
        // One refusal: from now on each review is reserved from the 19 left...
        t.charge(A, t0);
        let reserved = (0..100)
            .filter(|_| t.reserve(A, t0) == Reservation::Reserved)
            .count();
        assert_eq!(reserved, FAILURE_BURST as usize - 1);
        assert_eq!(t.reserve(A, t0), Reservation::Denied, "the burst is spent");
        assert_eq!(
            t.reserve(B, t0),
            Reservation::Free,
            "another source is not charged"
        );
        // ...and earned back at the rate.
        let short = Duration::from_secs_f64(0.4 / FAILURES_PER_SECOND);
        assert_eq!(t.reserve(A, t0 + short), Reservation::Denied);
        let one = Duration::from_secs_f64(1.0 / FAILURES_PER_SECOND);
        assert_eq!(t.reserve(A, t0 + one), Reservation::Reserved);
        assert_eq!(t.reserve(A, t0 + one), Reservation::Denied);
    }

    #[test]
    fn a_refund_gives_back_a_reservation_whose_token_was_good_and_never_more_than_the_burst() {
        let t = Throttle::new(PendingLimits::default());
        let t0 = Instant::now();
        t.charge(A, t0);
        let granted = (0..100)
            .filter(|_| t.reserve(A, t0) == Reservation::Reserved)
            .count();
        assert_eq!(granted, FAILURE_BURST as usize - 1);
        // The good tokens among them are given back.
        for _ in 0..5 {
            t.refund(A, t0);
        }
        let again = (0..100)
            .filter(|_| t.reserve(A, t0) == Reservation::Reserved)
            .count();
        assert_eq!(again, 5);
        // Refunds on a full bucket do not raise it past the burst: the source is clean again.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..50 {
            t.refund(A, later);
        }
        assert_eq!(t.reserve(A, later), Reservation::Free);
        // A refund for a source never seen is a no-op.
        t.refund(B, t0);
        assert!(!t.failures.lock().contains_key(&B));
    }

    #[test]
    fn a_cached_refusal_is_charged_too() {
        let t = Throttle::new(PendingLimits::default());
        let t0 = Instant::now();
        for _ in 0..FAILURE_BURST as usize {
            t.charge(A, t0);
        }
        assert_eq!(t.reserve(A, t0), Reservation::Denied);
        t.charge(A, t0);
        assert_eq!(
            t.reserve(A, t0),
            Reservation::Denied,
            "charging an empty bucket keeps it empty"
        );
    }

    #[test]
    fn the_failure_table_stays_bounded_and_forgets_the_oldest() {
        let t = Throttle::new(PendingLimits::default());
        let t0 = Instant::now();
        for _ in 0..FAILURE_BURST as usize {
            t.charge(A, t0);
        }
        for i in 1..SOURCES as u32 + 5 {
            let ip = IpAddr::from((0x0b00_0000u32 + i).to_be_bytes());
            t.charge(ip, t0 + Duration::from_millis(u64::from(i)));
        }
        assert!(t.failures.lock().len() <= SOURCES);
        assert!(!t.failures.lock().contains_key(&A));
    }

    #[test]
    fn pending_slots_are_bounded_per_source_and_in_total_and_come_back_on_drop() {
        let t = Throttle::new(PendingLimits {
            per_source: 3,
            total: 5,
        });
        let mut from_a: Vec<_> = (0..3).map(|_| t.hold(Some(A)).unwrap()).collect();
        assert_eq!(t.hold(Some(A)).unwrap_err(), Crowded::Source);
        let from_b: Vec<_> = (0..2).map(|_| t.hold(Some(B)).unwrap()).collect();
        assert_eq!(t.pending(), 5);
        assert_eq!(t.hold(Some(B)).unwrap_err(), Crowded::Total);
        assert_eq!(t.hold(None).unwrap_err(), Crowded::Total);
        from_a.pop();
        assert_eq!(t.pending(), 4);
        let again = t.hold(Some(A)).unwrap();
        drop((from_a, from_b, again));
        assert_eq!(t.pending(), 0);
        assert!(
            t.pending.lock().by_source.is_empty(),
            "no source left behind"
        );
        // A slot without a throttle counts nothing.
        drop(PendingSlot::unbounded());
        assert_eq!(t.pending(), 0);
    }
}
