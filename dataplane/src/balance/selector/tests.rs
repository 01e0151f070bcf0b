//! Tests of the selector: exclusions, power of two choices, peak EWMA and the share cap.

use super::*;
use crate::balance::InFlight;
use crate::balance::test_support::{
    ALL, Backend, Fixture, TestEndpoint, addr, config, ms, rng, simulate,
};
use crate::outcome::Verdict;

/// Which endpoint indices `picks` picks land on, with the same key and exclusions each time.
pub(super) fn counts(
    fixture: &Fixture,
    selector: &Selector<TestEndpoint>,
    picks: usize,
    key: Option<&[u8]>,
    exclude: &[SocketAddr],
    seed: u64,
) -> Vec<u64> {
    let mut rng = rng(seed);
    let mut counts = vec![0; fixture.loads.len()];
    for _ in 0..picks {
        if let Some(c) = selector.pick_with(&mut rng, key, exclude, fixture.t0) {
            counts[Fixture::index(c.addr())] += 1;
        }
    }
    counts
}

#[test]
fn an_empty_candidate_set_picks_nothing_with_every_algorithm() {
    let fixture = Fixture::new(0);
    for algorithm in ALL {
        let selector = fixture.selector(algorithm);
        assert!(selector.is_empty());
        assert!(selector.pick(Some(b"user-1"), &[], fixture.t0).is_none());
        assert!(selector.pick(None, &[], fixture.t0).is_none());
    }
}

#[test]
fn every_candidate_excluded_picks_nothing() {
    let fixture = Fixture::new(3);
    let tried = [addr(1), addr(2), addr(3)];
    for algorithm in ALL {
        let selector = fixture.selector(algorithm);
        assert!(selector.pick(Some(b"user-1"), &tried, fixture.t0).is_none());
        assert!(selector.pick(None, &tried, fixture.t0).is_none());
    }
}

#[test]
fn excluded_endpoints_are_never_picked_by_any_algorithm() {
    for algorithm in ALL {
        let fixture = Fixture::new(5);
        let selector = fixture.selector(algorithm);
        let tried = [addr(2), addr(4)];
        let mut rng = rng(7);
        let mut seen = [0u64; 5];
        for n in 0..2_000u32 {
            let key = n.to_be_bytes();
            let key = (n % 2 == 0).then_some(&key[..]);
            let picked = selector.pick_with(&mut rng, key, &tried, fixture.at(u64::from(n)));
            let Some(picked) = picked else {
                panic!("{algorithm:?} picked nothing with 3 endpoints allowed");
            };
            seen[Fixture::index(picked.addr())] += 1;
        }
        assert_eq!((seen[1], seen[3]), (0, 0), "{algorithm:?}: {seen:?}");
        assert!(
            seen.iter().step_by(2).all(|&n| n > 0),
            "{algorithm:?}: {seen:?}"
        );
    }
}

#[test]
fn the_last_allowed_endpoint_is_picked_by_every_algorithm() {
    for algorithm in ALL {
        let fixture = Fixture::new(3);
        let selector = fixture.selector(algorithm);
        let _busy = fixture.hold(2, 50);
        let tried = [addr(1), addr(2)];
        let got = counts(&fixture, &selector, 200, Some(b"user-9"), &tried, 1);
        assert_eq!(got, [0, 0, 200], "{algorithm:?}");
    }
}

#[test]
fn repeated_addresses_keep_their_first_entry() {
    let fixture = Fixture::new(2);
    let mut candidates = fixture.candidates(&[]);
    candidates.push(candidates[0].clone());
    let selector = Selector::new(
        &config(Algorithm::LeastRequest),
        candidates,
        Arc::clone(&fixture.share),
    );
    assert_eq!(selector.candidates().len(), 2);
    assert!(
        selector
            .pick(None, &[addr(1), addr(2)], fixture.t0)
            .is_none()
    );
}

