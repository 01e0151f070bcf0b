//! Roster changes (draining, terminating, back in roster), settings reload and slow start.

use super::*;

#[test]
fn terminating_endpoint_drains_and_is_only_a_fallback() {
    let mut fx = Fx::healthy(settings(), 2);
    assert_eq!(
        fx.upsert(1, true),
        vec![moved(
            1,
            State::Healthy,
            State::Draining,
            Reason::Terminating
        )]
    );
    assert_eq!(fx.class(1), Some(RouteClass::TerminatingFallback));
    assert_eq!(
        fx.upsert(1, true),
        vec![],
        "repeated upserts change nothing"
    );
}

#[test]
fn removed_endpoint_drains_unrouted_until_forgotten() {
    let mut fx = Fx::healthy(settings(), 2);
    assert_eq!(
        fx.pool.remove(addr(1), fx.now),
        vec![moved(
            1,
            State::Healthy,
            State::Draining,
            Reason::RemovedFromRoster
        )]
    );
    assert_eq!(fx.pool.remove(addr(1), fx.now), vec![]);
    assert_eq!(fx.class(1), None);
    assert_eq!(fx.report(1).state, State::Draining);
    fx.pool.forget(addr(1));
    assert_eq!(fx.pool.state(addr(1)), None);
    assert_eq!(fx.pool.reports(fx.now).len(), 1);
}

#[test]
fn terminating_then_removed_stops_being_a_fallback() {
    let mut fx = Fx::healthy(settings(), 2);
    fx.upsert(1, true);
    assert_eq!(
        fx.pool.remove(addr(1), fx.now),
        vec![],
        "still Draining: no transition"
    );
    assert_eq!(fx.report(1).reason, Reason::RemovedFromRoster);
    assert_eq!(fx.class(1), None);
}

#[test]
fn new_endpoint_that_is_already_terminating_drains_at_once() {
    let mut fx = Fx::healthy(settings(), 1);
    assert_eq!(
        fx.upsert(2, true),
        vec![moved(
            2,
            State::Unknown,
            State::Draining,
            Reason::Terminating
        )]
    );
    assert_eq!(fx.class(2), Some(RouteClass::TerminatingFallback));
}

#[test]
fn back_in_roster_returns_to_the_state_it_left() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.upsert(1, true);
    assert_eq!(
        fx.upsert(1, false),
        vec![moved(
            1,
            State::Draining,
            State::Healthy,
            Reason::BackInRoster
        )]
    );
    // A roster flap does not launder an ejection.
    fx.eject(2);
    fx.pool.remove(addr(2), fx.now);
    assert_eq!(
        fx.upsert(2, false),
        vec![moved(
            2,
            State::Draining,
            State::Ejected,
            Reason::BackInRoster
        )]
    );
    assert_eq!(fx.report(2).ejection_remaining_seconds, Some(30));
    // Unknown stays unknown.
    fx.upsert(5, true);
    fx.upsert(5, false);
    assert_eq!(fx.state(5), State::Unknown);
}

#[test]
fn removed_endpoint_that_returns_terminating_becomes_a_fallback() {
    let mut fx = Fx::healthy(settings(), 2);
    fx.pool.remove(addr(1), fx.now);
    assert_eq!(fx.upsert(1, true), vec![]);
    assert_eq!(fx.report(1).reason, Reason::Terminating);
    assert_eq!(fx.class(1), Some(RouteClass::TerminatingFallback));
}

#[test]
fn evidence_about_draining_endpoints_changes_no_state() {
    let mut fx = Fx::healthy(settings(), 2);
    fx.upsert(1, true);
    assert_eq!(fx.probes(1, false, 10), vec![]);
    assert_eq!(fx.requests(1, Verdict::GatewayError, 10), vec![]);
    let r = fx.report(1);
    assert_eq!((r.state, r.probe_failures_total), (State::Draining, 10));
    assert_eq!(
        (r.consecutive_probe_failures, r.consecutive_gateway_errors),
        (0, 0)
    );
    assert_eq!(
        fx.upsert(1, false),
        vec![moved(
            1,
            State::Draining,
            State::Healthy,
            Reason::BackInRoster
        )]
    );
    assert_eq!(
        fx.probe(1, false),
        vec![],
        "drain-time failures left no streak"
    );
}

