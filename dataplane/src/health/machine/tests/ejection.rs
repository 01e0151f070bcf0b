//! Passive ejection from real traffic, and how long ejections last.

use super::*;

fn only_rate() -> HealthSettings {
    HealthSettings {
        consecutive_gateway_errors: 0,
        consecutive_5xx: 0,
        error_rate_threshold: 0.2,
        ..settings()
    }
}

#[test]
fn gateway_errors_eject_at_once_on_the_request_that_reaches_the_limit() {
    let mut fx = Fx::serving(settings(), 4);
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
fn zero_limits_disable_the_consecutive_rules() {
    let s = HealthSettings {
        consecutive_gateway_errors: 0,
        consecutive_5xx: 0,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    assert_eq!(fx.requests(1, Verdict::GatewayError, 500), vec![]);
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn consecutive_5xx_counts_server_and_gateway_errors() {
    let mut fx = Fx::serving(settings(), 4);
    // 500s break every gateway streak, so only the 5xx rule can trip.
    for o in [Verdict::ServerError, Verdict::GatewayError].repeat(2) {
        assert_eq!(fx.request(1, o), vec![]);
    }
    assert_eq!(
        fx.request(1, Verdict::ServerError),
        vec![moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::Consecutive5xx
        )]
    );
}

#[test]
fn a_success_resets_the_5xx_streak() {
    let mut fx = Fx::healthy(settings(), 4);
    for _ in 0..20 {
        fx.requests(1, Verdict::ServerError, 4);
        fx.request(1, Verdict::Success);
    }
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn client_errors_neither_count_nor_reset_a_5xx_streak() {
    let mut fx = Fx::serving(settings(), 4);
    fx.requests(1, Verdict::ServerError, 4);
    assert_eq!(fx.requests(1, Verdict::ClientError, 100), vec![]);
    assert_eq!(fx.report(1).consecutive_5xx, 4);
    fx.request(1, Verdict::ServerError);
    assert_eq!(fx.state(1), State::Ejected);
}

#[test]
fn four_hundreds_never_eject_under_any_rule() {
    let s = HealthSettings {
        consecutive_gateway_errors: 1,
        consecutive_5xx: 1,
        error_rate_threshold: 0.01,
        error_rate_min_requests: 1,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    assert_eq!(fx.requests(1, Verdict::ClientError, 1000), vec![]);
    let r = fx.report(1);
    assert_eq!(
        (r.state, r.window_requests, r.last_error),
        (State::Healthy, 0, None)
    );
}

#[test]
fn error_rate_below_min_requests_never_ejects() {
    let mut fx = Fx::healthy(only_rate(), 4);
    assert_eq!(fx.requests(1, Verdict::ServerError, 19), vec![]);
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn error_rate_above_threshold_with_enough_requests_ejects() {
    // Alone in its pool: the absolute rule (with quiet peers the rule waits for them).
    let mut fx = Fx::healthy(only_rate(), 1);
    fx.requests(1, Verdict::Success, 16);
    fx.requests(1, Verdict::GatewayError, 4);
    assert_eq!(fx.state(1), State::Healthy, "20% is not above 20%");
    assert_eq!(
        fx.request(1, Verdict::ServerError),
        vec![
            moved(1, State::Healthy, State::Ejected, Reason::ErrorRate),
            Event::PanicEntered
        ]
    );
}

#[test]
fn old_failures_leave_the_error_rate_window() {
    let mut fx = Fx::healthy(only_rate(), 4);
    fx.requests(1, Verdict::ServerError, 15);
    fx.advance(20 * SEC);
    fx.requests(1, Verdict::Success, 16);
    fx.requests(1, Verdict::ServerError, 4);
    assert_eq!(
        fx.state(1),
        State::Healthy,
        "only 4 of 20 in the window failed"
    );
    assert_eq!(fx.report(1).window_failures, 4);
}

#[test]
fn requests_to_an_ejected_endpoint_change_nothing() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    let before = fx.report(1);
    assert_eq!(fx.requests(1, Verdict::Success, 50), vec![]);
    assert_eq!(fx.requests(1, Verdict::GatewayError, 50), vec![]);
    let after = fx.report(1);
    assert_eq!(after.state, State::Ejected);
    assert_eq!(
        after.ejection_remaining_seconds,
        before.ejection_remaining_seconds
    );
    assert_eq!(after.ejection_multiplier, 1);
}

#[test]
fn ejection_time_grows_with_each_ejection_and_is_capped() {
    let s = HealthSettings {
        max_ejection: Duration::from_secs(100),
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    fx.eject(1);
    let mut lengths = vec![];
    for _ in 0..5 {
        let r = fx.report(1);
        lengths.push((r.ejection_multiplier, r.ejection_remaining_seconds));
        fx.serve_into_probation(1);
        fx.probe(1, false);
    }
    let secs = |n| Some(n);
    assert_eq!(
        lengths,
        vec![
            (1, secs(30)),
            (2, secs(60)),
            (3, secs(90)),
            (4, secs(100)),
            (5, secs(100))
        ]
    );
    assert_eq!(fx.report(1).ejections_total, 6);
}

#[test]
fn ejection_lasts_exactly_its_time_not_less() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject_passively(1);
    fx.probes(1, true, 2);
    fx.advance(BASE - Duration::from_millis(1));
    assert_eq!(fx.state(1), State::Ejected);
    assert_eq!(
        fx.advance(Duration::from_millis(1)),
        vec![moved(
            1,
            State::Ejected,
            State::Probation,
            Reason::ProbeSucceeded
        )]
    );
}

#[test]
fn ejection_multiplier_decays_one_step_per_base_time_spent_healthy() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    for _ in 0..2 {
        fx.serve_into_probation(1);
        fx.probe(1, false);
    }
    assert_eq!(fx.report(1).ejection_multiplier, 3);
    fx.serve_into_probation(1);
    fx.probes(1, true, 5);
    assert_eq!(fx.state(1), State::Healthy);
    fx.advance(BASE - SEC);
    assert_eq!(
        fx.report(1).ejection_multiplier,
        3,
        "not a full base time yet"
    );
    fx.advance(SEC);
    assert_eq!(fx.report(1).ejection_multiplier, 2);
    fx.advance(BASE);
    assert_eq!(fx.report(1).ejection_multiplier, 1);
    // The next ejection is the second that counts: 2 × base.
    fx.eject(1);
    let r = fx.report(1);
    assert_eq!(
        (r.ejection_multiplier, r.ejection_remaining_seconds),
        (2, Some(60))
    );
}

#[test]
fn decay_catches_up_over_a_long_healthy_stretch_without_ticks_and_stops_at_zero() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.probe(1, false);
    fx.serve_into_probation(1);
    fx.probes(1, true, 5);
    fx.now += 10 * BASE;
    fx.probe(1, true);
    assert_eq!(fx.report(1).ejection_multiplier, 0);
    fx.eject(1);
    assert_eq!(fx.report(1).ejection_remaining_seconds, Some(30));
}

#[test]
fn absurd_durations_do_not_panic() {
    let s = HealthSettings {
        base_ejection: Duration::MAX,
        max_ejection: Duration::MAX,
        error_rate_window: Duration::MAX,
        error_rate_threshold: 0.5,
        slow_start_window: Duration::MAX,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    fx.requests(1, Verdict::ServerError, 30);
    fx.eject(1);
    fx.advance(1000 * BASE);
    assert_eq!(fx.state(1), State::Ejected);
    assert!(fx.report(1).ejection_remaining_seconds > Some(300 * 24 * 3600));
    let s = HealthSettings {
        base_ejection: Duration::ZERO,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    fx.eject(1);
    fx.probes(1, true, 2);
    assert_eq!(
        fx.state(1),
        State::Probation,
        "a zero ejection is served at once"
    );
}

#[test]
fn multiplier_does_not_decay_while_ejected_or_on_probation() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.advance(10 * BASE);
    assert_eq!(fx.report(1).ejection_multiplier, 1);
    fx.probes(1, true, 2);
    assert_eq!(fx.state(1), State::Probation);
    fx.advance(10 * BASE);
    assert_eq!(fx.report(1).ejection_multiplier, 1);
}
