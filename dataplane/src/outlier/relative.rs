//! The error-rate rule's judgement: is this endpoint failing *unlike its peers*?
//!
//! An absolute threshold alone ejects healthy endpoints in a uniform overload (every endpoint
//! sheds 20%, each one drifts above the threshold in turn, and each ejection loads the rest) and
//! is slow for an endpoint the balancer is already steering away from (it needs `minRequests`
//! of its own, and its successes from before the fault dilute its rate for a whole window). So,
//! when the rest of the pool has enough requests in the window to compare with, the rule is
//! relative. An endpoint trips when
//! - its window's failure share is statistically clearly above its peers' over the same window
//!   (the lower Wilson bound of its share above the upper bound of theirs, at [`CONFIDENCE_Z`]):
//!   the same window on both sides, so an overload that hits everyone at once is no outlier;
//! - it has at least [`relative_min_requests`] requests and three failures in that window: the
//!   statistics, not a fixed count, guard against noise;
//! - and its own last `minRequests` outcomes (however old, [`super::RecentOutcomes`]) hold three
//!   failures and at least half the threshold: it fails *now*, and by an amount that matters.
//!
//! The more clearly the peers themselves fail beyond the noise floor (the lower bound of their
//! share, as `streak.rs` reckons it), the more confidence is asked for: z rises from
//! [`CONFIDENCE_Z`] at the floor to [`STRICT_Z`] at twice it. (The lower bound, not the
//! cautious estimate the streaks use, because the Wilson bounds here already widen with few
//! requests.) The rule is checked on every failure, and over a long overload those many looks
//! at z = 3 find a "significant" endpoint now and then (about one per 60 000 requests of a
//! pool shedding half, simulated); there, a false ejection is the spiral this rule exists to
//! prevent.
//!
//! Alone in its pool (no other endpoint that is not draining), the absolute rule applies: above
//! `threshold` with at least `minRequests` (docs/design.md, "Passive detection and
//! ejection"). With peers too quiet to compare with (fewer than `minRequests` together in the
//! window: a pool just started, idle peers) the rule waits for them.

use super::{Limits, WindowCounts, streak};

/// Two-sided z of the Wilson intervals: 3.0 (one-sided about 99.9% each), chosen by simulating
/// the rule on every request of a 10 s window: three endpoints shedding 20% each never tripped
/// in 40 seeded runs, one endpoint failing 20% of a 7% traffic share tripped after a median
/// 1.2 s.
pub const CONFIDENCE_Z: f64 = 3.0;

/// z once the peers fail at twice the noise floor or more: about 3.4 in a million one-sided.
pub const STRICT_Z: f64 = 4.5;

/// Fewest requests of its own the relative rule judges an endpoint on.
const RELATIVE_FLOOR: u32 = 5;

/// Fewest failures, in the window and among the recent outcomes, the relative rule ejects on:
/// against a thousand clean peer requests one failure in five is already "significant", but an
/// endpoint that fails 1% of the time shows that too often.
const RELATIVE_MIN_FAILURES: u64 = 3;

/// How many of an endpoint's last outcomes count as "recent": `minRequests`, within 5..=64.
pub fn recent_len(min_requests: u32) -> u32 {
    min_requests.clamp(RELATIVE_FLOOR, 64)
}

/// The endpoint's own requests the relative rule needs: a quarter of `minRequests`, at least
/// [`RELATIVE_FLOOR`] (never more than `minRequests`).
pub fn relative_min_requests(min_requests: u32) -> u32 {
    (min_requests / 4)
        .max(RELATIVE_FLOOR)
        .min(min_requests.max(1))
}

/// Whether the error-rate rule trips for an endpoint whose window holds `own` and whose last
/// [`recent_len`] outcomes hold `recent`, in a pool whose other endpoints' windows hold `peers`
/// together (`None`: the endpoint is alone in its pool). A threshold of 0 disables the rule.
pub fn trips(
    own: WindowCounts,
    recent: WindowCounts,
    peers: Option<WindowCounts>,
    limits: &Limits,
) -> bool {
    let threshold = limits.error_rate_threshold;
    if threshold <= 0.0 || own.requests == 0 {
        return false;
    }
    let Some(peers) = peers else {
        // Nobody to compare with: the absolute rule (docs/design.md, "Passive detection and
        // ejection").
        return own.requests >= u64::from(limits.error_rate_min_requests) && own.rate() > threshold;
    };
    if peers.requests < u64::from(limits.error_rate_min_requests.max(1)) {
        // Peers too quiet to compare with yet (a pool just started, idle peers): wait for them
        // rather than judge absolutely, which in an overload ejects the first endpoint to reach
        // `minRequests`.
        return false;
    }
    own.requests >= u64::from(relative_min_requests(limits.error_rate_min_requests))
        && own.failures >= RELATIVE_MIN_FAILURES
        && recent.failures >= RELATIVE_MIN_FAILURES
        && recent.rate() >= threshold / 2.0
        && {
            let beyond = streak::beyond_floor(wilson_lower(peers, streak::PEER_Z));
            let z = CONFIDENCE_Z + beyond * (STRICT_Z - CONFIDENCE_Z);
            wilson_lower(own, z) > wilson_upper(peers, z)
        }
}

/// Lower bound of the Wilson score interval of `c`'s failure share at `z` (0 without requests).
pub(super) fn wilson_lower(c: WindowCounts, z: f64) -> f64 {
    if c.requests == 0 {
        return 0.0;
    }
    let (centre, margin, scale) = wilson(c, z);
    ((centre - margin) / scale).max(0.0)
}

/// Upper bound of the Wilson score interval of `c`'s failure share at `z` (1 without requests).
pub(super) fn wilson_upper(c: WindowCounts, z: f64) -> f64 {
    if c.requests == 0 {
        return 1.0;
    }
    let (centre, margin, scale) = wilson(c, z);
    ((centre + margin) / scale).min(1.0)
}

fn wilson(c: WindowCounts, z: f64) -> (f64, f64, f64) {
    let n = c.requests as f64;
    let p = c.rate();
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let margin = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    (centre, margin, 1.0 + z2 / n)
}

#[cfg(test)]
mod tests;
