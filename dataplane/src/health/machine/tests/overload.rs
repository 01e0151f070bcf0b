//! Uniform overload against lone outliers, simulated (`sim.rs`): what the whole pool shows is
//! not an outlier, and an endpoint failing unlike its peers is still ejected as fast as before.
//!
//! The bounds are main's own figures before streaks were judged against the peers (its code
//! under this simulator, `measure` below, 100 seeds each), so a slower detection fails here.

use super::sim::{Scenario, defaults, detection, spread, uniform};
use super::*;

/// Detection figures: requests of its own the outlier needed, and milliseconds since its
/// fault, as median, 90th percentile and maximum over the seeds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    requests: (u32, u32, u32),
    millis: (u32, u32, u32),
}

fn figures(endpoints: u8, p_out: f64, p_peers: f64, from: u32, failure: Verdict) -> Figures {
    let mut others = 0;
    let (mut r, mut t) = detection(endpoints, p_out, p_peers, from, failure, 100, &mut others);
    Figures {
        requests: spread(&mut r),
        millis: spread(&mut t),
    }
}

/// `mine` needs no more of the outlier's requests than `today` at the median and the 90th
/// percentile (the maximum may exceed today's by `slack`, see the callers), and no more than a
/// tenth more time (at least 10 ms: two of the pool's requests). Time is looser because main also ejects peers by mistake (a streak at the
/// 5% floor) and then sends the outlier a larger share: it reaches its verdict in fewer
/// milliseconds for the wrong reason.
fn no_slower(label: &str, mine: Figures, today: Figures, slack: u32) {
    let (m, t) = (mine.requests, today.requests);
    assert!(
        m.0 <= t.0 && m.1 <= t.1 && m.2 <= t.2 + slack,
        "{label}: requests {m:?}, today {t:?}"
    );
    let (m, t) = (mine.millis, today.millis);
    let tenth_more = |x: u32| x + (x / 10).max(10);
    assert!(
        m.0 <= tenth_more(t.0) && m.1 <= tenth_more(t.1),
        "{label}: ms {m:?}, today {t:?}"
    );
}

#[test]
fn uniform_overload_ejects_nobody_by_any_rule() {
    for (endpoints, p, failure) in [
        (3, 0.2, Verdict::GatewayError),
        (3, 0.5, Verdict::GatewayError),
        (10, 0.2, Verdict::GatewayError),
        (10, 0.5, Verdict::GatewayError),
        (3, 0.2, Verdict::ServerError),
        (3, 0.5, Verdict::ServerError),
        (10, 0.2, Verdict::ServerError),
        (10, 0.5, Verdict::ServerError),
    ] {
        // Five minutes of 200 requests/s each. On main the first case alone tripped 426 times
        // in these five runs, the 50% ones thousands of times.
        for seed in 1..=5 {
            let trips = uniform(endpoints, p, failure, seed);
            assert_eq!(
                trips,
                vec![],
                "{endpoints} endpoints shedding {p} as {failure:?}, seed {seed}"
            );
        }
    }
}

#[test]
fn a_lone_dead_endpoint_is_ejected_as_fast_as_before() {
    // Answering 503 (or 500) to everything, among clean peers, after 10 s of serving.
    let today_503 = Figures {
        requests: (3, 3, 3),
        millis: (25, 50, 90),
    };
    let mine = figures(3, 1.0, 0.0, 650, Verdict::GatewayError);
    no_slower("100% 503, clean peers", mine, today_503, 0);
    let today_500 = Figures {
        requests: (5, 5, 5),
        millis: (55, 95, 130),
    };
    let mine = figures(3, 1.0, 0.0, 650, Verdict::ServerError);
    no_slower("100% 500, clean peers", mine, today_500, 0);
    // Among peers at the noise floor (5%), the median and 90th percentile hold; in the rare
    // run where the peers' lower bound pokes above 5% one more request is asked for.
    let today = Figures {
        requests: (3, 3, 3),
        millis: (20, 45, 90),
    };
    let mine = figures(3, 1.0, 0.05, 650, Verdict::GatewayError);
    no_slower("100% 503, 5% peers", mine, today, 1);
}

#[test]
fn an_endpoint_failing_60_percent_among_peers_at_5_is_ejected_as_fast_as_before() {
    let today = Figures {
        requests: (8, 17, 41),
        millis: (90, 195, 425),
    };
    let mine = figures(3, 0.6, 0.05, 650, Verdict::GatewayError);
    no_slower("60% 503, 3 endpoints", mine, today, 2);
    let today = Figures {
        requests: (7, 22, 35),
        millis: (345, 1040, 2050),
    };
    let mine = figures(10, 0.6, 0.05, 200, Verdict::GatewayError);
    no_slower("60% 503, 10 endpoints", mine, today, 0);
    let today = Figures {
        requests: (20, 67, 116),
        millis: (235, 835, 1770),
    };
    let mine = figures(3, 0.6, 0.05, 650, Verdict::ServerError);
    no_slower("60% 500, 3 endpoints", mine, today, 0);
}

