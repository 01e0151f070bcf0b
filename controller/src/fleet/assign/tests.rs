//! Assignment: spread, balance, and stability under churn.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::*;

fn endpoints(n: u16) -> Vec<SocketAddr> {
    (0..n)
        .map(|i| SocketAddr::from(([10, 1, (i / 250) as u8, (i % 250) as u8 + 1], 8080)))
        .collect()
}

/// `n` sidecars on `nodes` nodes over `zones` zones.
fn fleet(n: usize, nodes: usize, zones: usize) -> Vec<Candidate> {
    (0..n)
        .map(|i| Candidate {
            key: format!("shop/client-{i}"),
            node: Some(format!("node-{}", i % nodes)),
            zone: Some(format!("zone-{}", (i % nodes) % zones)),
        })
        .collect()
}

fn keys(candidates: &[Candidate], chosen: &[usize]) -> Vec<String> {
    chosen.iter().map(|&i| candidates[i].key.clone()).collect()
}

#[test]
fn each_endpoint_gets_k_checkers_on_distinct_zones_and_nodes_when_there_are_enough() {
    let candidates = fleet(60, 12, 3);
    for endpoint in endpoints(200) {
        let chosen = checkers_of(endpoint, &candidates, 3);
        assert_eq!(chosen.len(), 3);
        let zones: std::collections::HashSet<_> =
            chosen.iter().map(|&i| &candidates[i].zone).collect();
        assert_eq!(zones.len(), 3, "{endpoint}: one checker per zone");
    }
}

#[test]
fn with_fewer_zones_than_checkers_nodes_are_still_spread() {
    let candidates = fleet(40, 8, 2);
    for endpoint in endpoints(100) {
        let chosen = checkers_of(endpoint, &candidates, 3);
        let nodes: std::collections::HashSet<_> =
            chosen.iter().map(|&i| &candidates[i].node).collect();
        let zones: std::collections::HashSet<_> =
            chosen.iter().map(|&i| &candidates[i].zone).collect();
        assert_eq!(nodes.len(), 3, "{endpoint}: three nodes");
        assert_eq!(zones.len(), 2, "{endpoint}: both zones");
    }
    // One node only: the pass by score alone still fills k.
    let one_node = fleet(5, 1, 1);
    assert_eq!(checkers_of(endpoints(1)[0], &one_node, 3).len(), 3);
}

#[test]
fn no_more_checkers_than_sidecars() {
    let candidates = fleet(2, 2, 1);
    assert_eq!(checkers_of(endpoints(1)[0], &candidates, 3).len(), 2);
    assert!(checkers_of(endpoints(1)[0], &[], 3).is_empty());
}

#[test]
fn the_load_is_spread_evenly_over_the_sidecars() {
    let candidates = fleet(100, 20, 3);
    let mut load: HashMap<usize, usize> = HashMap::new();
    for chosen in assign(&endpoints(1000), &candidates, 3) {
        for i in chosen {
            *load.entry(i).or_default() += 1;
        }
    }
    // 3,000 assignments over 100 sidecars: 30 each on average.
    let max = load.values().copied().max().unwrap_or(0);
    let min = (0..100)
        .map(|i| load.get(&i).copied().unwrap_or(0))
        .min()
        .unwrap_or(0);
    assert!(max <= 60 && min >= 10, "min {min}, max {max}");
}

#[test]
fn a_sidecar_leaving_moves_only_the_endpoints_it_checked() {
    let all = endpoints(500);
    let candidates = fleet(30, 10, 3);
    let before = assign(&all, &candidates, 3);
    for gone in [0, 7, 29] {
        let mut after_candidates = candidates.clone();
        let left = after_candidates.remove(gone);
        let after = assign(&all, &after_candidates, 3);
        for (e, (was, now)) in before.iter().zip(&after).enumerate() {
            let (was, now) = (keys(&candidates, was), keys(&after_candidates, now));
            if was.contains(&left.key) {
                // Only the one who left is replaced; the others stay.
                let kept = was.iter().filter(|k| now.contains(k)).count();
                assert!(kept >= 2, "{}: {was:?} -> {now:?}", all[e]);
            } else {
                assert_eq!(
                    was, now,
                    "{}: moved although {} did not check it",
                    all[e], left.key
                );
            }
        }
    }
}

#[test]
fn a_sidecar_joining_takes_only_endpoints_where_it_is_chosen() {
    let all = endpoints(500);
    let candidates = fleet(30, 10, 3);
    let before = assign(&all, &candidates, 3);
    let mut joined = candidates.clone();
    joined.push(Candidate {
        key: "shop/newcomer".into(),
        node: Some("node-new".into()),
        zone: Some("zone-1".into()),
    });
    let after = assign(&all, &joined, 3);
    let mut taken = 0;
    for (was, now) in before.iter().zip(&after) {
        let (was, now) = (keys(&candidates, was), keys(&joined, now));
        if now.iter().any(|k| k == "shop/newcomer") {
            taken += 1;
            assert!(was.iter().filter(|k| now.contains(k)).count() >= 2);
        } else {
            assert_eq!(was, now);
        }
    }
    // About 3/31 of 500 endpoints.
    assert!((20..=100).contains(&taken), "{taken}");
}

#[test]
fn unknown_nodes_and_zones_never_conflict() {
    let candidates: Vec<Candidate> = (0..5)
        .map(|i| Candidate {
            key: format!("dev/p{i}"),
            node: None,
            zone: None,
        })
        .collect();
    let chosen = checkers_of(endpoints(1)[0], &candidates, 3);
    assert_eq!(chosen.len(), 3);
    // The same as by score alone.
    let mut by_score: Vec<usize> = (0..5).collect();
    by_score.sort_by_key(|&i| std::cmp::Reverse(score(endpoints(1)[0], &candidates[i].key)));
    assert_eq!(chosen, by_score[..3]);
}
