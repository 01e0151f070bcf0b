//! Live load of one endpoint: requests in flight, peak-EWMA latency of successes, the recent
//! error rate, the static weight, and whether it has stopped answering (a stall). The load
//! lives inside what holds it ([`HoldsLoad`]: in a pool, the endpoint itself, one allocation
//! for both), and every selector built over the pool shares that, so the statistics survive
//! selector rebuilds. Reads and writes are plain atomics; time is passed in (but for a guard
//! dropped mid-try, which reads the clock).
//!
//! Each average lives in one `AtomicU64` that packs the value (`f32`) with the time of its last
//! sample (milliseconds on the process's stamp clock, `u32`, wrapping), so an update is one compare-exchange
//! and a reader never sees a value with someone else's timestamp.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use self::stall::SilenceCell;
use super::share::PickWindow;
use crate::outcome::Verdict;
use crate::poll_clock;
use crate::stamp;

/// How long an estimate (latency or error rate) with no new sample holds before it relaxes
/// toward zero, and the time constant it relaxes with: a starved endpoint is tried again.
pub const EWMA_DECAY: Duration = Duration::from_secs(10);

/// How a latency sample below the estimate pulls it down: a sample that arrives `dt` after the
/// previous one weighs `1 - exp(-dt / LATENCY_TIME_CONSTANT)`, and at least
/// [`MIN_SAMPLE_WEIGHT`]. Finagle and Linkerd use 10 s and no floor; with that, an endpoint that
/// was slow and is fast again gets its share back only after about ten seconds, since it gets
/// few requests while its estimate is high (bench/failures.sh `slow-recovers`: still below a
/// third 7 s after it recovered, and never back after a 100 ms slowdown). A sample above the
/// estimate replaces it at once either way, so a slowdown is seen as fast as before.
pub const LATENCY_TIME_CONSTANT: Duration = Duration::from_secs(1);

/// The least weight of a sample below the estimate: a few fast answers in a row bring an
/// endpoint that recovered back into contention however rarely it was picked while slow (a
/// 100 ms estimate falls under 5 ms in twelve 1 ms samples).
pub const MIN_SAMPLE_WEIGHT: f64 = 0.25;

/// Weight of one outcome in the error rate: the rate describes roughly the last 100 outcomes,
/// whatever the traffic (a count, not a clock, so a burst at one instant still registers).
const ERROR_ALPHA: f64 = 0.01;

/// Marks "no latency sample yet" (a NaN payload we never store as a value).
const EMPTY: u64 = u64::MAX;

/// A stall is declared after no answer for this long at least, however fast the endpoint was.
pub const STALL_FLOOR: Duration = Duration::from_millis(200);

/// …and after this many times the endpoint's own latency estimate, when that is longer.
pub const STALL_MULTIPLE: f64 = 8.0;

/// A stalled endpoint with nothing in flight is avoided this long after its last try went
/// unanswered, then gets one trial try; every trial that goes unanswered starts this again.
pub const STALL_RETRY: Duration = Duration::from_secs(2);

/// Whether an endpoint is stalled, `quiet` being how long it has answered nothing while tries
/// were waiting (`waiting` of them now), or since its last try went unanswered. With tries
/// waiting: once `quiet` exceeds `threshold`. With none: until [`STALL_RETRY`] has passed.
pub fn is_stalled(waiting: u64, quiet: Duration, threshold: Duration) -> bool {
    if waiting == 0 {
        quiet < STALL_RETRY
    } else {
        quiet > threshold
    }
}

/// What an endpoint's load lives in: an [`InFlight`] guard keeps its holder alive, so the load
/// need not be an allocation of its own.
pub trait HoldsLoad: std::fmt::Debug + Send + Sync + 'static {
    fn load(&self) -> &EndpointLoad;
}

impl HoldsLoad for EndpointLoad {
    fn load(&self) -> &EndpointLoad {
        self
    }
}

