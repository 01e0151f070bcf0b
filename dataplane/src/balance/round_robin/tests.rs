//! Tests of smooth weighted round robin: nginx's order, exact cycles, skipped peers, the cursor
//! that outlives selectors, and the large-pool construction.

use rollcall_api::policy::Algorithm;

use super::*;
use crate::balance::Selector;
use crate::balance::test_support::{Fixture, TestEndpoint, addr, config};

fn names(picks: impl IntoIterator<Item = usize>) -> String {
    picks
        .into_iter()
        .map(|i| char::from(b'a' + u8::try_from(i).unwrap_or(25)))
        .collect()
}

#[test]
fn weights_five_one_one_give_nginxs_smooth_order() {
    let schedule = Schedule::new([5.0, 1.0, 1.0]);
    let cursor = AtomicU64::new(0);
    let picks = (0..14).filter_map(|_| schedule.next(&cursor, |_| false));
    assert_eq!(names(picks), "aabacaaaabacaa");
}

#[test]
fn every_peer_gets_exactly_its_weight_per_cycle() {
    let schedule = Schedule::new([3.0, 2.0, 1.0, 0.5]);
    // One cycle is 6.5 weight units, i.e. 13 picks; run ten.
    assert_eq!(schedule.cycle().len(), 13);
    let cursor = AtomicU64::new(0);
    let mut counts = [0; 4];
    for _ in 0..130 {
        if let Some(i) = schedule.next(&cursor, |_| false) {
            counts[i] += 1;
        }
    }
    assert_eq!(counts, [60, 40, 20, 10]);
}

#[test]
fn a_skipped_peer_loses_its_turn_and_the_rotation_goes_on() {
    let schedule = Schedule::new([1.0, 1.0, 1.0]);
    let cursor = AtomicU64::new(0);
    let skipping_b = (0..4).filter_map(|_| schedule.next(&cursor, |i| i == 1));
    assert_eq!(names(skipping_b), "acac");
    let again = (0..3).filter_map(|_| schedule.next(&cursor, |_| false));
    assert_eq!(names(again), "abc");
    assert_eq!(schedule.next(&cursor, |_| true), None);
}

#[test]
fn large_pools_with_unequal_weights_keep_exact_counts() {
    // 3 000 peers of weights 1 and 2: too much work for the smooth construction.
    let weights: Vec<f64> = (0..3_000)
        .map(|i| if i % 2 == 0 { 1.0 } else { 2.0 })
        .collect();
    let schedule = Schedule::new(weights.iter().copied());
    let mut counts = vec![0u32; weights.len()];
    for &peer in schedule.cycle() {
        counts[peer as usize] += 1;
    }
    for (i, count) in counts.iter().enumerate() {
        assert_eq!(*count, if i % 2 == 0 { 1 } else { 2 }, "peer {i}");
    }
    // Spread out: no peer twice in a row.
    assert!(schedule.cycle().windows(2).all(|w| w[0] != w[1]));
}

#[test]
fn equal_weights_rotate_in_order_however_many_peers() {
    let schedule = Schedule::new(std::iter::repeat_n(0.3, 10_000));
    assert_eq!(schedule.cycle().len(), 10_000);
    assert!(
        schedule
            .cycle()
            .iter()
            .enumerate()
            .all(|(i, &p)| p as usize == i)
    );
}

#[test]
fn the_selector_follows_the_same_order_over_static_weights() {
    let fixture = Fixture::with_weights(&[5, 1, 1]);
    let selector = fixture.selector(Algorithm::RoundRobin);
    let picks = (0..7).filter_map(|_| selector.pick(None, &[], fixture.t0));
    let picks = picks.map(|c| Fixture::index(c.addr()));
    assert_eq!(names(picks), "aabacaa");
}

#[test]
fn slow_start_weight_factor_lowers_the_share_exactly() {
    let fixture = Fixture::new(3);
    let selector = fixture.selector_with(&config(Algorithm::RoundRobin), &[1.0, 1.0, 0.5]);
    let mut counts = [0; 3];
    for _ in 0..500 {
        if let Some(c) = selector.pick(None, &[], fixture.t0) {
            counts[Fixture::index(c.addr())] += 1;
        }
    }
    assert_eq!(counts, [200, 200, 100]);
}

#[test]
fn the_selector_rotates_over_what_the_request_has_not_tried() {
    let fixture = Fixture::new(3);
    let selector = fixture.selector(Algorithm::RoundRobin);
    let tried = [addr(1)];
    let picks = (0..4).filter_map(|_| selector.pick(None, &tried, fixture.t0));
    let picks = picks.map(|c| Fixture::index(c.addr()));
    assert_eq!(names(picks), "bcbc");
}

#[test]
fn the_rotation_continues_across_selector_rebuilds() {
    // The pool rebuilds its selector on every health change; a quiet pool that sends one
    // request per rebuild must still rotate.
    let fixture = Fixture::new(3);
    let mut picks = Vec::new();
    for _ in 0..6 {
        let selector: Selector<TestEndpoint> = fixture.selector(Algorithm::RoundRobin);
        picks.extend(
            selector
                .pick(None, &[], fixture.t0)
                .map(|c| Fixture::index(c.addr())),
        );
    }
    assert_eq!(names(picks), "abcabc");
}