#[test]
fn an_outlier_in_a_pool_just_started_waits_until_the_peers_are_known() {
    // Failing 60% from the pool's first request: main ejected it after a median 6 of its
    // requests (85 ms; 90th percentile 16, 245 ms), on streaks judged before the peers had
    // shown anything. Now a streak
    // waits until the peers' share is known to within the noise floor (a few hundred peer
    // requests): the price of not ejecting on the first streak of a restart into an overload.
    let mine = figures(3, 0.6, 0.05, 0, Verdict::GatewayError);
    assert!(
        mine.requests.0 <= 20 && mine.requests.2 <= 50 && mine.millis.2 <= 1_000,
        "{mine:?}"
    );
}

/// Every endpoint of a 4-endpoint pool refuses connections with probability `p`; the trips.
fn refusing(p: f64, seed: u64) -> Vec<(u8, Reason, u32, Duration)> {
    let fail = move |_: u8, _: u32| p;
    Scenario {
        settings: defaults(),
        endpoints: 4,
        total: 4_000,
        seed,
        failure: Verdict::ConnectionFailure,
        fail: &fail,
        fault_from: 0,
    }
    .run(None)
    .trips
}

#[test]
fn connection_failures_stay_absolute_bounded_by_the_ejection_budget() {
    // All four refuse everything: two are ejected on their third refusal (maxEjectionPercent
    // 50), the other two are flagged instead, and the pool keeps routing them.
    let trips = refusing(1.0, 1);
    for n in 1..=4 {
        let first = trips.iter().find(|t| t.0 == n);
        assert_eq!(
            first.map(|t| (t.1, t.2)),
            Some((Reason::ConsecutiveGatewayErrors, 3)),
            "endpoint {n}: {trips:?}"
        );
    }
    let mut fx = Fx::healthy(defaults(), 4);
    let mut events = Vec::new();
    for n in 1..=4 {
        events.extend(fx.requests(n, Verdict::ConnectionFailure, 3));
    }
    let out = (1..=4).filter(|n| fx.state(*n) == State::Ejected).count();
    assert_eq!(out, 2, "{events:?}");
    assert!(!fx.pool.panic());
    let suppressed = events
        .iter()
        .filter(|e| matches!(e, Event::EjectionSuppressed { .. }))
        .count();
    assert_eq!(suppressed, 2);
    // Refusing a fifth of connections everywhere is still absolute: streaks of refusals trip
    // as they always did, whatever the peers show.
    assert!(!refusing(0.2, 1).is_empty());
}

#[test]
fn alone_in_its_pool_an_endpoint_answering_503_is_ejected_at_the_limit_and_panic_routes_it() {
    let mut fx = Fx::serving(defaults(), 1);
    assert_eq!(fx.requests(1, Verdict::GatewayError, 2), vec![]);
    let events = fx.request(1, Verdict::GatewayError);
    assert!(
        events.contains(&moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::ConsecutiveGatewayErrors
        )),
        "{events:?}"
    );
    assert!(events.contains(&Event::PanicEntered));
    assert_eq!(fx.class(1), Some(RouteClass::Normal));
}

#[test]
fn two_endpoints_judge_each_other() {
    // Both shedding a fifth: nobody goes.
    for seed in 1..=5 {
        let fail = |_: u8, _: u32| 0.2;
        let run = Scenario {
            settings: defaults(),
            endpoints: 2,
            total: 12_000,
            seed,
            failure: Verdict::GatewayError,
            fail: &fail,
            fault_from: 0,
        }
        .run(None);
        assert_eq!(run.trips, vec![], "seed {seed}");
    }
    // One of the two answering 503 to everything, the other clean: out on the third.
    let mut fx = Fx::serving(defaults(), 2);
    assert_eq!(fx.requests(1, Verdict::GatewayError, 2), vec![]);
    assert_eq!(
        fx.request(1, Verdict::GatewayError),
        vec![moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::ConsecutiveGatewayErrors
        )]
    );
}

#[test]
fn peers_without_recent_traffic_ask_for_a_longer_run_of_answers_but_not_of_refusals() {
    // Probed healthy, but no request has reached the peers within the window.
    let streaks = HealthSettings {
        error_rate_threshold: 0.0,
        ..settings()
    };
    let mut fx = Fx::healthy(streaks.clone(), 3);
    let mut answers = 0;
    while fx.state(1) == State::Healthy && answers < 100 {
        fx.request(1, Verdict::GatewayError);
        answers += 1;
    }
    assert_eq!(
        answers, 24,
        "the peers' share assumed at worst: half failing"
    );
    let mut fx = Fx::healthy(streaks.clone(), 3);
    assert_eq!(fx.requests(1, Verdict::ConnectionFailure, 2), vec![]);
    assert_eq!(fx.request(1, Verdict::ConnectionFailure).len(), 1);
    assert_eq!(fx.state(1), State::Ejected);
    // Once the peers have served enough requests (80 clean ones), the limit is back.
    let mut fx = Fx::healthy(streaks, 3);
    fx.requests(2, Verdict::Success, 40);
    fx.requests(3, Verdict::Success, 40);
    fx.requests(1, Verdict::GatewayError, 3);
    assert_eq!(fx.state(1), State::Ejected);
}
