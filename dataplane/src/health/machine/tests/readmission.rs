//! Ejected → Probation → Healthy, and the one-strike rule on probation.

use super::*;

#[test]
fn ejected_endpoint_returns_only_through_probation() {
    let mut fx = Fx::healthy(settings(), 4);
    let mut events = fx.eject(1);
    events.extend(fx.advance(BASE));
    events.extend(fx.probes(1, true, 2));
    assert_eq!(fx.class(1), Some(RouteClass::Probation));
    events.extend(fx.requests(1, Verdict::Success, 5));
    assert_eq!(
        events,
        vec![
            moved(1, State::Healthy, State::Ejected, Reason::ProbeFailures),
            moved(1, State::Ejected, State::Probation, Reason::ProbeSucceeded),
            moved(1, State::Probation, State::Healthy, Reason::ProbationPassed),
        ]
    );
    assert_eq!(fx.class(1), Some(RouteClass::Normal));
}

#[test]
fn probe_successes_do_not_shorten_an_ejection_for_a_fault_the_probes_never_saw() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject_passively(1);
    for _ in 0..29 {
        assert_eq!(fx.advance(SEC), vec![]);
        assert_eq!(fx.probe(1, true), vec![]);
    }
    assert_eq!(fx.state(1), State::Ejected);
    assert_eq!(
        fx.advance(SEC),
        vec![moved(
            1,
            State::Ejected,
            State::Probation,
            Reason::ProbeSucceeded
        )],
        "successes counted while ejected readmit on the tick at expiry"
    );
}

#[test]
fn with_probes_an_expired_ejection_still_needs_healthy_threshold_successes() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    assert_eq!(fx.advance(10 * BASE), vec![]);
    assert_eq!(fx.probe(1, true), vec![]);
    assert_eq!(fx.state(1), State::Ejected);
    assert_eq!(
        fx.probe(1, true),
        vec![moved(
            1,
            State::Ejected,
            State::Probation,
            Reason::ProbeSucceeded
        )]
    );
}

#[test]
fn a_probe_failure_while_ejected_restarts_the_evidence() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.advance(BASE);
    fx.probe(1, true);
    assert_eq!(
        fx.probe(1, false),
        vec![],
        "a failure while ejected does not re-eject"
    );
    assert_eq!(fx.report(1).ejection_multiplier, 1);
    assert_eq!(fx.probe(1, true), vec![]);
    assert_eq!(fx.state(1), State::Ejected);
    assert_eq!(fx.probe(1, true).len(), 1);
    assert_eq!(fx.state(1), State::Probation);
}

#[test]
fn without_probes_expiry_alone_leads_serve_into_probation() {
    let mut fx = Fx::healthy(passive_only(), 4);
    fx.requests(1, Verdict::ConnectionFailure, 3);
    assert_eq!(fx.state(1), State::Ejected);
    assert_eq!(fx.advance(BASE - SEC), vec![]);
    assert_eq!(
        fx.advance(SEC),
        vec![moved(
            1,
            State::Ejected,
            State::Probation,
            Reason::EjectionExpired
        )]
    );
    // Passive re-admission: five real successes on the trickle.
    fx.requests(1, Verdict::Success, 4);
    assert_eq!(
        fx.request(1, Verdict::Success),
        vec![moved(
            1,
            State::Probation,
            State::Healthy,
            Reason::ProbationPassed
        )]
    );
}

