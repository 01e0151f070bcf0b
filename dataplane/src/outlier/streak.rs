//! The streak rules' judgement: is a run of answered failures this endpoint's own, or something
//! the whole pool shows?
//!
//! When every endpoint fails a share `q` of its requests independently, a run of `n` failures
//! in a row turns up on every endpoint alike, about once per `1 / q^n` requests: at 20%, a run
//! of three once in 125. So "three 503s in a row" means "this endpoint is broken" only when its
//! peers do not fail like that. The rule here asks for a run long enough that the peers, failing
//! at their share, would show it too rarely to matter:
//! - while the peers fail no more than [`NOISE_FLOOR`] (judged on the lower confidence bound of
//!   their share, so only a pool that *clearly* fails more changes anything), the configured
//!   limit is asked for, as before: a lone broken endpoint among healthy peers is ejected on the
//!   same request as ever;
//! - above it, the run must carry more evidence against "it is one of them": from the limit's
//!   own `limit × ln(1 / NOISE_FLOOR)` at the floor, rising linearly to [`STRICT_EVIDENCE`]
//!   (a run the peers would show once in ten million tries) at twice the floor and beyond. So
//!   3 in a row at a 5% floor, 6 when the peers shed 10%, 10 at 20%, 22 at 50%.
//!
//! Why grow the evidence asked for instead of a fixed significance: any fixed one is reached
//! by chance in a long enough uniform overload, and a pool that fails everywhere is exactly the
//! one that must not lose capacity (each ejection loads the rest). The cost is a slower verdict
//! on an endpoint that fails *more* than peers who are themselves failing a lot; the error-rate
//! rule (`relative.rs`) still judges that one on its share.
//!
//! How well the peers' share is known matters as much as its value. It is estimated from the
//! pool's window without this endpoint (Wilson bounds at [`PEER_Z`]): when the interval is no
//! wider than the floor itself, its lower bound is used (so a pool at the floor is not taken
//! for one above it by sampling noise, and a lone outlier waits no longer than before); when it
//! is wider (a pool just started, a quiet pool, peers with hardly any requests) its upper
//! bound is, capped at [`UNKNOWN_SHARE`]: not knowing how the peers fare is no evidence that
//! they are fine, and a restart in the middle of an overload must not eject on the first
//! streak. Connection failures still eject a dead endpoint at once there; an endpoint that
//! answers 503 to everything is ejected after a longer run, or by the error rate.
//!
//! Alone in the pool (no other endpoint is counted): the limit alone decides, as before. There
//! is nothing to compare with, and an ejection costs nothing there (panic mode keeps routing a
//! pool that has nothing else) while it still reports the fault.
//!
//! Connection-level failures never come here: a refused or silent connection is the endpoint's
//! (or its node's) own problem however the peers fare, so its streak stays absolute
//! (`detector.rs`).

use super::WindowCounts;
use super::relative::{wilson_lower, wilson_upper};

/// The peers' failure share up to which a streak keeps its configured meaning: the balancer's
/// own noise floor for error rates (`crate::balance::load`).
pub const NOISE_FLOOR: f64 = 0.05;

/// The evidence (natural log of the odds against the peers' share) a run needs once the peers
/// fail at twice the floor or more: ln(10^7), a run the peers would show once in ten million.
pub const STRICT_EVIDENCE: f64 = 16.118_095_650_958_32;

/// z of the Wilson bounds on the peers' share: about 97.7% one-sided each.
pub const PEER_Z: f64 = 2.0;

/// The share assumed at worst for peers whose share is not known to within the floor: half
/// their requests failing (a run of 24 for a limit of 3).
pub const UNKNOWN_SHARE: f64 = 0.5;

/// The run of answered failures an endpoint needs before a streak rule with `limit` trips,
/// given its peers' counts over the error-rate window (the pool's window without its own), or
/// `None` when no other endpoint is counted. A limit of 0 stays disabled.
pub fn needed(limit: u32, peers: Option<WindowCounts>) -> u32 {
    let Some(peers) = peers else {
        return limit;
    };
    if limit == 0 {
        return 0;
    }
    let share = peer_share(peers);
    if share <= NOISE_FLOOR {
        return limit;
    }
    let floor = f64::from(limit) * (1.0 / NOISE_FLOOR).ln();
    let evidence = floor + overload(peers) * (STRICT_EVIDENCE - floor).max(0.0);
    // At a share of 1 every peer fails everything and no run sets anyone apart.
    let per_failure = (1.0 / share).ln();
    if per_failure <= 0.0 {
        return u32::MAX;
    }
    // A hair below the exact quotient still counts, so float rounding cannot add a request.
    let run = (evidence / per_failure - 1e-9).ceil();
    if run >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (run as u32).max(limit)
    }
}

/// How clearly the peers fail beyond the noise floor: 0 at or below it, rising linearly to 1
/// at twice the floor and beyond (on [`peer_share`]).
pub fn overload(peers: WindowCounts) -> f64 {
    beyond_floor(peer_share(peers))
}

/// `share` placed between the noise floor (0) and twice the floor (1). The error-rate rule asks
/// for more confidence by the same measure (`relative.rs`).
pub fn beyond_floor(share: f64) -> f64 {
    ((share - NOISE_FLOOR) / NOISE_FLOOR).clamp(0.0, 1.0)
}

/// The peers' failure share the rule reckons with: the lower Wilson bound when the interval is
/// no wider than the floor, else the upper one (at most [`UNKNOWN_SHARE`] above the lower).
pub fn peer_share(peers: WindowCounts) -> f64 {
    let (lower, upper) = (wilson_lower(peers, PEER_Z), wilson_upper(peers, PEER_Z));
    if upper - lower <= NOISE_FLOOR {
        lower
    } else {
        upper.min(UNKNOWN_SHARE).max(lower)
    }
}

#[cfg(test)]
mod tests;