/// Live statistics of one endpoint. Create one per endpoint when it joins the pool and keep it
/// for as long as the endpoint stays.
#[derive(Debug)]
pub struct EndpointLoad {
    outstanding: AtomicU64,
    latency: AtomicU64,
    errors: AtomicU64,
    weight: AtomicU32,
    /// Tries sent through [`EndpointLoad::start_try`] and not settled yet, and since when
    /// (ms stamp) the endpoint has answered nothing while they waited, or since a try went
    /// unanswered: one atomic word (`stall`).
    silence: SilenceCell,
    /// This endpoint's recent picks, for the pool's share cap (`ShareTracker`).
    picks: PickWindow,
}

/// One request in flight to an endpoint. Dropping it, however that happens (finished, failed,
/// cancelled, unwound by a panic), releases the in-flight count.
#[must_use = "the in-flight count is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct InFlight {
    /// What the load lives in, kept alive by the guard: in a pool the whole endpoint, its
    /// connections included (a tunnel's guard keeps them until the tunnel closes; the pool's
    /// drain and shutdown close tunnels themselves, `drain::close`).
    holder: Arc<dyn HoldsLoad>,
    /// Started with [`EndpointLoad::start_try`] and not yet settled with [`InFlight::answered`].
    awaiting: bool,
}

// === impl EndpointLoad ===

impl EndpointLoad {
    /// A new endpoint with static weight 1 and no samples.
    pub fn new(now: Instant) -> Self {
        Self::with_weight(1, now)
    }

    /// A new endpoint with a static weight (0 counts as 1: an endpoint that must get no traffic
    /// is not eligible, which is the health machine's business).
    pub fn with_weight(weight: u32, now: Instant) -> Self {
        Self {
            outstanding: AtomicU64::new(0),
            latency: AtomicU64::new(EMPTY),
            errors: AtomicU64::new(pack(0.0, stamp::wrapping_millis(now))),
            weight: AtomicU32::new(weight.max(1)),
            silence: SilenceCell::new(),
            picks: PickWindow::default(),
        }
    }

    /// This endpoint's recent picks (see `ShareTracker`).
    pub fn picks(&self) -> &PickWindow {
        &self.picks
    }

    /// Start a request: counts it in flight until the returned guard is dropped.
    pub fn start(self: &Arc<Self>) -> InFlight {
        InFlight::start(Arc::clone(self) as Arc<dyn HoldsLoad>)
    }

    /// Start a try sent `now` whose answer is awaited: in flight like [`EndpointLoad::start`],
    /// and watched for a stall until [`InFlight::answered`] settles it.
    pub fn start_try(self: &Arc<Self>, now: Instant) -> InFlight {
        InFlight::start_try(Arc::clone(self) as Arc<dyn HoldsLoad>, now)
    }

    /// Whether the endpoint has stopped answering: see [`is_stalled`]. The threshold is
    /// [`STALL_MULTIPLE`] times its latency estimate, at least [`STALL_FLOOR`].
    pub fn stalled(&self, now: Instant) -> bool {
        self.stalled_at(Moment::of(now))
    }

    /// [`EndpointLoad::stalled`] at a moment read once for several loads.
    pub(crate) fn stalled_at(&self, now: Moment) -> bool {
        let silence = self.silence.get();
        let Some(since) = silence.since else {
            return false;
        };
        let quiet = Duration::from_secs_f64(secs_between(since, now.0));
        let threshold = self.latency_secs_at(now).map_or(STALL_FLOOR, |secs| {
            STALL_FLOOR.max(Duration::from_secs_f64(secs * STALL_MULTIPLE))
        });
        is_stalled(u64::from(silence.waiting), quiet, threshold)
    }

    /// One awaited try settled: `responded` when the endpoint showed it is there (any answer,
    /// a reset, a refusal), not when the try ran out of time unanswered.
    fn settle(&self, responded: bool, now: Instant) {
        let at = stall::stamp(self.stamp(now));
        self.silence.update(|s| s.settled(responded, at));
    }

    /// An awaited try abandoned without a verdict (the client left, the request was cut): no
    /// evidence either way. Forget the wait when nothing else is waiting and it had not yet
    /// become a stall.
    fn abandon(&self, now: Instant) {
        let at = stall::stamp(self.stamp(now));
        let floor_ms = STALL_FLOOR.as_millis() as u32;
        self.silence.update(|s| s.abandoned(at, floor_ms));
    }

