//! `maxEjectionPercent` and panic mode: the pool-wide rules that stop sensors from emptying it.

use super::*;

fn budget(pct: u32) -> HealthSettings {
    HealthSettings {
        max_ejection_percent: pct,
        panic_threshold: 0.0,
        ..settings()
    }
}

#[test]
fn max_ejection_percent_suppresses_flags_and_keeps_routing() {
    let mut fx = Fx::healthy(budget(50), 4);
    fx.eject(1);
    fx.eject(2);
    let events = fx.requests(3, Verdict::ConnectionFailure, 3);
    assert_eq!(
        events,
        vec![Event::EjectionSuppressed {
            endpoint: addr(3),
            reason: Reason::ConsecutiveGatewayErrors
        }]
    );
    let r = fx.report(3);
    assert_eq!((r.state, r.ejection_suppressed), (State::Healthy, true));
    assert_eq!(fx.class(3), Some(RouteClass::Normal));
    // Counters were reset: it must trip again from scratch.
    assert_eq!(fx.requests(3, Verdict::ConnectionFailure, 2), vec![]);
    assert_eq!(fx.request(3, Verdict::ConnectionFailure).len(), 1);
    assert_eq!(
        fx.probes(3, false, 3).len(),
        1,
        "probe failures are suppressed too"
    );
    assert_eq!(fx.state(3), State::Healthy);
}

#[test]
fn suppression_flag_clears_on_a_success() {
    for probe in [true, false] {
        let mut fx = Fx::healthy(budget(25), 4);
        fx.eject(1);
        fx.requests(2, Verdict::ConnectionFailure, 3);
        assert!(fx.report(2).ejection_suppressed);
        fx.requests(2, Verdict::ClientError, 3);
        assert!(fx.report(2).ejection_suppressed, "a 4xx is not a success");
        if probe {
            fx.probe(2, true);
        } else {
            fx.request(2, Verdict::Success);
        }
        assert!(!fx.report(2).ejection_suppressed);
    }
}

#[test]
fn suppressed_endpoint_is_ejected_once_budget_frees_up_and_flag_clears() {
    let mut fx = Fx::healthy(budget(25), 4);
    fx.eject(1);
    fx.requests(2, Verdict::ConnectionFailure, 3);
    fx.serve_into_probation(1);
    fx.probes(1, true, 5);
    assert_eq!(fx.state(1), State::Healthy);
    fx.requests(2, Verdict::ConnectionFailure, 3);
    let r = fx.report(2);
    assert_eq!((r.state, r.ejection_suppressed), (State::Ejected, false));
}

#[test]
fn probation_counts_against_the_budget() {
    let mut fx = Fx::healthy(budget(25), 4);
    fx.eject(1);
    fx.serve_into_probation(1);
    fx.probes(2, false, 3);
    assert_eq!(fx.state(2), State::Healthy);
    assert!(fx.report(2).ejection_suppressed);
}

#[test]
fn zero_percent_never_ejects() {
    let mut fx = Fx::healthy(budget(0), 4);
    let events = fx.probes(1, false, 3);
    assert!(matches!(events[..], [Event::EjectionSuppressed { .. }]));
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn at_least_one_endpoint_may_always_be_ejected() {
    let mut fx = Fx::healthy(budget(10), 3);
    fx.eject(1);
    fx.probes(2, false, 3);
    assert_eq!(
        fx.state(2),
        State::Healthy,
        "10% of 3 rounds down, but one is allowed"
    );
}

#[test]
fn draining_endpoints_do_not_count_in_the_budget() {
    let mut fx = Fx::healthy(budget(50), 4);
    fx.pool.remove(addr(4), fx.now);
    fx.eject(1);
    fx.probes(2, false, 3);
    assert_eq!(fx.state(2), State::Healthy, "50% of 3 is 1");
}

#[test]
fn panic_is_entered_below_threshold_and_routes_every_non_draining_endpoint() {
    let s = HealthSettings {
        max_ejection_percent: 100,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    fx.eject(1);
    let events = fx.eject(2);
    assert_eq!(events.len(), 1, "50% eligible is not below 50%: {events:?}");
    assert!(!fx.pool.panic());
    let events = fx.eject(3);
    assert_eq!(events.last(), Some(&Event::PanicEntered));
    assert_eq!(events.len(), 2);
    let routes = fx.pool.routes(fx.now);
    assert!(routes.panic);
    assert_eq!(routes.endpoints.len(), 4);
    assert!(
        routes
            .endpoints
            .iter()
            .all(|r| r.class == RouteClass::Normal)
    );
    assert_eq!(fx.advance(SEC), vec![], "panic is announced once");
}

#[test]
fn panic_exits_by_itself_when_the_pool_recovers() {
    let s = HealthSettings {
        max_ejection_percent: 100,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 2);
    fx.eject(1);
    assert!(!fx.pool.panic());
    assert_eq!(fx.eject(2).last(), Some(&Event::PanicEntered));
    fx.serve_into_probation(1);
    assert!(fx.pool.panic(), "probation is not eligible yet");
    let events = fx.probes(1, true, 5);
    assert_eq!(events.last(), Some(&Event::PanicExited));
    assert!(!fx.pool.routes(fx.now).panic);
    assert_eq!(fx.class(2), None);
}

#[test]
fn panic_re_evaluates_on_roster_changes_and_settings_reload() {
    let s = HealthSettings {
        max_ejection_percent: 100,
        ..settings()
    };
    let mut fx = Fx::healthy(s.clone(), 2);
    fx.eject(1);
    assert_eq!(
        fx.pool.remove(addr(2), fx.now).last(),
        Some(&Event::PanicEntered)
    );
    assert_eq!(fx.upsert(3, false), vec![Event::PanicExited]);
    fx.upsert(4, false);
    fx.eject(3);
    assert!(fx.pool.panic());
    let calm = HealthSettings {
        panic_threshold: 0.2,
        ..s
    };
    fx.pool.set_settings(calm);
    assert_eq!(
        fx.advance(Duration::ZERO),
        vec![Event::PanicExited],
        "reported on the next tick"
    );
    assert_eq!(fx.advance(SEC), vec![], "and only once");
}

#[test]
fn forgetting_a_live_endpoint_reports_the_panic_change_on_the_next_tick() {
    let s = HealthSettings {
        max_ejection_percent: 100,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 2);
    fx.eject(1);
    fx.pool.forget(addr(2));
    assert_eq!(fx.advance(SEC), vec![Event::PanicEntered]);
    assert!(fx.pool.routes(fx.now).panic);
}

#[test]
fn empty_pool_is_not_in_panic_and_has_no_routes() {
    let mut fx = Fx::unknown(settings(), 0);
    assert_eq!(fx.advance(SEC), vec![]);
    assert!(!fx.pool.panic());
    assert!(fx.pool.routes(fx.now).endpoints.is_empty());
    let mut fx = Fx::healthy(settings(), 1);
    fx.pool.remove(addr(1), fx.now);
    assert!(!fx.pool.panic(), "only draining endpoints left");
    assert!(fx.pool.routes(fx.now).endpoints.is_empty());
}

#[test]
fn panic_threshold_of_one_hundred_percent_panics_on_any_ejection() {
    let s = HealthSettings {
        panic_threshold: 1.0,
        ..settings()
    };
    let mut fx = Fx::healthy(s, 4);
    assert_eq!(fx.eject(1).last(), Some(&Event::PanicEntered));
    assert_eq!(fx.class(1), Some(RouteClass::Normal));
}