#[test]
fn hash_header_is_offered_only_when_hashing() {
    let fixture = Fixture::new(2);
    for algorithm in ALL {
        let want = (algorithm == Algorithm::RingHash).then_some("x-user");
        assert_eq!(fixture.selector(algorithm).hash_header(), want);
    }
}

#[test]
fn picks_are_counted_in_the_pools_share_window() {
    let fixture = Fixture::new(2);
    let selector = fixture.selector(Algorithm::RoundRobin);
    for _ in 0..4 {
        selector.pick(None, &[], fixture.t0);
    }
    assert_eq!(fixture.share.recent_total(fixture.t0), 4);
    assert_eq!(
        fixture
            .share
            .recent_picks(fixture.loads[0].picks(), fixture.t0),
        2
    );
}

#[test]
fn selectors_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Selector<TestEndpoint>>();
    shared::<Arc<ShareTracker>>();
}

#[test]
fn the_share_cap_carries_over_a_selector_rebuild() {
    let fixture = Fixture::new(4);
    let before = fixture.selector(Algorithm::LeastRequest);
    let others = [addr(2), addr(3), addr(4)];
    for _ in 0..100 {
        before.pick(None, &others, fixture.t0);
    }
    drop(before);
    // Endpoint 1 took every one of the last 100 picks; after the rebuild it looks idle, but
    // twice its quarter (plus slack) is far below what it already had.
    let after = fixture.selector(Algorithm::LeastRequest);
    let _busy: Vec<_> = (1..4).map(|i| fixture.hold(i, 10)).collect();
    assert_eq!(
        fixture
            .share
            .recent_picks(fixture.loads[0].picks(), fixture.t0),
        100
    );
    assert_eq!(counts(&fixture, &after, 20, None, &[], 2)[0], 0);
}

// === least request ===

#[test]
fn least_request_always_prefers_the_endpoint_with_fewer_requests_in_flight() {
    let fixture = Fixture::new(2);
    let selector = fixture.selector(Algorithm::LeastRequest);
    let _busy = fixture.hold(0, 5);
    assert_eq!(counts(&fixture, &selector, 300, None, &[], 3), [0, 300]);
}

#[test]
fn idle_least_request_shares_by_weight_instead_of_starving_a_ramping_endpoint() {
    let fixture = Fixture::new(2);
    // Endpoint 1 is at the start of its slow start: 10% of its weight.
    let selector = fixture.selector_with(&config(Algorithm::LeastRequest), &[0.1, 1.0]);
    let picked = counts(&fixture, &selector, 10_000, None, &[], 21);
    // Nothing in flight anywhere: each pair is settled by a coin at 1 : 10, so about 1 in 11.
    assert!((800..=1_020).contains(&picked[0]), "{picked:?}");
}

#[test]
fn idle_least_request_gives_a_failing_endpoint_a_smaller_share_not_none() {
    let fixture = Fixture::new(2);
    // Endpoint 1 fails one request in five: penalty 1 + 10 × (20% − 5%) = 2.5.
    for n in 0..500u64 {
        let verdict = if n % 5 == 4 {
            Verdict::GatewayError
        } else {
            Verdict::Success
        };
        fixture.loads[0]
            .start()
            .finish(verdict, ms(1), fixture.at(n));
    }
    let selector = fixture.selector(Algorithm::LeastRequest);
    let picked = counts(&fixture, &selector, 10_000, None, &[], 22);
    // A coin at 1 : 2.5: about 29% (fair would be 50%), so the detector still sees it fail.
    assert!((2_500..=3_200).contains(&picked[0]), "{picked:?}");
}

#[test]
fn least_request_never_picks_the_busiest_of_three() {
    let fixture = Fixture::new(3);
    let lb = LoadBalancer {
        max_share_multiple: 3.0,
        ..config(Algorithm::LeastRequest)
    };
    let selector = fixture.selector_with(&lb, &[]);
    let _a = fixture.hold(1, 2);
    let _b = fixture.hold(2, 4);
    let got = counts(&fixture, &selector, 3_000, None, &[], 4);
    assert_eq!(got[2], 0, "{got:?}");
    // The idle one wins every pair it is drawn in: two pairs of three.
    assert!((1_850..2_150).contains(&got[0]), "{got:?}");
}