#[test]
fn settings_reload_keeps_every_endpoint_state() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.requests(2, Verdict::ServerError, 4);
    let before = fx.pool.reports(fx.now);
    let reloaded = HealthSettings {
        unhealthy_threshold: 1,
        consecutive_5xx: 10,
        ..settings()
    };
    fx.pool.set_settings(reloaded);
    assert_eq!(fx.advance(Duration::ZERO), vec![]);
    assert_eq!(fx.pool.reports(fx.now), before);
    // The new knobs apply from now on.
    fx.request(2, Verdict::ServerError);
    assert_eq!(fx.state(2), State::Healthy, "consecutive5xx is 10 now");
    fx.probe(3, false);
    assert_eq!(fx.state(3), State::Ejected, "unhealthyThreshold is 1 now");
}

#[test]
fn slow_start_ramps_linearly_after_probation() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    assert!(
        close(fx.weight(1), 1.0),
        "probation is shaped by class, not weight"
    );
    fx.probes(1, true, 5);
    let mut seen = vec![];
    for _ in 0..4 {
        seen.push(fx.weight(1));
        fx.advance(10 * SEC);
    }
    let want = [0.1, 0.4, 0.7, 1.0];
    assert!(seen.iter().zip(want).all(|(a, b)| close(*a, b)), "{seen:?}");
    fx.advance(100 * SEC);
    assert!(close(fx.weight(1), 1.0));
    assert!(close(fx.report(1).weight_factor, 1.0));
}

#[test]
fn newcomer_to_a_serving_pool_ramps_from_when_it_joins_but_the_first_roster_does_not() {
    let mut fx = Fx::healthy(settings(), 2);
    assert!(close(fx.weight(1), 1.0) && close(fx.weight(2), 1.0));
    fx.upsert(3, false);
    assert!(
        close(fx.weight(3), 0.1),
        "routed while Unknown, so ramped from the start"
    );
    fx.advance(5 * SEC);
    assert!(close(fx.weight(3), 0.25));
    fx.probe(3, true);
    assert_eq!(fx.state(3), State::Healthy);
    assert!(
        close(fx.weight(3), 0.25),
        "turning healthy carries the ramp on, it does not restart it"
    );
    fx.advance(15 * SEC);
    assert!(close(fx.weight(3), 0.7));
    assert!(
        close(fx.report(3).weight_factor, 0.7),
        "reports say what routing uses"
    );
}

#[test]
fn a_whole_roster_applies_in_one_pass_with_one_panic_evaluation() {
    let mut fx = Fx::healthy(settings(), 3);
    let events = fx.pool.apply_roster(
        &[(addr(2), false), (addr(3), true), (addr(4), false)],
        fx.now,
    );
    assert_eq!(
        events,
        vec![
            moved(3, State::Healthy, State::Draining, Reason::Terminating),
            moved(
                1,
                State::Healthy,
                State::Draining,
                Reason::RemovedFromRoster
            ),
        ]
    );
    assert_eq!(fx.state(4), State::Unknown);
    assert!(
        close(fx.weight(4), 0.1),
        "a newcomer to a serving pool ramps"
    );
    assert_eq!(fx.class(1), None);
    assert_eq!(fx.class(3), Some(RouteClass::TerminatingFallback));
}

#[test]
fn zero_slow_start_window_gives_full_weight_at_once() {
    let s = HealthSettings {
        slow_start_window: Duration::ZERO,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.probes(1, true, 5);
    assert!(close(fx.weight(1), 1.0));
}

#[test]
fn an_ejection_during_slow_start_ends_the_ramp() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.probes(1, true, 5);
    fx.advance(10 * SEC);
    fx.eject(1);
    assert!(close(fx.report(1).weight_factor, 1.0));
    fx.serve_into_probation(1);
    fx.probes(1, true, 5);
    assert!(
        close(fx.weight(1), 0.1),
        "a fresh ramp after the next probation"
    );
}