    /// Requests in flight right now.
    pub fn outstanding(&self) -> u64 {
        self.outstanding.load(Ordering::Acquire)
    }

    /// The configured static weight (at least 1).
    pub fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    /// Change the static weight (0 counts as 1). A selector reads it at each pick for costs and
    /// fair shares (the latter over the total weight of when it was built) and built its
    /// rotation and ring with the old one: until the rebuild a roster change causes anyway, the
    /// two mix for a moment.
    pub fn set_weight(&self, weight: u32) {
        self.weight.store(weight.max(1), Ordering::Relaxed);
    }

    /// Peak-EWMA latency of successful requests to the microsecond (the average is kept as an
    /// `f32`), `None` before the first success.
    pub fn latency(&self, now: Instant) -> Option<Duration> {
        self.latency_secs(now)
            .map(|secs| Duration::from_micros((secs * 1e6).round() as u64))
    }

    /// Recent share of failed requests, 0.0..=1.0.
    pub fn error_rate(&self, now: Instant) -> f64 {
        self.error_rate_at(Moment::of(now))
    }

    /// [`EndpointLoad::error_rate`] at a moment read once for several loads.
    pub(crate) fn error_rate_at(&self, now: Moment) -> f64 {
        let (rate, at) = unpack(self.errors.load(Ordering::Acquire));
        relax(f64::from(rate), secs_between(at, now.0))
    }

    pub(crate) fn latency_secs(&self, now: Instant) -> Option<f64> {
        self.latency_secs_at(Moment::of(now))
    }

    pub(crate) fn latency_secs_at(&self, now: Moment) -> Option<f64> {
        let word = self.latency.load(Ordering::Acquire);
        if word == EMPTY {
            return None;
        }
        let (value, at) = unpack(word);
        Some(relax(f64::from(value), secs_between(at, now.0)))
    }

    /// Record how a request went. Private: outcomes come in through [`InFlight::finish`].
    /// A 1xx–4xx answer is a success sample (its latency is averaged: a 4xx is the endpoint
    /// doing its job); a 5xx or gateway error counts in the error rate and its latency is never
    /// averaged (a fast failure must not look like a fast endpoint); what was not the endpoint's
    /// doing records nothing.
    fn record(&self, verdict: Verdict, latency: Duration, now: Instant) {
        match verdict {
            Verdict::Success | Verdict::ClientError => {
                let stamp = self.stamp(now);
                self.observe_latency(latency.as_secs_f64(), stamp);
                self.observe_error(0.0, stamp);
            }
            Verdict::ServerError | Verdict::GatewayError | Verdict::ConnectionFailure => {
                self.observe_error(1.0, self.stamp(now));
            }
            Verdict::NotTheEndpoint => {}
        }
    }

    /// Peak-EWMA (Finagle): a sample above the estimate replaces it at once; one below decays in
    /// with weight `1 - exp(-dt / LATENCY_TIME_CONSTANT)`, at least [`MIN_SAMPLE_WEIGHT`].
    fn observe_latency(&self, sample: f64, stamp: u32) {
        self.update(&self.latency, |word| {
            if word == EMPTY {
                return pack(sample, stamp);
            }
            let (value, at) = unpack(word);
            let dt = secs_between(at, stamp);
            let prev = relax(f64::from(value), dt);
            let next = if sample >= prev {
                sample
            } else {
                let keep = (-dt / LATENCY_TIME_CONSTANT.as_secs_f64())
                    .exp()
                    .min(1.0 - MIN_SAMPLE_WEIGHT);
                prev * keep + sample * (1.0 - keep)
            };
            pack(next, newer(at, stamp))
        });
    }

    /// Exponentially weighted share of failures over roughly the last `1 / ERROR_ALPHA` outcomes.
    fn observe_error(&self, failed: f64, stamp: u32) {
        self.update(&self.errors, |word| {
            let (value, at) = unpack(word);
            let prev = relax(f64::from(value), secs_between(at, stamp));
            pack(prev + ERROR_ALPHA * (failed - prev), newer(at, stamp))
        });
    }

