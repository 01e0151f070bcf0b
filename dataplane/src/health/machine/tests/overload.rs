//! Uniform overload against lone outliers, simulated (`sim.rs`): what the whole pool shows is
//! not an outlier, and an endpoint failing unlike its peers is still ejected as fast as before.

use super::sim::{Rng, Scenario, defaults, spread};
use super::*;

/// Trips of every detector in a uniform run: `endpoints` all failing `p` with `failure`.
fn uniform(endpoints: u8, p: f64, failure: Verdict, seed: u64) -> Vec<(u8, Reason, u32, Duration)> {
    let fail = move |_: u8, _: u32| p;
    Scenario {
        settings: defaults(),
        endpoints,
        total: 12_000,
        seed,
        failure,
        fail: &fail,
        fault_from: 0,
    }
    .run(None)
    .trips
}

/// Requests of its own (and time) endpoint 1 needed to be ejected, once per seed: it fails with
/// `p_out` from its `from`-th request on (none before), its peers with `p_peers` all along.
fn detection(
    endpoints: u8,
    p_out: f64,
    p_peers: f64,
    from: u32,
    failure: Verdict,
    seeds: u64,
    others: &mut usize,
) -> (Vec<u32>, Vec<u32>) {
    let (mut requests, mut millis) = (Vec::new(), Vec::new());
    for seed in 0..seeds {
        let fail = move |n: u8, i: u32| {
            // Endpoint 1 is clean until its fault: whatever trips it then is the fault's doing.
            match (n, i >= from) {
                (1, true) => p_out,
                (1, false) => 0.0,
                _ => p_peers,
            }
        };
        let run = Scenario {
            settings: defaults(),
            endpoints,
            total: 40_000,
            seed: seed * 7919 + 1,
            failure,
            fail: &fail,
            fault_from: from,
        }
        .run(Some(1));
        let (_, _, own, after) = *run.trips.iter().find(|t| t.0 == 1 && t.2 > 0).unwrap_or(&(
            0,
            Reason::New,
            u32::MAX,
            Duration::MAX,
        ));
        *others += run.trips.iter().filter(|t| t.0 != 1 || t.2 == 0).count();
        requests.push(own);
        millis.push(u32::try_from(after.as_millis()).unwrap_or(u32::MAX));
    }
    (requests, millis)
}

#[test]
fn measure() {
    let _ = Rng::new(0);
    for (endpoints, p, failure) in [
        (3, 0.2, Verdict::GatewayError),
        (3, 0.5, Verdict::GatewayError),
        (10, 0.2, Verdict::GatewayError),
        (10, 0.5, Verdict::GatewayError),
        (3, 0.2, Verdict::ServerError),
        (10, 0.5, Verdict::ServerError),
    ] {
        let mut total = 0;
        let mut by = std::collections::BTreeMap::new();
        for seed in 1..=5 {
            let trips = uniform(endpoints, p, failure, seed);
            total += trips.len();
            for t in trips {
                println!("  seed {seed}: {t:?}");
                *by.entry(format!("{:?}", t.1)).or_insert(0) += 1;
            }
        }
        println!("uniform {endpoints} x {p} {failure:?}: {total} trips over 5 runs {by:?}");
    }
    for (label, endpoints, p_out, p_peers, from, failure) in [
        (
            "100% 503, clean peers, after 10 s",
            3,
            1.0,
            0.0,
            650,
            Verdict::GatewayError,
        ),
        (
            "100% 500, clean peers, after 10 s",
            3,
            1.0,
            0.0,
            650,
            Verdict::ServerError,
        ),
        (
            "100% 503, 5% peers, after 10 s",
            3,
            1.0,
            0.05,
            650,
            Verdict::GatewayError,
        ),
        (
            "60% 503, 5% peers, after 10 s",
            3,
            0.6,
            0.05,
            650,
            Verdict::GatewayError,
        ),
        (
            "60% 503, 5% peers, from the start",
            3,
            0.6,
            0.05,
            0,
            Verdict::GatewayError,
        ),
        (
            "60% 503, 5% peers, after 10 s, 10 endpoints",
            10,
            0.6,
            0.05,
            200,
            Verdict::GatewayError,
        ),
        (
            "60% 500, 5% peers, after 10 s",
            3,
            0.6,
            0.05,
            650,
            Verdict::ServerError,
        ),
    ] {
        let mut others = 0;
        let (mut r, mut t) = detection(endpoints, p_out, p_peers, from, failure, 100, &mut others);
        let mean = r.iter().map(|x| f64::from(*x)).sum::<f64>() / r.len() as f64;
        println!(
            "{label}: requests median/p90/max {:?} mean {mean:.1}, ms median/p90/max {:?}, peer trips {others}",
            spread(&mut r),
            spread(&mut t)
        );
    }
}
