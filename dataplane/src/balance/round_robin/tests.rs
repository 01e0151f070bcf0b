//! Tests of smooth weighted round robin: nginx's order, exact cycles, skipped peers.

use rollcall_api::policy::Algorithm;

use super::*;
use crate::balance::Selector;
use crate::balance::test_support::{Fixture, addr, config};

/// A rotation with its scores, as the pool would keep them.
fn rotation(weights: &[f64]) -> (SmoothRoundRobin, Vec<AtomicI64>) {
    let scores = weights.iter().map(|_| AtomicI64::new(0)).collect();
    (SmoothRoundRobin::new(weights.iter().copied()), scores)
}

fn names(picks: impl IntoIterator<Item = usize>) -> String {
    picks
        .into_iter()
        .map(|i| char::from(b'a' + u8::try_from(i).unwrap_or(25)))
        .collect()
}

#[test]
fn weights_five_one_one_give_nginxs_smooth_order() {
    let (rr, scores) = rotation(&[5.0, 1.0, 1.0]);
    let picks = (0..14).filter_map(|_| rr.next(|i| &scores[i], |_| false));
    assert_eq!(names(picks), "aabacaaaabacaa");
}

#[test]
fn every_peer_gets_exactly_its_weight_per_cycle() {
    let (rr, scores) = rotation(&[3.0, 2.0, 1.0, 0.5]);
    let mut counts = [0; 4];
    // One cycle is 6.5 weight units, i.e. 13 picks; run ten.
    for _ in 0..130 {
        if let Some(i) = rr.next(|i| &scores[i], |_| false) {
            counts[i] += 1;
        }
    }
    assert_eq!(counts, [60, 40, 20, 10]);
}

#[test]
fn a_skipped_peer_neither_gains_nor_pays() {
    let (rr, scores) = rotation(&[1.0, 1.0, 1.0]);
    let skipping_b = (0..4).filter_map(|_| rr.next(|i| &scores[i], |i| i == 1));
    assert_eq!(names(skipping_b), "acac");
    let again = (0..3).filter_map(|_| rr.next(|i| &scores[i], |_| false));
    assert_eq!(names(again), "abc");
    assert_eq!(rr.next(|i| &scores[i], |_| true), None);
}

#[test]
fn the_selector_follows_the_same_order_over_static_weights() {
    let fixture = Fixture::with_weights(&[5, 1, 1]);
    let selector = fixture.selector(Algorithm::RoundRobin);
    let picks = (0..7).filter_map(|_| selector.pick(None, &[], fixture.t0));
    let picks = picks.map(|c| Fixture::index(c.addr));
    assert_eq!(names(picks), "aabacaa");
}

#[test]
fn slow_start_weight_factor_lowers_the_share_exactly() {
    let fixture = Fixture::new(3);
    let selector = fixture.selector_with(&config(Algorithm::RoundRobin), &[1.0, 1.0, 0.5]);
    let mut counts = [0; 3];
    for _ in 0..500 {
        if let Some(c) = selector.pick(None, &[], fixture.t0) {
            counts[Fixture::index(c.addr)] += 1;
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
    let picks = picks.map(|c| Fixture::index(c.addr));
    assert_eq!(names(picks), "bcbc");
}

#[test]
fn the_rotation_continues_across_selector_rebuilds() {
    // The pool rebuilds its selector on every health tick; a quiet pool that sends one request
    // per rebuild must still rotate.
    let fixture = Fixture::new(3);
    let mut picks = Vec::new();
    for _ in 0..6 {
        let selector: Selector = fixture.selector(Algorithm::RoundRobin);
        picks.extend(
            selector
                .pick(None, &[], fixture.t0)
                .map(|c| Fixture::index(c.addr)),
        );
    }
    assert_eq!(names(picks), "abcabc");
}
