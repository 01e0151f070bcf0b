//! Fleet health in the machine: the fleet's verdict is probe evidence worth a whole run of
//! probes, with the same veto by real traffic and the same ejection budget; and what this
//! sidecar's own probes say, as its vote.

use rollcall_api::roster::ProbeVerdict;

use super::*;

impl Fx {
    fn fleet(&mut self, n: u8, passing: bool) -> Vec<Event> {
        self.pool
            .record_fleet_verdict(addr(n), passing, "the fleet's checkers", self.now)
    }

    fn vote(&self, n: u8) -> Option<ProbeVerdict> {
        self.pool.own_probe_verdict(addr(n))
    }
}

#[test]
fn a_failing_fleet_verdict_ejects_at_once_and_a_passing_one_admits() {
    let mut fx = Fx::unknown(settings(), 3);
    let events = fx.fleet(1, true);
    assert_eq!(
        events,
        [moved(
            1,
            State::Unknown,
            State::Healthy,
            Reason::ProbeSucceeded
        )]
    );
    let events = fx.fleet(1, false);
    assert_eq!(
        events,
        [moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::ProbeFailures
        )],
        "one verdict stands for unhealthyThreshold failing probes"
    );
    // The checkers saw the fault: a passing verdict ends a first ejection early.
    let events = fx.fleet(1, true);
    assert_eq!(
        events,
        [moved(
            1,
            State::Ejected,
            State::Probation,
            Reason::ProbeSucceeded
        )]
    );
}

#[test]
fn real_requests_that_succeed_overrule_a_failing_fleet_verdict_until_they_stop() {
    let mut fx = Fx::healthy(settings(), 3);
    fx.requests(1, Verdict::Success, 5);
    assert_eq!(
        fx.fleet(1, false),
        [Event::ProbesOverruled { endpoint: addr(1) }]
    );
    assert_eq!(fx.state(1), State::Healthy);
    // No traffic for longer than the overrule window: the next verdict (a probe interval
    // later) ejects.
    fx.advance(2 * SEC);
    assert_eq!(
        fx.fleet(1, false),
        [moved(
            1,
            State::Healthy,
            State::Ejected,
            Reason::ProbeFailures
        )]
    );
}

#[test]
fn fleet_verdicts_never_eject_past_max_ejection_percent() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.fleet(1, false);
    fx.fleet(2, false);
    let events = fx.fleet(3, false);
    assert_eq!(
        events,
        [Event::EjectionSuppressed {
            endpoint: addr(3),
            reason: Reason::ProbeFailures
        }]
    );
    assert_eq!(fx.state(3), State::Healthy);
}

#[test]
fn the_vote_is_what_this_sidecars_own_probes_say_debounced() {
    let mut fx = Fx::unknown(settings(), 2);
    assert_eq!(fx.vote(1), None, "no probe yet");
    fx.probe(1, true);
    assert_eq!(fx.vote(1), Some(ProbeVerdict::Passing), "the first success");
    fx.probes(1, false, 2);
    assert_eq!(
        fx.vote(1),
        Some(ProbeVerdict::Passing),
        "two failures are not three"
    );
    fx.probe(1, false);
    assert_eq!(fx.vote(1), Some(ProbeVerdict::Failing));
    fx.probe(1, true);
    assert_eq!(
        fx.vote(1),
        Some(ProbeVerdict::Failing),
        "one success is not two"
    );
    fx.probe(1, true);
    assert_eq!(fx.vote(1), Some(ProbeVerdict::Passing));
    // A failing run that a success broke never turns the vote.
    fx.probes(1, false, 2);
    fx.probe(1, true);
    fx.probes(1, false, 2);
    assert_eq!(fx.vote(1), Some(ProbeVerdict::Passing));
    // The fleet's verdicts are not this sidecar's vote.
    fx.fleet(2, false);
    assert_eq!(fx.vote(2), None);
    // Once it stops probing, it has no vote.
    fx.pool.forget_own_probes(addr(1));
    assert_eq!(fx.vote(1), None);
    assert_eq!(fx.report(1).probe_verdict, None);
}
