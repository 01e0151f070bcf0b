//! Who checks which endpoint: rendezvous (highest-random-weight) hashing, spread over zones and
//! nodes. Every sidecar gets a score per endpoint from a fixed hash of the two names; an
//! endpoint's checkers are the best-scored ones, taken first so that no two share a zone or a
//! node, then so that no two share a node, then by score alone. Pure and deterministic: every
//! replica of one build computes the same assignment.
//!
//! Stable under churn: a sidecar that leaves moves only the endpoints it checked (for every
//! other endpoint the same candidates are met in the same order and chosen by the same rule),
//! and one that joins takes only the endpoints where it scores high enough.

use std::hash::{BuildHasher, Hash, Hasher};
use std::net::SocketAddr;

/// One sidecar that may check endpoints: its pod's key (`namespace/name`) and where it runs.
/// An unknown node or zone never conflicts with another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub key: String,
    pub node: Option<String>,
    pub zone: Option<String>,
}

/// The fixed hash of the scores: the same on every replica and every run of one build.
fn score(endpoint: SocketAddr, key: &str) -> u64 {
    let mut hasher = foldhash::quality::FixedState::with_seed(0x726f_6c6c_6361_6c6c).build_hasher();
    endpoint.hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish()
}

/// The rules of the three passes over the candidates, strictest first.
#[derive(Clone, Copy)]
enum Spread {
    ZoneAndNode,
    Node,
    Any,
}

/// The indices (into `candidates`) of the `k` checkers of `endpoint`, best first; all of them
/// when there are no more than `k`.
pub fn checkers_of(endpoint: SocketAddr, candidates: &[Candidate], k: usize) -> Vec<usize> {
    let mut order: Vec<(u64, usize)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (score(endpoint, &c.key), i))
        .collect();
    // Highest score first; the key breaks a (vanishingly rare) tie, so the order is total.
    order.sort_unstable_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| candidates[a.1].key.cmp(&candidates[b.1].key))
    });
    let mut chosen: Vec<usize> = Vec::with_capacity(k.min(candidates.len()));
    for spread in [Spread::ZoneAndNode, Spread::Node, Spread::Any] {
        for &(_, i) in &order {
            if chosen.len() >= k {
                return chosen;
            }
            if chosen.contains(&i) {
                continue;
            }
            let c = &candidates[i];
            let shares = |pick: fn(&Candidate) -> Option<&String>| {
                pick(c)
                    .is_some_and(|mine| chosen.iter().any(|&j| pick(&candidates[j]) == Some(mine)))
            };
            let fits = match spread {
                Spread::ZoneAndNode => !shares(|c| c.zone.as_ref()) && !shares(|c| c.node.as_ref()),
                Spread::Node => !shares(|c| c.node.as_ref()),
                Spread::Any => true,
            };
            if fits {
                chosen.push(i);
            }
        }
    }
    chosen
}

/// Every endpoint's checkers, in the order of `endpoints`.
pub fn assign(endpoints: &[SocketAddr], candidates: &[Candidate], k: usize) -> Vec<Vec<usize>> {
    endpoints
        .iter()
        .map(|e| checkers_of(*e, candidates, k))
        .collect()
}

#[cfg(test)]
mod tests;
