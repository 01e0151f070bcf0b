//! Tests of the latency-aware pick (`PeakEwma`, the default): lower latency wins, load still
//! counts, a slow endpoint keeps a share small enough to matter and large enough to show its
//! recovery, and the recovery is followed within seconds. Simulated time throughout.

use super::tests::counts;
use super::*;
use crate::balance::test_support::{Backend, Fixture, ms, simulate, simulate_over_time};
use crate::outcome::Verdict;

/// Endpoint `index`'s percentage of the picks sent in `[from_ms, to_ms)`.
fn share(picks: &[(u64, usize)], index: usize, from_ms: u64, to_ms: u64) -> f64 {
    let window: Vec<usize> = picks
        .iter()
        .filter(|(at, _)| (from_ms..to_ms).contains(at))
        .map(|&(_, i)| i)
        .collect();
    let mine = window.iter().filter(|&&i| i == index).count();
    100.0 * mine as f64 / window.len().max(1) as f64
}

#[test]
fn the_lower_latency_endpoint_wins_most_ties_and_the_slower_one_still_some() {
    let fixture = Fixture::new(2);
    fixture.succeed(0, ms(200), fixture.t0);
    fixture.succeed(1, ms(50), fixture.t0);
    let selector = fixture.selector(Algorithm::PeakEwma);
    // Nothing in flight: the coin gives the 4x slower one odds of 50 / (200 + 50).
    let got = counts(&fixture, &selector, 1_000, None, &[], 8);
    assert!((140..=260).contains(&got[0]), "{got:?}");
}

#[test]
fn on_a_tie_a_much_slower_endpoint_is_weighed_as_at_most_five_times_slower() {
    let fixture = Fixture::new(2);
    fixture.succeed(0, ms(1_000), fixture.t0);
    fixture.succeed(1, ms(1), fixture.t0);
    let selector = fixture.selector(Algorithm::PeakEwma);
    // 1,000 times slower, weighed as 5 times: about one tie in six.
    let got = counts(&fixture, &selector, 3_000, None, &[], 3);
    assert!((380..=620).contains(&got[0]), "{got:?}");
}

#[test]
fn when_the_loads_differ_the_real_latencies_are_compared() {
    let fixture = Fixture::new(2);
    fixture.succeed(0, ms(1_000), fixture.t0);
    fixture.succeed(1, ms(1), fixture.t0);
    // 1 ms x 6 in flight still costs far less than 1,000 ms x 1: the capped ratio of a tie
    // must not send a request to the slow one.
    let _queue = fixture.hold(1, 5);
    let selector = fixture.selector(Algorithm::PeakEwma);
    assert_eq!(counts(&fixture, &selector, 200, None, &[], 4), [0, 200]);
}

#[test]
fn latency_is_weighed_against_requests_in_flight() {
    let fixture = Fixture::new(2);
    fixture.succeed(0, ms(200), fixture.t0);
    fixture.succeed(1, ms(50), fixture.t0);
    // 50 ms × 5 in flight costs more than 200 ms × 1.
    let _queue = fixture.hold(1, 4);
    let selector = fixture.selector(Algorithm::PeakEwma);
    assert_eq!(counts(&fixture, &selector, 100, None, &[], 9), [100, 0]);
}

#[test]
fn fast_failures_do_not_make_an_endpoint_look_fast() {
    let fixture = Fixture::new(2);
    fixture.succeed(0, ms(200), fixture.t0);
    fixture.succeed(1, ms(100), fixture.t0);
    for n in 1..=20u64 {
        fixture.loads[0]
            .start()
            .finish(Verdict::GatewayError, ms(2), fixture.at(n));
    }
    let selector = fixture.selector(Algorithm::PeakEwma);
    // Its estimate stays 200 ms and its ~18% error rate raises its cost: far under half.
    let got = counts(&fixture, &selector, 1_000, None, &[], 10);
    assert!(got[0] < 250, "{got:?}");
}

#[test]
fn a_new_endpoint_with_no_samples_is_tried_at_once() {
    let fixture = Fixture::new(3);
    fixture.succeed(0, ms(100), fixture.t0);
    fixture.succeed(1, ms(50), fixture.t0);
    let selector = fixture.selector(Algorithm::PeakEwma);
    let got = counts(&fixture, &selector, 300, None, &[], 13);
    // It borrows its rival's latency, so it wins about half of the pairs it is drawn in.
    assert!(got[2] >= 60, "{got:?}");
}

#[test]
fn a_mildly_slower_endpoint_gets_less_than_under_least_request() {
    // 10 ms against 25 ms at 50 requests/s: in-flight counts seldom differ, so least request
    // sees almost nothing; the latency-aware pick gives the slow one well under a third.
    let backends = [
        Backend::healthy(10),
        Backend::healthy(10),
        Backend::healthy(25),
    ];
    let mut slow_share = Vec::new();
    for algorithm in [Algorithm::PeakEwma, Algorithm::LeastRequest] {
        let fixture = Fixture::new(3);
        let selector = fixture.selector(algorithm);
        let got = simulate(&fixture, &selector, &backends, 5_000, 20, 21);
        slow_share.push(got[2] as f64 / 5_000.0);
    }
    let (latency_aware, least_request) = (slow_share[0], slow_share[1]);
    assert!(
        (0.08..0.25).contains(&latency_aware),
        "PeakEwma share {latency_aware}"
    );
    assert!(
        least_request > latency_aware + 0.05,
        "LeastRequest {least_request} against PeakEwma {latency_aware}"
    );
}

#[test]
fn a_slow_endpoint_keeps_a_small_share_and_has_its_third_back_within_two_seconds_of_recovering() {
    // 200 requests/s over three endpoints answering in 1 ms; endpoint 2 answers in 100 ms from
    // 3 s to 8 s.
    for seed in [1, 2, 3] {
        let fixture = Fixture::new(3);
        let selector = fixture.selector(Algorithm::PeakEwma);
        let slow = |index: usize, at_ms: u64| {
            if index == 2 && (3_000..8_000).contains(&at_ms) {
                Backend::healthy(100)
            } else {
                Backend::healthy(1)
            }
        };
        let picks = simulate_over_time(&fixture, &selector, 3_000, 5, seed, slow);
        let while_slow = share(&picks, 2, 4_000, 8_000);
        assert!(
            (0.5..=8.0).contains(&while_slow),
            "seed {seed}: {while_slow:.1}% while slow (sampled, not starved, not a third)"
        );
        let second_after = share(&picks, 2, 9_000, 10_000);
        assert!(
            second_after >= 25.0,
            "seed {seed}: {second_after:.1}% in the second second after recovering"
        );
    }
}
