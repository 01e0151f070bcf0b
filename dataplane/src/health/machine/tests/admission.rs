//! Unknown and Healthy: how endpoints are admitted and how probes push them out.

use super::*;

#[test]
fn new_endpoint_is_unknown_and_routed_at_full_weight() {
    let fx = Fx::unknown(settings(), 1);
    assert_eq!(fx.state(1), State::Unknown);
    assert_eq!(fx.report(1).reason, Reason::New);
    assert_eq!(fx.class(1), Some(RouteClass::Normal));
    assert!(close(fx.weight(1), 1.0));
    assert!(!fx.pool.panic());
}

#[test]
fn first_probe_success_makes_unknown_healthy() {
    let mut fx = Fx::unknown(settings(), 1);
    let events = fx.probe(1, true);
    assert_eq!(
        events,
        vec![moved(
            1,
            State::Unknown,
            State::Healthy,
            Reason::ProbeSucceeded
        )]
    );
    assert_eq!(fx.probe(1, true), vec![], "no event without a state change");
}

#[test]
fn request_success_does_not_admit_unknown_when_probes_are_enabled() {
    let mut fx = Fx::unknown(settings(), 1);
    assert_eq!(fx.requests(1, Verdict::Success, 10), vec![]);
    assert_eq!(fx.state(1), State::Unknown);
}

#[test]
fn without_probes_first_request_success_makes_unknown_healthy() {
    let mut fx = Fx::unknown(passive_only(), 1);
    assert_eq!(fx.request(1, Verdict::ClientError), vec![]);
    assert_eq!(fx.state(1), State::Unknown, "a 4xx proves nothing");
    assert_eq!(
        fx.request(1, Verdict::Success),
        vec![moved(
            1,
            State::Unknown,
            State::Healthy,
            Reason::RequestSucceeded
        )]
    );
}

#[test]
fn unknown_endpoint_is_ejected_by_probe_failures() {
    let mut fx = Fx::unknown(settings(), 4);
    let events = fx.probes(1, false, 3);
    assert_eq!(
        events,
        vec![moved(
            1,
            State::Unknown,
            State::Ejected,
            Reason::ProbeFailures
        )]
    );
}

#[test]
fn healthy_endpoint_is_ejected_on_the_unhealthy_thresholdth_consecutive_probe_failure() {
    let mut fx = Fx::healthy(settings(), 4);
    assert_eq!(fx.probes(1, false, 2), vec![]);
    assert_eq!(fx.state(1), State::Healthy);
    assert_eq!(
        fx.probe(1, false),
        vec![moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::ProbeFailures
        )]
    );
    assert_eq!(fx.class(1), None, "ejected endpoints are not routed");
}

#[test]
fn flapping_probe_results_never_eject() {
    let mut fx = Fx::healthy(settings(), 4);
    for _ in 0..100 {
        assert_eq!(fx.probe(1, false), vec![]);
        assert_eq!(fx.probe(1, true), vec![]);
    }
    assert_eq!(fx.state(1), State::Healthy);
}

#[test]
fn a_probe_success_resets_the_failure_streak() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.probes(1, false, 2);
    fx.probe(1, true);
    assert_eq!(fx.probes(1, false, 2), vec![]);
    assert_eq!(fx.report(1).consecutive_probe_failures, 2);
    assert_eq!(fx.probe(1, false).len(), 1);
    assert_eq!(fx.state(1), State::Ejected);
}

#[test]
fn zero_unhealthy_threshold_behaves_as_one() {
    let mut fx = Fx::healthy(
        HealthSettings {
            unhealthy_threshold: 0,
            ..settings()
        },
        4,
    );
    fx.probe(1, false);
    assert_eq!(fx.state(1), State::Ejected);
}

#[test]
fn request_successes_do_not_reset_the_probe_failure_streak() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.probes(1, false, 2);
    fx.requests(1, Verdict::Success, 5);
    // Long enough ago not to overrule the probes (that is `sensor.rs`).
    fx.advance(2 * SEC);
    fx.probe(1, false);
    assert_eq!(fx.state(1), State::Ejected);
}

#[test]
fn unknown_addresses_are_ignored_everywhere() {
    let mut fx = Fx::healthy(settings(), 2);
    let stranger = addr(99);
    let now = fx.now;
    assert_eq!(fx.pool.record_probe(stranger, false, "x", now), vec![]);
    assert_eq!(
        fx.pool
            .record_request(stranger, Verdict::GatewayError, "x", now),
        vec![]
    );
    assert_eq!(fx.pool.remove(stranger, now), vec![]);
    fx.pool.forget(stranger);
    assert_eq!(fx.pool.state(stranger), None);
    assert_eq!(fx.pool.len(), 2);
}
