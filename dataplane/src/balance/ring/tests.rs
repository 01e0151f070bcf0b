//! Tests of ring hashing: stability when endpoints come and go, exclusions, bounded loads.

use std::net::SocketAddr;
use std::sync::Arc;

use rollcall_api::policy::{Algorithm, LoadBalancer};

use super::*;
use crate::balance::test_support::{Fixture, TestEndpoint, addr, config, rng};
use crate::balance::{Candidate, EndpointLoad, Selector, ShareTracker};

fn key(n: u32) -> Vec<u8> {
    format!("user-{n}").into_bytes()
}

/// A ring-hash selector over `candidates` with share windows of its own (fresh loads and
/// tracker), so the picks of one selector never cap another's.
fn ring_selector(
    fixture: &Fixture,
    lb: &LoadBalancer,
    candidates: Vec<Candidate<TestEndpoint>>,
) -> Selector<TestEndpoint> {
    let fresh = candidates
        .into_iter()
        .map(|c| Candidate {
            endpoint: Arc::new(TestEndpoint {
                addr: c.addr(),
                load: Arc::new(EndpointLoad::with_weight(c.load().weight(), fixture.t0)),
            }),
            ..c
        })
        .collect();
    Selector::new(lb, fresh, Arc::new(ShareTracker::new(fixture.t0)))
}

/// The endpoint each of `keys` keys lands on.
fn owners(fixture: &Fixture, selector: &Selector<TestEndpoint>, keys: u32) -> Vec<SocketAddr> {
    (0..keys)
        .filter_map(|n| selector.pick(Some(&key(n)), &[], fixture.t0))
        .map(|c| c.addr())
        .collect()
}

#[test]
fn a_key_lands_on_the_same_endpoint_every_time_and_after_a_rebuild() {
    let fixture = Fixture::new(5);
    let lb = config(Algorithm::RingHash);
    let first = owners(
        &fixture,
        &ring_selector(&fixture, &lb, fixture.candidates(&[])),
        500,
    );
    let again = owners(
        &fixture,
        &ring_selector(&fixture, &lb, fixture.candidates(&[])),
        500,
    );
    assert_eq!(first.len(), 500);
    assert_eq!(first, again);
}