#[test]
fn a_large_arrival_keeps_every_endpoint_state_and_the_address_order() {
    // Many arrivals at once (merged into the table in one pass), around an endpoint that is
    // ejected and one that is draining.
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.pool.remove(addr(2), fx.now);
    let wide = |port: u16| SocketAddr::from(([10, 0, 1, (port % 200) as u8], 9000 + port));
    let mut roster: Vec<(SocketAddr, bool)> = (0..300).map(|i| (wide(299 - i), false)).collect();
    roster.extend([(addr(1), false), (addr(3), false), (addr(4), true)]);
    let events = fx.pool.apply_roster(&roster, fx.now);
    assert_eq!(
        events,
        vec![moved(
            4,
            State::Healthy,
            State::Draining,
            Reason::Terminating
        )]
    );
    assert_eq!(fx.state(1), State::Ejected);
    assert_eq!(fx.state(2), State::Draining);
    assert_eq!(fx.state(3), State::Healthy);
    assert_eq!(fx.state(4), State::Draining);
    assert_eq!(fx.pool.state(wide(17)), Some(State::Unknown));
    let listed: Vec<SocketAddr> = fx.pool.reports(fx.now).iter().map(|r| r.address).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed.len(), 304);
    assert_eq!(listed, sorted, "reports stay in address order");
}

#[test]
fn a_newcomer_listed_twice_is_joined_twice_in_roster_order_and_kept_once() {
    let mut fx = Fx::healthy(settings(), 1);
    let events = fx.pool.apply_roster(
        &[
            (addr(1), false),
            (addr(5), false),
            (addr(5), true),
            (addr(6), true),
            (addr(6), false),
        ],
        fx.now,
    );
    assert_eq!(
        events,
        vec![
            moved(5, State::Unknown, State::Draining, Reason::Terminating),
            moved(6, State::Unknown, State::Draining, Reason::Terminating),
            moved(6, State::Draining, State::Unknown, Reason::BackInRoster),
        ]
    );
    assert_eq!(
        fx.state(5),
        State::Draining,
        "its last listing said terminating"
    );
    assert_eq!(fx.state(6), State::Unknown, "its last listing said serving");
    assert_eq!(fx.pool.len(), 3);
}

#[test]
fn a_forgotten_endpoint_listed_again_is_a_newcomer_in_its_old_slot() {
    let mut fx = Fx::healthy(settings(), 3);
    fx.pool.remove(addr(2), fx.now);
    fx.pool.forget(addr(2));
    assert_eq!(fx.pool.len(), 2);
    let events = fx.pool.apply_roster(
        &[(addr(1), false), (addr(2), false), (addr(3), false)],
        fx.now,
    );
    assert_eq!(events, vec![], "joining is not a transition");
    assert_eq!(fx.pool.len(), 3);
    assert_eq!(fx.state(2), State::Unknown);
    assert_eq!(fx.report(2).reason, Reason::New);
    assert!(
        close(fx.weight(2), 0.1),
        "a newcomer to a serving pool ramps"
    );
}

#[test]
fn known_endpoints_change_first_in_roster_order_then_newcomers_in_address_order() {
    let mut fx = Fx::healthy(settings(), 2);
    let events = fx.pool.apply_roster(
        &[
            (addr(9), true),
            (addr(2), true),
            (addr(7), true),
            (addr(1), true),
        ],
        fx.now,
    );
    assert_eq!(
        events,
        vec![
            moved(2, State::Healthy, State::Draining, Reason::Terminating),
            moved(1, State::Healthy, State::Draining, Reason::Terminating),
            moved(7, State::Unknown, State::Draining, Reason::Terminating),
            moved(9, State::Unknown, State::Draining, Reason::Terminating),
        ]
    );
}
