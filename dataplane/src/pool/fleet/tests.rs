//! Fleet-health state of one pool: who is probed here, what is fed and when, and the fallback
//! after a lost stream, on an injected clock.

use super::*;

const SEC: Duration = Duration::from_secs(1);

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 80))
}

fn all() -> Vec<SocketAddr> {
    (1..=6).map(addr).collect()
}

/// Assigned 1, unchecked 2, pending 3, failing 4; 5 and 6 pass.
fn message() -> FleetHealth {
    FleetHealth {
        roster_version: 7,
        probe_all: false,
        checkers: 3,
        assigned: vec![addr(1)],
        unchecked: vec![addr(2)],
        pending: vec![addr(3)],
        failing: vec![addr(4)],
    }
}

fn feed(n: u8, verdict: Verdict) -> Feed {
    Feed {
        addr: addr(n),
        verdict,
    }
}

#[test]
fn without_a_fleet_message_everything_is_probed_here() {
    let mut state = FleetState::default();
    assert!(
        all()
            .into_iter()
            .all(|a| state.probes(a) == Some(Role::Everyone))
    );
    state.follow(
        Some(&FleetHealth {
            probe_all: true,
            ..message()
        }),
        all(),
    );
    assert!(
        all()
            .into_iter()
            .all(|a| state.probes(a) == Some(Role::Everyone))
    );
    assert!(
        state
            .due(all(), tokio::time::Instant::now(), SEC)
            .is_empty()
    );
    state.follow(Some(&message()), all());
    state.follow(None, all());
    assert!(
        all()
            .into_iter()
            .all(|a| state.probes(a) == Some(Role::Everyone))
    );
}

#[test]
fn assigned_and_unchecked_are_probed_the_rest_take_the_fleets_verdict() {
    let mut state = FleetState::default();
    state.follow(Some(&message()), all());
    let roles: Vec<Option<Role>> = all().into_iter().map(|a| state.probes(a)).collect();
    assert_eq!(
        roles,
        [
            Some(Role::Assigned),
            Some(Role::Unchecked),
            None,
            None,
            None,
            None
        ]
    );
    let now = tokio::time::Instant::now();
    assert_eq!(
        state.due(all(), now, SEC),
        [
            feed(4, Verdict::Failing),
            feed(5, Verdict::Passing),
            feed(6, Verdict::Passing)
        ],
        "pending 3 gets nothing either way"
    );
}

#[test]
fn a_verdict_is_fed_when_it_changes_and_once_per_probe_interval() {
    let mut state = FleetState::default();
    state.follow(Some(&message()), all());
    let t0 = tokio::time::Instant::now();
    assert_eq!(state.due(all(), t0, SEC).len(), 3);
    assert!(
        state.due(all(), t0 + SEC / 2, SEC).is_empty(),
        "not due yet"
    );
    // 5 starts failing: fed at once, the others keep their rhythm.
    state.follow(
        Some(&FleetHealth {
            failing: vec![addr(4), addr(5)],
            ..message()
        }),
        all(),
    );
    assert_eq!(
        state.due(all(), t0 + SEC / 2, SEC),
        [feed(5, Verdict::Failing)]
    );
    assert_eq!(
        state.due(all(), t0 + SEC, SEC),
        [feed(4, Verdict::Failing), feed(6, Verdict::Passing)]
    );
    assert_eq!(
        state.due(all(), t0 + SEC + SEC / 2, SEC),
        [feed(5, Verdict::Failing)]
    );
}

#[test]
fn a_lost_stream_keeps_the_assignment_for_the_grace_then_everything_is_probed() {
    let mut state = FleetState::default();
    state.follow(Some(&message()), all());
    let t0 = tokio::time::Instant::now();
    state.lost(t0, 2 * SEC);
    assert_eq!(state.fallback_at(), Some(t0 + 2 * SEC));
    assert_eq!(state.probes(addr(5)), None, "within the grace");
    assert!(!state.expire(t0 + 2 * SEC - Duration::from_millis(1)));
    // Verdicts still stand meanwhile.
    assert_eq!(state.due(all(), t0, SEC).len(), 3);
    assert!(state.expire(t0 + 2 * SEC), "the grace ran out");
    assert!(!state.expire(t0 + 3 * SEC), "said once");
    assert!(
        all()
            .into_iter()
            .all(|a| state.probes(a) == Some(Role::Fallback))
    );
    assert_eq!(state.fallback_at(), None, "nothing more to wait for");
    assert!(state.due(all(), t0 + 3 * SEC, SEC).is_empty());
    // Back to the assignment with the next message.
    state.follow(Some(&message()), all());
    assert_eq!(state.probes(addr(1)), Some(Role::Assigned));
    assert_eq!(state.probes(addr(5)), None);
}

#[test]
fn a_reconnect_within_the_grace_changes_nothing_and_losing_twice_does_not_extend_it() {
    let mut state = FleetState::default();
    state.follow(Some(&message()), all());
    let t0 = tokio::time::Instant::now();
    state.lost(t0, 2 * SEC);
    state.lost(t0 + SEC, 2 * SEC);
    assert!(
        state.expire(t0 + 2 * SEC),
        "the first loss's deadline holds"
    );
    let mut again = FleetState::default();
    again.follow(Some(&message()), all());
    again.lost(t0, 2 * SEC);
    again.follow(Some(&message()), all());
    assert!(!again.expire(t0 + 10 * SEC), "a message ended the grace");
    assert_eq!(again.probes(addr(5)), None);
}

#[test]
fn an_endpoint_the_message_did_not_know_is_probed_here_until_the_controller_speaks_of_it() {
    let mut state = FleetState::default();
    state.follow(Some(&message()), all());
    let newcomer = addr(9);
    assert_eq!(state.probes(newcomer), Some(Role::Unchecked));
    let mut with_newcomer = all();
    with_newcomer.push(newcomer);
    let fed = state.due(with_newcomer.clone(), tokio::time::Instant::now(), SEC);
    assert!(
        fed.iter().all(|f| f.addr != newcomer),
        "no verdict on it: {fed:?}"
    );
    state.follow(Some(&message()), with_newcomer);
    assert_eq!(state.probes(newcomer), None, "now the fleet checks it");
}
