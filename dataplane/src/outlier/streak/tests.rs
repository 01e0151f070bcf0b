use super::{NOISE_FLOOR, STRICT_EVIDENCE, needed, peer_share};
use crate::outlier::WindowCounts;

fn c(requests: u64, failures: u64) -> WindowCounts {
    WindowCounts { requests, failures }
}

/// Peer request counts the exhaustive tests sweep: a quiet pool to a busy one.
const VOLUMES: [u64; 9] = [1, 5, 20, 50, 100, 400, 1_300, 2_000, 5_000];

#[test]
fn alone_in_the_pool_the_limit_decides_as_before() {
    for limit in [0, 1, 3, 5, 10] {
        assert_eq!(needed(limit, None), limit);
    }
}

#[test]
fn a_zero_limit_stays_disabled_whatever_the_peers_show() {
    for n in VOLUMES {
        for f in [0, n / 2, n] {
            assert_eq!(needed(0, Some(c(n, f))), 0, "{n}/{f}");
        }
    }
}

#[test]
fn peers_at_the_noise_floor_with_enough_traffic_keep_the_configured_limit() {
    // A busy pool: 200 requests/s for 10 s over two or nine peers.
    for (n, f) in [
        (1_300, 0),
        (1_300, 13),
        (1_300, 65),
        (1_800, 90),
        (200, 0),
        (80, 0),
    ] {
        assert_eq!(needed(3, Some(c(n, f))), 3, "{f} of {n}");
        assert_eq!(needed(5, Some(c(n, f))), 5, "{f} of {n}");
    }
}

#[test]
fn the_run_asked_for_grows_with_what_the_peers_shed() {
    let runs: Vec<u32> = [0.05, 0.1, 0.2, 0.3, 0.5]
        .iter()
        .map(|share| needed(3, Some(c(2_000, (2_000.0 * share) as u64))))
        .collect();
    assert_eq!(runs, vec![3, 6, 10, 13, 22]);
    // The 5xx rule's default limit.
    assert_eq!(needed(5, Some(c(2_000, 400))), 10);
}

#[test]
fn peers_known_too_roughly_are_assumed_to_fail_at_their_upper_bound() {
    // The first requests of a pool, or a quiet one: nothing says the peers are fine.
    assert_eq!(needed(3, Some(c(0, 0))), 24, "no peer request at all");
    assert_eq!(needed(3, Some(c(8, 0))), 15);
    assert_eq!(needed(3, Some(c(20, 0))), 9);
    assert_eq!(needed(3, Some(c(20, 4))), 19);
    // The interval narrows as the requests come in, and the clean peers' limit returns.
    assert_eq!(needed(3, Some(c(80, 0))), 3);
    assert!(peer_share(c(8, 0)) > 0.3 && peer_share(c(8, 0)) <= 0.5);
}

#[test]
fn never_less_than_the_limit_and_monotone_in_the_peers_failures() {
    for limit in [1, 3, 5, 8] {
        for n in VOLUMES {
            let mut last = 0;
            for f in 0..=n {
                let run = needed(limit, Some(c(n, f)));
                assert!(run >= limit, "limit {limit}, {f} of {n}");
                // More failures among the same requests never ask for a shorter run (the
                // switch from the upper to the lower bound happens only as `n` grows).
                if n >= 400 {
                    assert!(run >= last, "limit {limit}: {f} of {n} asks {run} < {last}");
                }
                last = run;
            }
        }
    }
}

#[test]
fn above_twice_the_floor_a_peer_like_endpoint_shows_the_run_once_in_ten_million_at_most() {
    for limit in [1, 3, 5] {
        for n in VOLUMES {
            for f in 0..=n {
                let share = peer_share(c(n, f));
                let run = needed(limit, Some(c(n, f)));
                if share <= NOISE_FLOOR {
                    assert_eq!(run, limit, "{f} of {n}");
                    continue;
                }
                // Chance that one of the peers shows this run, failing at the share reckoned
                // with: never above the limit's chance at the floor, and at most e^-16.1 from
                // twice the floor on.
                let chance = share.powf(f64::from(run));
                let at_floor = NOISE_FLOOR.powf(f64::from(limit));
                assert!(chance <= at_floor * 1.000_001, "{f} of {n}: {chance}");
                if share >= 2.0 * NOISE_FLOOR {
                    assert!(
                        chance <= (-STRICT_EVIDENCE).exp() * 1.000_001,
                        "limit {limit}, {f} of {n}: run {run}, chance {chance}"
                    );
                }
            }
        }
    }
}

#[test]
fn with_plenty_of_peer_traffic_the_point_share_is_covered_too() {
    // The bound used is below the peers' measured share; with 1 300 requests or more the run
    // still makes a peer failing at the *measured* share (12% to 50%: an overload) show it
    // less than once in a million.
    for n in [1_300u64, 2_000, 5_000] {
        for f in 0..=n / 2 {
            let point = f as f64 / n as f64;
            if point < 0.12 {
                continue;
            }
            let run = needed(3, Some(c(n, f)));
            assert!(point.powf(f64::from(run)) <= 1e-6, "{f} of {n}: run {run}");
        }
    }
}
