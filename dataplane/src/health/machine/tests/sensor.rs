//! Sensor faults: failing probes on an endpoint whose real requests succeed (within the probe
//! interval, at least a second) never eject it.

use super::*;

/// Healthy endpoints with traffic; endpoint 1's health check fails while it keeps answering.
fn failing_check_with_traffic(fx: &mut Fx, probes: u32) -> Vec<Event> {
    let mut events = Vec::new();
    for _ in 0..probes {
        fx.advance(SEC);
        events.extend(fx.requests(1, Verdict::Success, 10));
        events.extend(fx.probe(1, false));
    }
    events
}

#[test]
fn failing_probes_do_not_eject_an_endpoint_whose_requests_succeed() {
    let mut fx = Fx::healthy(settings(), 3);
    let events = failing_check_with_traffic(&mut fx, 10);
    assert_eq!(
        events,
        vec![Event::ProbesOverruled { endpoint: addr(1) }],
        "said once, at the probe that would have ejected"
    );
    assert_eq!(fx.state(1), State::Healthy);
    assert_eq!(fx.class(1), Some(RouteClass::Normal));
}

#[test]
fn every_endpoints_check_failing_costs_no_capacity() {
    let mut fx = Fx::healthy(settings(), 3);
    let mut overruled = 0;
    for _ in 0..5 {
        fx.advance(SEC);
        for n in 1..=3 {
            fx.requests(n, Verdict::Success, 5);
            overruled += fx
                .probe(n, false)
                .iter()
                .filter(|e| matches!(e, Event::ProbesOverruled { .. }))
                .count();
        }
    }
    assert_eq!(overruled, 3);
    assert!(!fx.pool.panic());
    for n in 1..=3 {
        assert_eq!(fx.state(n), State::Healthy);
    }
}

#[test]
fn once_requests_stop_succeeding_the_next_failing_probe_ejects() {
    let mut fx = Fx::healthy(settings(), 3);
    failing_check_with_traffic(&mut fx, 4);
    // Black-holed now: requests hang, nothing succeeds between two probes.
    fx.advance(SEC);
    assert_eq!(
        fx.probe(1, false),
        vec![moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::ProbeFailures
        )]
    );
}

#[test]
fn a_success_older_than_the_probe_interval_does_not_overrule() {
    let mut fx = Fx::healthy(settings(), 3);
    fx.request(1, Verdict::Success);
    fx.advance(SEC);
    fx.probe(1, false);
    fx.advance(SEC);
    fx.probe(1, false);
    fx.advance(SEC);
    assert_eq!(fx.probe(1, false).len(), 1);
    assert_eq!(fx.state(1), State::Ejected);
}

#[test]
fn an_idle_endpoint_is_ejected_on_its_probes_as_before() {
    let mut fx = Fx::healthy(settings(), 3);
    let events = fx.eject(1);
    assert_eq!(
        events,
        vec![moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::ProbeFailures
        )]
    );
}

#[test]
fn failed_requests_are_not_successes() {
    let mut fx = Fx::healthy(settings(), 3);
    for _ in 0..3 {
        fx.advance(SEC);
        fx.request(1, Verdict::ServerError);
        fx.request(1, Verdict::ClientError);
        fx.probe(1, false);
    }
    assert_eq!(fx.state(1), State::Ejected);
}

#[test]
fn a_passing_probe_ends_the_streak_and_the_next_one_is_said_again() {
    let mut fx = Fx::healthy(settings(), 3);
    failing_check_with_traffic(&mut fx, 3);
    fx.probe(1, true);
    let events = failing_check_with_traffic(&mut fx, 3);
    assert_eq!(events, vec![Event::ProbesOverruled { endpoint: addr(1) }]);
}

#[test]
fn fast_re_probing_does_not_shrink_the_window_real_successes_are_judged_in() {
    let mut fx = Fx::healthy(settings(), 3);
    // Probes every 250 ms (a fast interval while confirming), a real success every 500 ms:
    // most probes have no success since the one before, but every one has one within the
    // probe interval.
    let mut events = Vec::new();
    for step in 0..12 {
        fx.advance(Duration::from_millis(250));
        if step % 2 == 0 {
            events.extend(fx.request(1, Verdict::Success));
        }
        events.extend(fx.probe(1, false));
    }
    assert_eq!(events, vec![Event::ProbesOverruled { endpoint: addr(1) }]);
    assert_eq!(fx.state(1), State::Healthy);
}