#[test]
fn an_endpoint_that_looks_idle_is_held_to_its_share_multiple() {
    let fixture = Fixture::new(4);
    let lb = LoadBalancer {
        max_share_multiple: 1.5,
        ..config(Algorithm::LeastRequest)
    };
    let selector = fixture.selector_with(&lb, &[]);
    let _busy: Vec<_> = (1..4).map(|i| fixture.hold(i, 10)).collect();
    let mut rng = rng(5);
    let mut idle = 0;
    for n in 0..10_000u64 {
        let picked = selector.pick_with(&mut rng, None, &[], fixture.at(n));
        idle += u64::from(picked.is_some_and(|c| c.addr() == addr(1)));
    }
    // Power of two choices alone would give it half; the cap is 1.5 × a quarter.
    assert!((3_500..=3_800).contains(&idle), "idle endpoint got {idle}");
}

#[test]
fn a_fast_failing_endpoint_never_gets_more_than_its_fair_share() {
    // The incident: one of four endpoints fails 20% of requests in 8 ms while the others do
    // real work in 200 ms, so it always has the fewest requests in flight.
    let backends = [
        Backend::failing(8, 0.2),
        Backend::healthy(200),
        Backend::healthy(200),
        Backend::healthy(200),
    ];
    for algorithm in [Algorithm::LeastRequest, Algorithm::PeakEwma] {
        let fixture = Fixture::new(4);
        let selector = fixture.selector(algorithm);
        let got = simulate(&fixture, &selector, &backends, 10_000, 1, 11);
        // Fair share, plus the cap's slack of 5 picks per 2 s window.
        let fair = 10_000 / 4;
        assert!(got[0] <= fair + 30, "{algorithm:?}: {got:?}");
        assert!(
            got[1..].iter().all(|&n| n > 2_000),
            "{algorithm:?}: {got:?}"
        );
    }
}

#[test]
fn one_failure_among_successes_does_not_sideline_an_endpoint() {
    let fixture = Fixture::new(3);
    let selector = fixture.selector(Algorithm::LeastRequest);
    for n in 0..100u64 {
        fixture.loads[0]
            .start()
            .finish(Verdict::Success, ms(1), fixture.at(n));
    }
    // One application error: 1% of the recent outcomes, well within the noise floor.
    fixture.loads[0]
        .start()
        .finish(Verdict::GatewayError, ms(1), fixture.at(100));
    // Nothing in flight anywhere, as at low concurrency: every comparison is a tie on load.
    let picks = counts(&fixture, &selector, 3000, None, &[], 11);
    assert!(
        picks[0] > 800,
        "the endpoint with one failure got {} of 3000 picks: {picks:?}",
        picks[0]
    );
}

#[test]
fn error_penalty_makes_a_failing_endpoint_look_busier() {
    let fixture = Fixture::new(2);
    let selector = fixture.selector(Algorithm::LeastRequest);
    // Endpoint 0 fails one request in five and has nothing in flight; endpoint 1 has one.
    for n in 0..500u64 {
        let outcome = if n % 5 == 0 {
            Verdict::GatewayError
        } else {
            Verdict::Success
        };
        fixture.loads[0]
            .start()
            .finish(outcome, ms(8), fixture.at(n));
    }
    let _one = fixture.hold(1, 1);
    // Cost 1 × (1 + 10 × (0.2 − 0.05)) = 2.5 against 2 × 1 = 2.
    assert_eq!(counts(&fixture, &selector, 100, None, &[], 6), [0, 100]);
}

