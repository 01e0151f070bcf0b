//! Successes handed over in a batch mean what the same successes one by one would.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

#[test]
fn a_batch_of_successes_is_the_same_as_the_successes_one_by_one() {
    let rules = HealthSettings {
        error_rate_threshold: 0.3,
        error_rate_min_requests: 5,
        probation_successes: 3,
        ..passive_only()
    };
    for seed in 0..40u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut one_by_one = Fx::unknown(rules.clone(), 4);
        let mut batched = Fx {
            pool: one_by_one.pool.clone(),
            now: one_by_one.now,
        };
        for step in 0..300 {
            let n = rng.random_range(1..=4u8);
            match rng.random_range(0..6) {
                0 | 1 => {
                    let run = rng.random_range(0..6u64);
                    let single: Vec<Event> = (0..run)
                        .flat_map(|_| one_by_one.request(n, Verdict::Success))
                        .collect();
                    let at = batched.now;
                    let batch = batched.pool.record_successes(addr(n), run, at);
                    assert_eq!(batch, single, "seed {seed} step {step}");
                }
                2 | 3 => {
                    let verdict =
                        [Verdict::GatewayError, Verdict::ServerError][rng.random_range(0..2)];
                    assert_eq!(
                        batched.request(n, verdict),
                        one_by_one.request(n, verdict),
                        "seed {seed} step {step}"
                    );
                }
                _ => {
                    let d = Duration::from_millis(rng.random_range(0..20_000));
                    assert_eq!(batched.advance(d), one_by_one.advance(d));
                }
            }
            assert_eq!(
                batched.pool.reports(batched.now),
                one_by_one.pool.reports(one_by_one.now),
                "seed {seed} step {step}"
            );
        }
    }
}