    fn update(&self, cell: &AtomicU64, next: impl Fn(u64) -> u64) {
        let mut current = cell.load(Ordering::Acquire);
        loop {
            match cell.compare_exchange_weak(
                current,
                next(current),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Milliseconds on the process's stamp clock (`crate::stamp::wrapping_millis`): one origin
    /// for every load, so no load keeps its own 16-byte epoch.
    fn stamp(&self, now: Instant) -> u32 {
        stamp::wrapping_millis(now)
    }
}

/// An instant on the loads' millisecond clock: a pick reads the clock's offset once and
/// judges every candidate's load at it.
#[derive(Clone, Copy, Debug)]
pub struct Moment(u32);

impl Moment {
    pub fn of(now: Instant) -> Self {
        Self(stamp::wrapping_millis(now))
    }
}

// === impl InFlight ===

impl InFlight {
    /// Start a request on `holder`'s load: counts it in flight until the guard is dropped.
    pub fn start(holder: Arc<dyn HoldsLoad>) -> Self {
        holder.load().outstanding.fetch_add(1, Ordering::AcqRel);
        Self {
            holder,
            awaiting: false,
        }
    }

    /// Start a try sent `now` whose answer is awaited: in flight like [`InFlight::start`], and
    /// watched for a stall until [`InFlight::answered`] settles it.
    pub fn start_try(holder: Arc<dyn HoldsLoad>, now: Instant) -> Self {
        let mut guard = Self::start(holder);
        let load = guard.load();
        let at = stall::stamp(load.stamp(now));
        load.silence.update(|s| s.started(at));
        guard.awaiting = true;
        guard
    }

    /// Record how the request went, then release it. `latency` is the time to the answer's
    /// headers (or to the failure).
    pub fn finish(self, verdict: Verdict, latency: Duration, now: Instant) {
        self.load().record(verdict, latency, now);
    }

    /// The load of the endpoint this request went to.
    pub fn load(&self) -> &EndpointLoad {
        self.holder.load()
    }

    /// The try's wait is over (its headers came, or it failed). `heard` is what that says
    /// about the endpoint answering at all ([`crate::outcome::Outcome::heard_from`]): `Some(true)`
    /// it did, `Some(false)` it had its full time and said nothing, `None` no evidence. The
    /// guard stays in flight for the body.
    pub fn answered(&mut self, heard: Option<bool>, now: Instant) {
        if std::mem::take(&mut self.awaiting) {
            match heard {
                Some(responded) => self.load().settle(responded, now),
                None => self.load().abandon(now),
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.awaiting {
            // Dropped mid-try: the request future was cancelled (the client left).
            self.load().abandon(poll_clock::now());
        }
        self.load().outstanding.fetch_sub(1, Ordering::AcqRel);
    }
}

// === helpers ===

/// An estimate holds for one time constant after its last sample, then relaxes toward zero with
/// the same time constant, so an endpoint that was slow (or failing) once and then starved of
/// traffic is eventually tried again, while a busy endpoint's average is not biased.
fn relax(value: f64, idle_secs: f64) -> f64 {
    let decay = EWMA_DECAY.as_secs_f64();
    if idle_secs <= decay {
        value
    } else {
        value * (-(idle_secs - decay) / decay).exp()
    }
}

/// Seconds from stamp `at` to stamp `now` (0 when `now` is the earlier: samples may arrive
/// slightly out of order). One stamp is taken per sample, not one per use.
fn secs_between(at: u32, now: u32) -> f64 {
    let diff = now.wrapping_sub(at) as i32;
    f64::from(diff.max(0)) / 1000.0
}

/// The later of two stamps (samples may arrive slightly out of order).
fn newer(at: u32, stamp: u32) -> u32 {
    if (stamp.wrapping_sub(at) as i32) < 0 {
        at
    } else {
        stamp
    }
}

fn pack(value: f64, stamp: u32) -> u64 {
    let value = if value.is_finite() {
        value.max(0.0)
    } else {
        0.0
    };
    (u64::from((value as f32).to_bits()) << 32) | u64::from(stamp)
}

fn unpack(word: u64) -> (f32, u32) {
    (f32::from_bits((word >> 32) as u32), word as u32)
}

mod stall;

#[cfg(test)]
mod tests;