#[test]
fn slow_start_weight_factor_lowers_the_share_proportionally() {
    let backends = [Backend::healthy(50); 3];
    let fixture = Fixture::new(3);
    let selector = fixture.selector_with(&config(Algorithm::LeastRequest), &[1.0, 1.0, 0.5]);
    let got = simulate(&fixture, &selector, &backends, 10_000, 1, 12);
    let full = (got[0] + got[1]) as f64 / 2.0;
    let ratio = got[2] as f64 / full;
    assert!((0.4..0.6).contains(&ratio), "{got:?}, ratio {ratio}");
}

#[test]
fn weight_factors_out_of_range_are_clamped() {
    let fixture = Fixture::new(2);
    let selector = fixture.selector_with(&config(Algorithm::RoundRobin), &[f64::NAN, 7.0]);
    // Both count as weight 1: plain alternation.
    assert_eq!(counts(&fixture, &selector, 100, None, &[], 0), [50, 50]);
}

#[test]
fn pick_with_the_same_seed_is_reproducible() {
    let run = || {
        let fixture = Fixture::new(5);
        let selector = fixture.selector(Algorithm::LeastRequest);
        let mut rng = rng(42);
        let mut order = Vec::new();
        for n in 0..50u64 {
            if let Some(c) = selector.pick_with(&mut rng, None, &[], fixture.at(n)) {
                order.push(c.addr());
            }
        }
        order
    };
    assert_eq!(run(), run());
}

// --- stalls ---

/// Endpoint `index` has a try waiting since `t0` and has answered nothing since.
fn stall(fixture: &Fixture, index: usize) -> InFlight {
    fixture.loads[index].start_try(fixture.t0)
}

#[test]
fn a_stalled_endpoint_gets_no_new_try_from_any_algorithm() {
    for algorithm in ALL {
        let fixture = Fixture::new(3);
        let selector = fixture.selector(algorithm);
        let _stuck = stall(&fixture, 1);
        let mut rng = rng(3);
        let later = fixture.at(300);
        for n in 0..300u32 {
            let key = n.to_be_bytes();
            let picked = selector
                .pick_with(&mut rng, Some(&key[..]), &[], later)
                .expect("a pick");
            assert_ne!(picked.addr(), addr(2), "{algorithm:?}, pick {n}");
        }
    }
}

#[test]
fn before_the_stall_threshold_the_endpoint_is_picked_as_usual() {
    for algorithm in ALL {
        let fixture = Fixture::new(3);
        let selector = fixture.selector(algorithm);
        let _waiting = stall(&fixture, 1);
        // The others as busy, so least-request has no reason of its own to avoid it.
        let _busy = [fixture.hold(0, 1), fixture.hold(2, 1)];
        let mut rng = rng(5);
        let picked = (0..300u32)
            .filter_map(|n| {
                let key = n.to_be_bytes();
                selector.pick_with(&mut rng, Some(&key[..]), &[], fixture.at(100))
            })
            .filter(|c| c.addr() == addr(2))
            .count();
        assert!(picked > 0, "{algorithm:?}");
    }
}

#[test]
fn when_every_endpoint_is_stalled_the_algorithm_still_picks() {
    for algorithm in ALL {
        let fixture = Fixture::new(3);
        let selector = fixture.selector(algorithm);
        let _stuck: Vec<InFlight> = (0..3).map(|i| stall(&fixture, i)).collect();
        assert!(
            selector
                .pick(Some(b"user-1"), &[], fixture.at(1000))
                .is_some(),
            "{algorithm:?}"
        );
    }
}

#[test]
fn a_stalled_endpoint_is_the_last_resort_not_excluded() {
    for algorithm in ALL {
        let fixture = Fixture::new(2);
        let selector = fixture.selector(algorithm);
        let _stuck = stall(&fixture, 1);
        // The only other endpoint was tried already: the stalled one is all that is left.
        let picked = selector.pick(Some(b"user-1"), &[addr(1)], fixture.at(1000));
        assert_eq!(picked.map(|c| c.addr()), Some(addr(2)), "{algorithm:?}");
    }
}