#[test]
fn with_traffic_only_requests_count_on_probation_and_4xx_is_neutral() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.request(1, Verdict::Success);
    fx.probe(1, true);
    fx.requests(1, Verdict::ClientError, 10);
    fx.request(1, Verdict::Success);
    fx.probe(1, true);
    assert_eq!(
        fx.report(1).probation_successes,
        2,
        "the probes did not count"
    );
    fx.requests(1, Verdict::Success, 2);
    assert_eq!(fx.state(1), State::Probation);
    fx.request(1, Verdict::Success);
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn three_to_leave_five_to_return_one_to_leave_again() {
    let mut fx = Fx::healthy(settings(), 4);
    // Three probe failures to leave.
    fx.probes(1, false, 2);
    assert_eq!(fx.state(1), State::Healthy);
    fx.probe(1, false);
    assert_eq!(fx.state(1), State::Ejected);
    // Four successes on probation are not enough; one failure sends it straight back.
    fx.serve_into_probation(1);
    fx.probes(1, true, 4);
    assert_eq!(
        fx.request(1, Verdict::GatewayError),
        vec![moved(
            1,
            State::Probation,
            State::Ejected,
            Reason::ProbationFailed
        )]
    );
    assert_eq!(
        fx.report(1).ejection_remaining_seconds,
        Some(60),
        "a longer ejection"
    );
    // Five in a row to return.
    fx.serve_into_probation(1);
    fx.probes(1, true, 4);
    assert_eq!(fx.state(1), State::Probation);
    fx.probe(1, true);
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn any_failure_on_probation_re_ejects() {
    for failure in ["probe", "5xx", "gateway"] {
        let mut fx = Fx::healthy(settings(), 4);
        fx.eject(1);
        fx.serve_into_probation(1);
        let events = match failure {
            "probe" => fx.probe(1, false),
            "5xx" => fx.request(1, Verdict::ServerError),
            _ => fx.request(1, Verdict::GatewayError),
        };
        assert_eq!(
            events,
            vec![moved(
                1,
                State::Probation,
                State::Ejected,
                Reason::ProbationFailed
            )],
            "{failure}"
        );
        assert_eq!(fx.report(1).ejection_multiplier, 2, "{failure}");
    }
}

#[test]
fn probation_failure_is_never_suppressed_by_the_ejection_budget() {
    let s = HealthSettings {
        max_ejection_percent: 25,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.probe(1, false);
    assert_eq!(fx.state(1), State::Ejected);
}

#[test]
fn re_admitted_endpoint_starts_with_clean_counters() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.requests(1, Verdict::ServerError, 2);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.probes(1, true, 5);
    let r = fx.report(1);
    assert_eq!((r.consecutive_5xx, r.consecutive_probe_failures), (0, 0));
    // It takes the full streaks again to leave.
    fx.requests(1, Verdict::GatewayError, 2);
    fx.probes(1, false, 2);
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn with_traffic_flowing_probation_is_earned_on_requests_not_probes() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    // The pool has traffic: a TCP probe cannot see the fast 5xx real requests might get.
    fx.request(2, Verdict::Success);
    fx.probes(1, true, 10);
    assert_eq!(
        fx.state(1),
        State::Probation,
        "probes alone did not pass it"
    );
    fx.requests(1, Verdict::Success, 5);
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn an_idle_pools_probes_still_carry_an_endpoint_through_probation() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.request(2, Verdict::Success);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.advance(super::super::RECENT_TRAFFIC);
    fx.probes(1, true, 5);
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn a_first_ejection_the_probes_saw_ends_as_soon_as_they_pass() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.advance(SEC);
    assert_eq!(fx.probe(1, true), vec![]);
    assert_eq!(
        fx.probe(1, true),
        vec![moved(
            1,
            State::Ejected,
            State::Probation,
            Reason::ProbeSucceeded
        )],
        "healthyThreshold probes after the ejection prove the recovery, 28 s early"
    );
    assert_eq!(fx.class(1), Some(RouteClass::Probation));
}

#[test]
fn a_passive_ejection_ends_early_once_probes_failed_and_then_passed() {
    let mut fx = Fx::healthy(settings(), 4);
    // Refused connections: the requests eject it, then the probes see the refusals too.
    fx.eject_passively(1);
    fx.advance(SEC);
    assert_eq!(fx.probe(1, false), vec![]);
    fx.advance(SEC);
    assert_eq!(fx.probe(1, true), vec![]);
    assert_eq!(fx.probe(1, true).len(), 1);
    assert_eq!(fx.state(1), State::Probation);
}

#[test]
fn a_repeat_offender_serves_its_whole_growing_ejection() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.probes(1, true, 2);
    assert_eq!(fx.state(1), State::Probation);
    // Fails probation: the second ejection, 60 s, which probe successes do not cut short.
    fx.probe(1, false);
    assert_eq!(fx.state(1), State::Ejected);
    assert_eq!(fx.report(1).ejection_multiplier, 2);
    fx.probe(1, false);
    for _ in 0..59 {
        fx.advance(SEC);
        fx.probe(1, true);
        assert_eq!(fx.state(1), State::Ejected);
    }
    fx.advance(SEC);
    assert_eq!(fx.state(1), State::Probation);
}

#[test]
fn once_the_multiplier_has_decayed_an_ejection_is_a_first_one_again() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.probes(1, true, 2);
    fx.requests(1, Verdict::Success, 5);
    assert_eq!(fx.state(1), State::Healthy);
    fx.advance(BASE);
    fx.probe(1, true);
    assert_eq!(
        fx.report(1).ejection_multiplier,
        0,
        "decayed after base spent healthy"
    );
    fx.eject(1);
    assert_eq!(fx.report(1).ejection_multiplier, 1);
    fx.probes(1, true, 2);
    assert_eq!(fx.state(1), State::Probation);
}

#[test]
fn without_probes_nothing_ends_an_ejection_early() {
    let mut fx = Fx::healthy(passive_only(), 4);
    fx.requests(1, Verdict::ConnectionFailure, 3);
    fx.probes(1, true, 5);
    assert_eq!(fx.advance(BASE - SEC), vec![]);
    assert_eq!(fx.state(1), State::Ejected);
}