#[test]
fn keys_spread_evenly_over_the_endpoints() {
    let fixture = Fixture::new(5);
    let lb = config(Algorithm::RingHash);
    let selector = ring_selector(&fixture, &lb, fixture.candidates(&[]));
    let mut counts = [0u32; 5];
    for owner in owners(&fixture, &selector, 10_000) {
        counts[Fixture::index(owner)] += 1;
    }
    assert!(
        counts.iter().all(|&c| (1_500..2_500).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn removing_one_of_five_endpoints_moves_only_the_keys_it_owned() {
    let fixture = Fixture::new(5);
    let lb = config(Algorithm::RingHash);
    let all = ring_selector(&fixture, &lb, fixture.candidates(&[]));
    let mut rest = fixture.candidates(&[]);
    rest.remove(2);
    let rest = ring_selector(&fixture, &lb, rest);
    let before = owners(&fixture, &all, 10_000);
    let after = owners(&fixture, &rest, 10_000);
    let mut moved = 0;
    for (b, a) in before.iter().zip(&after) {
        if b != a {
            moved += 1;
            assert_eq!(*b, addr(3), "a key moved from {b} to {a}");
        }
    }
    let owned = before.iter().filter(|&&b| b == addr(3)).count();
    assert_eq!(moved, owned);
    assert!(
        (1_500..2_500).contains(&moved),
        "{moved} of 10000 keys moved"
    );
}

#[test]
fn a_weight_change_moves_keys_only_to_or_from_that_endpoint() {
    let fixture = Fixture::new(4);
    let lb = config(Algorithm::RingHash);
    let ramping = ring_selector(&fixture, &lb, fixture.candidates(&[0.5]));
    let full = ring_selector(&fixture, &lb, fixture.candidates(&[]));
    let before = owners(&fixture, &ramping, 10_000);
    let after = owners(&fixture, &full, 10_000);
    let mut moved = 0;
    for (b, a) in before.iter().zip(&after) {
        if b != a {
            moved += 1;
            assert_eq!(*a, addr(1), "a key moved from {b} to {a}");
        }
    }
    let gained = after.iter().filter(|&&a| a == addr(1)).count() as f64
        / before.iter().filter(|&&b| b == addr(1)).count() as f64;
    assert!(
        moved > 0 && (1.6..2.4).contains(&gained),
        "moved {moved}, gained {gained}"
    );
}

#[test]
fn an_excluded_owner_hands_its_key_to_the_next_endpoint_on_the_ring() {
    let fixture = Fixture::new(5);
    let lb = config(Algorithm::RingHash);
    let all = ring_selector(&fixture, &lb, fixture.candidates(&[]));
    // The next endpoint on the ring is the owner in a ring without the excluded one.
    let without: Vec<Selector<TestEndpoint>> = (0..5)
        .map(|skip| {
            let mut candidates = fixture.candidates(&[]);
            candidates.remove(skip);
            ring_selector(&fixture, &lb, candidates)
        })
        .collect();
    for n in 0..1_000 {
        let key = key(n);
        let owner = all.pick(Some(&key), &[], fixture.t0).map(|c| c.addr());
        let Some(owner) = owner else {
            panic!("no owner for key {n}");
        };
        let next = all.pick(Some(&key), &[owner], fixture.t0).map(|c| c.addr());
        let expected = without[Fixture::index(owner)]
            .pick(Some(&key), &[], fixture.t0)
            .map(|c| c.addr());
        assert_ne!(next, Some(owner));
        assert_eq!(next, expected, "key {n}");
    }
}

#[test]
fn a_request_without_the_header_falls_back_to_least_request() {
    let fixture = Fixture::new(2);
    let selector = fixture.selector(Algorithm::RingHash);
    let _busy = fixture.hold(0, 5);
    let mut rng = rng(3);
    for _ in 0..100 {
        let picked = selector.pick_with(&mut rng, None, &[], fixture.t0);
        assert_eq!(picked.map(|c| c.addr()), Some(addr(2)));
    }
}

#[test]
fn a_hot_key_spills_past_its_owner_once_the_owner_is_over_its_cap() {
    let fixture = Fixture::new(4);
    let selector = fixture.selector(Algorithm::RingHash);
    let mut counts = [0u32; 4];
    for _ in 0..1_000 {
        if let Some(c) = selector.pick(Some(b"hot"), &[], fixture.t0) {
            counts[Fixture::index(c.addr())] += 1;
        }
    }
    counts.sort_unstable();
    // Twice a quarter of the picks (plus the slack) on the owner, the rest on its successor.
    assert_eq!(counts[..2], [0, 0], "{counts:?}");
    assert!((500..=510).contains(&counts[3]), "{counts:?}");
    assert_eq!(counts[2] + counts[3], 1_000);
}

#[test]
fn the_ring_stays_bounded_with_thousands_of_endpoints() {
    let endpoints: Vec<(SocketAddr, f64)> = (0..2_000u16)
        .map(|i| {
            let [hi, lo] = i.to_be_bytes();
            (SocketAddr::from(([10, 1, hi, lo], 8080)), 1.0)
        })
        .collect();
    let ring = Ring::new(&endpoints);
    assert!(ring.len() <= 65_536 + 2_000, "{} points", ring.len());
    let mut seen = vec![false; endpoints.len()];
    for index in ring.walk(0) {
        seen[index] = true;
    }
    assert!(
        seen.iter().all(|&s| s),
        "every endpoint keeps at least one point"
    );
}

#[test]
fn points_grow_with_weight() {
    let ring = Ring::new(&[(addr(1), 1.0), (addr(2), 2.0), (addr(3), 0.1)]);
    let count = |i: usize| ring.walk(0).filter(|&j| j == i).count();
    assert_eq!((count(0), count(1), count(2)), (160, 320, 16));
}
