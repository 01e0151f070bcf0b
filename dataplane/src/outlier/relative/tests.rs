use std::time::Duration;

use super::{recent_len, relative_min_requests};
use crate::outlier::{Limits, WindowCounts};

fn limits() -> Limits {
    Limits {
        consecutive_gateway_errors: 0,
        consecutive_5xx: 0,
        error_rate_threshold: 0.2,
        error_rate_window: Duration::from_secs(10),
        error_rate_min_requests: 20,
    }
}

fn c(requests: u64, failures: u64) -> WindowCounts {
    WindowCounts { requests, failures }
}

/// The rule with the endpoint's recent outcomes failing at the same share as its window;
/// [`NO_PEERS`] means alone in the pool.
fn trips(own: WindowCounts, peers: WindowCounts, l: &Limits) -> bool {
    let n = own.requests.min(20);
    let recent = c(n, (own.failures * n).div_ceil(own.requests.max(1)));
    super::trips(own, recent, (peers != NO_PEERS).then_some(peers), l)
}

const NO_PEERS: WindowCounts = WindowCounts {
    requests: 0,
    failures: 0,
};

#[test]
fn without_peers_the_absolute_rule_applies_at_its_edges() {
    let l = limits();
    assert!(!trips(c(19, 19), NO_PEERS, &l), "below minRequests");
    assert!(
        !trips(c(20, 4), NO_PEERS, &l),
        "exactly the threshold is not above it"
    );
    assert!(trips(c(20, 5), NO_PEERS, &l));
    // Peers with fewer than minRequests are not enough to compare with, nor to judge
    // absolutely: the rule waits for them.
    assert!(!trips(c(20, 5), c(19, 0), &l));
    assert!(!trips(c(100, 100), c(1, 0), &l));
    assert!(trips(c(100, 100), c(20, 0), &l));
}

#[test]
fn a_uniform_overload_is_not_an_outlier() {
    let l = limits();
    // Every endpoint sheds about 20%; this one a little more, as some endpoint always does.
    for (own, peers) in [
        (c(20, 6), c(400, 80)),
        (c(100, 30), c(400, 80)),
        (c(300, 75), c(600, 120)),
        (c(50, 50), c(500, 480)),
    ] {
        assert!(!trips(own, peers, &l), "{own:?} against {peers:?}");
    }
}

#[test]
fn an_endpoint_failing_unlike_clean_peers_trips_on_few_requests_even_below_the_threshold() {
    let l = limits();
    assert_eq!(relative_min_requests(20), 5);
    assert!(
        !trips(c(4, 4), c(400, 0), &l),
        "fewer than the relative minimum"
    );
    assert!(!trips(c(5, 2), c(1000, 0), &l), "fewer than three failures");
    assert!(trips(c(5, 3), c(400, 0), &l));
    // 15%: under the 20% threshold, but its peers fail 0.1%.
    assert!(trips(c(200, 30), c(2000, 2), &l));
    // Recently below half the threshold it never trips, however clean the peers.
    assert!(!super::trips(
        c(1000, 99),
        c(64, 6),
        Some(c(100_000, 0)),
        &l
    ));
    assert!(super::trips(
        c(1000, 100),
        c(20, 3),
        Some(c(100_000, 0)),
        &l
    ));
}

#[test]
fn a_moderate_outlier_needs_more_evidence_than_a_stark_one() {
    let l = limits();
    // Twice the peers' 15%: not yet clear at 20 requests, nor at 200 while the peers
    // themselves shed three times the noise floor (more confidence is asked then), clear at
    // 1 000.
    assert!(!trips(c(20, 6), c(1000, 150), &l));
    assert!(!trips(c(200, 60), c(1000, 150), &l));
    assert!(trips(c(1000, 300), c(1000, 150), &l));
    // Three times peers at the floor: clear at 200, at the old confidence.
    assert!(trips(c(200, 30), c(1000, 50), &l));
}

#[test]
fn noise_on_a_busy_endpoint_does_not_trip() {
    let l = limits();
    // One in a hundred failing, peers clean: far below half the threshold.
    assert!(!trips(c(700, 7), c(1400, 0), &l));
    assert!(!trips(c(5, 0), c(1400, 0), &l));
}

#[test]
fn a_zero_threshold_disables_the_rule() {
    let l = Limits {
        error_rate_threshold: 0.0,
        ..limits()
    };
    assert!(!trips(c(100, 100), NO_PEERS, &l));
    assert!(!trips(c(100, 100), c(1000, 0), &l));
}

#[test]
fn relative_minimum_is_a_quarter_of_min_requests_within_its_bounds() {
    assert_eq!(relative_min_requests(0), 1);
    assert_eq!(relative_min_requests(1), 1);
    assert_eq!(relative_min_requests(3), 3);
    assert_eq!(relative_min_requests(20), 5);
    assert_eq!(relative_min_requests(100), 25);
}

#[test]
fn a_small_min_requests_still_compares_with_peers() {
    let l = Limits {
        error_rate_min_requests: 1,
        ..limits()
    };
    assert!(
        trips(c(1, 1), NO_PEERS, &l),
        "absolute: 100% of one request"
    );
    assert!(
        !trips(c(3, 3), c(3, 1), &l),
        "against 1 in 3, 3 in 3 is no evidence"
    );
    assert!(trips(c(3, 3), c(300, 0), &l));
}

#[test]
fn recent_failures_count_even_when_older_successes_dilute_the_window() {
    let l = limits();
    // 200 successes before the fault, then 4 failures in its last 20: 2% of the window.
    let own = c(220, 4);
    let peers = c(3000, 0);
    assert!(super::trips(own, c(20, 4), Some(peers), &l));
    // The same window with the failures long past: nothing recent to eject for.
    assert!(!super::trips(own, c(20, 0), Some(peers), &l));
    // Recent failures below half the threshold, or fewer than three, do not trip.
    assert!(!super::trips(own, c(40, 3), Some(peers), &l));
    assert!(!super::trips(own, c(10, 2), Some(peers), &l));
}

#[test]
fn recent_means_min_requests_within_bounds() {
    assert_eq!(recent_len(0), 5);
    assert_eq!(recent_len(20), 20);
    assert_eq!(recent_len(1000), 64);
}
