use super::*;
use rollcall_api::policy::PoolPolicy;
use std::net::SocketAddr;

use crate::status::StreamId;
use rollcall_api::roster::{Endpoint, EndpointHealth, PoolHealth, PoolRef, UnavailableReason};

const T0: i64 = 1_700_000_000;

fn now() -> Timestamp {
    Timestamp::from_second(T0).unwrap()
}

fn addr(i: usize) -> SocketAddr {
    format!("10.0.0.{i}:8080").parse().unwrap()
}

fn roster(n: usize) -> Roster {
    Roster {
        endpoints: (1..=n)
            .map(|i| Endpoint {
                pod: Some(format!("web-{i}")),
                zone: Some("a".into()),
                ..Endpoint::serving(addr(i))
            })
            .collect(),
        policy: PoolPolicy::default(),
        service: "shop/web:http".into(),
    }
}

/// A sidecar's report: `(endpoint index, state, reason, since ms)`.
fn report(pod: &str, panic: bool, eps: &[(usize, EndpointState, &str, u64)]) -> PoolHealth {
    PoolHealth {
        pool: PoolRef::new("shop", "web"),
        roster_version: 7,
        panic,
        endpoints: eps
            .iter()
            .map(|(i, state, reason, since)| EndpointHealth {
                probe: None,
                addr: addr(*i),
                state: *state,
                reason: reason.to_string(),
                since_unix_ms: *since,
                times_ejected: 1,
                last_error: (*state == EndpointState::Ejected).then(|| format!("error from {pod}")),
                ejection_suppressed: false,
            })
            .collect(),
        refused: None,
        complete: false,
        continued: false,
        removed: Vec::new(),
    }
}

/// The totals of `reports`, one stream each, in order.
fn tally(reports: &[PoolHealth]) -> PoolTally {
    let mut tally = PoolTally::default();
    for (i, r) in reports.iter().enumerate() {
        tally.record(StreamId::new(i as u64), r);
    }
    tally
}

fn input<'a>(roster: &'a Roster, reports: &'a PoolTally) -> Input<'a> {
    Input {
        generation: Some(3),
        served: Served::Roster { version: 7, roster },
        reports,
        connected: 3,
        previous: None,
        now: now(),
    }
}

fn cond<'a>(s: &'a BackendPoolStatus, kind: &str) -> &'a Condition {
    s.conditions.iter().find(|c| c.type_ == kind).unwrap()
}

use EndpointState::*;

#[test]
fn ejections_count_sidecars_and_pick_the_most_common_reason() {
    let r = roster(3);
    let reports = [
        report(
            "a",
            false,
            &[
                (1, Ejected, "ConsecutiveGatewayErrors", 5_000),
                (2, Healthy, "", 0),
            ],
        ),
        report(
            "b",
            false,
            &[
                (1, Ejected, "ConsecutiveGatewayErrors", 3_000),
                (2, Healthy, "", 0),
            ],
        ),
        report(
            "c",
            false,
            &[
                (1, Ejected, "ProbeFailures", 9_000),
                (2, Ejected, "Consecutive5xx", 1),
            ],
        ),
    ];
    let s = aggregate(input(&r, &tally(&reports)));
    assert_eq!(
        s.endpoints,
        Some(EndpointCounts {
            total: 3,
            healthy: 2,
            ejected: 1,
            probation: 0,
            draining: 0
        })
    );
    assert_eq!(
        s.sidecars,
        Some(SidecarCounts {
            connected: 3,
            reporting: 3
        })
    );
    assert_eq!(s.ejections.len(), 2);
    let e = &s.ejections[0];
    assert_eq!(e.address, "10.0.0.1:8080");
    assert_eq!(e.pod.as_deref(), Some("web-1"));
    assert_eq!((e.ejected_by, e.of), (3, 3));
    assert_eq!(e.reason, "ConsecutiveGatewayErrors");
    assert_eq!(e.since, "1970-01-01T00:00:03Z");
    // The sidecar's text, marked as its word.
    assert_eq!(
        e.last_error.as_deref(),
        Some(r#"reported by a sidecar: "error from c""#)
    );
    // Endpoint 2: one sidecar of three ejects it; most say healthy.
    assert_eq!((s.ejections[1].ejected_by, s.ejections[1].of), (1, 3));
    assert_eq!(cond(&s, "Degraded").status, "True");
    assert_eq!(
        cond(&s, "Degraded").message,
        "1 of 3 endpoints ejected by most sidecars"
    );
    assert_eq!(cond(&s, "Ready").status, "True");
    assert_eq!(cond(&s, "Panic").status, "False");
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(3))
    );
    assert_eq!(s.roster_version, Some(7));
}

#[test]
fn ties_go_to_the_healthier_state() {
    let r = roster(1);
    let reports = [
        report("a", false, &[(1, Ejected, "ProbeFailures", 1)]),
        report("b", false, &[(1, Healthy, "", 1)]),
    ];
    let s = aggregate(input(&r, &tally(&reports)));
    assert_eq!(s.endpoints.as_ref().unwrap().healthy, 1);
    assert_eq!(cond(&s, "Degraded").status, "False");
}

#[test]
fn an_ejection_by_fewer_than_most_sidecars_is_not_counted_even_as_the_largest_group() {
    // Five sidecars: two eject endpoint 1, the other three split between three other states.
    // The largest group ejects it, but not most: it is not ejected, the pool is not Degraded,
    // and (the same rule) no Event would say so.
    let r = roster(1);
    let reports = [
        report("a", false, &[(1, Ejected, "ProbeFailures", 1)]),
        report("b", false, &[(1, Ejected, "ProbeFailures", 1)]),
        report("c", false, &[(1, Healthy, "", 1)]),
        report("d", false, &[(1, Probation, "", 1)]),
        report("e", false, &[(1, Draining, "", 1)]),
    ];
    let summary = summarize(input(&r, &tally(&reports)));
    let s = &summary.status;
    assert_eq!(s.endpoints.as_ref().unwrap().ejected, 0);
    assert_eq!(
        s.endpoints.as_ref().unwrap().healthy,
        1,
        "ties go to the healthier"
    );
    assert_eq!(cond(s, "Degraded").status, "False");
    assert!(summary.majority.is_empty());
    // It is still listed, with how many eject it.
    assert_eq!((s.ejections[0].ejected_by, s.ejections[0].of), (2, 5));
    // A third ejecting sidecar makes it most of them: ejected, Degraded, in the majority set.
    let mut more = reports.to_vec();
    more[2] = report("c", false, &[(1, Ejected, "ProbeFailures", 1)]);
    let summary = summarize(input(&r, &tally(&more)));
    assert_eq!(summary.status.endpoints.as_ref().unwrap().ejected, 1);
    assert_eq!(cond(&summary.status, "Degraded").status, "True");
    assert_eq!(
        summary.majority.get("10.0.0.1:8080"),
        Some(&MajorityEjection {
            pod: Some("web-1".into()),
            reason: "ProbeFailures".into(),
            ejected_by: 3,
            of: 5,
        })
    );
}

#[test]
fn text_a_sidecar_reports_is_quoted_so_it_cannot_pass_for_the_controllers() {
    assert_eq!(
        reported(r#"ok" reason: "all healthy"#),
        r#"reported by a sidecar: "ok\" reason: \"all healthy""#
    );
}

#[test]
fn unreported_endpoints_count_from_their_slice_conditions() {
    let mut r = roster(3);
    r.endpoints[1].terminating = true;
    r.endpoints[2].ready = false;
    r.endpoints[2].serving = false;
    let s = aggregate(input(&r, &PoolTally::default()));
    assert_eq!(
        s.endpoints,
        Some(EndpointCounts {
            total: 3,
            healthy: 1,
            ejected: 0,
            probation: 0,
            draining: 1
        })
    );
    assert_eq!(s.sidecars.as_ref().unwrap().reporting, 0);
    assert!(s.ejections.is_empty());
    // Without a report the count is the slices' readiness, and the condition says so.
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AwaitingReports")
    );
    assert_eq!(
        ready.message,
        "no sidecar has reported health yet (3 connected); 1 of 3 endpoints ready in their \
         EndpointSlices; roster version 7"
    );
    // One report is enough for the sidecars' view.
    let reports = [report("a", false, &[(1, Healthy, "ProbeSucceeded", 1)])];
    let s = aggregate(input(&r, &tally(&reports)));
    assert_eq!(cond(&s, "Ready").reason, "RosterServed");
}

#[test]
fn panic_needs_most_reporting_sidecars() {
    let r = roster(2);
    let eps = [(1, Healthy, "", 1), (2, Ejected, "ProbeFailures", 1)];
    let reports = |panicking: usize, of: usize| -> Vec<PoolHealth> {
        (0..of)
            .map(|i| report(&format!("s{i}"), i < panicking, &eps))
            .collect()
    };
    let panic = |panicking: usize, of: usize| {
        let s = aggregate(input(&r, &tally(&reports(panicking, of))));
        let p = cond(&s, "Panic").clone();
        (p.status, p.reason, p.message)
    };
    // One pod of three cannot set it, nor can half.
    assert_eq!(
        panic(1, 3),
        (
            "False".into(),
            "NotInPanic".into(),
            "1 of 3 sidecars route in panic mode: not most of them".into()
        )
    );
    assert_eq!(panic(1, 2).0, "False");
    assert_eq!(panic(2, 4).0, "False");
    assert_eq!(
        panic(2, 3),
        (
            "True".into(),
            "PanicMode".into(),
            "2 of 3 sidecars route in panic mode".into()
        )
    );
    assert_eq!(panic(1, 1).0, "True");
    assert_eq!(panic(0, 3).2, "no sidecar routes in panic mode");
}

#[test]
fn problems_and_empty_pools_are_not_ready_with_a_reason() {
    let problem = Problem {
        reason: UnavailableReason::ServiceNotFound,
        message: "Service shop/web does not exist".into(),
    };
    let s = aggregate(Input {
        served: Served::Problem(&problem),
        ..input(&roster(0), &PoolTally::default())
    });
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ServiceNotFound")
    );
    assert_eq!(ready.message, "Service shop/web does not exist");
    assert!(s.endpoints.is_none() && s.roster_version.is_none());

    let empty = roster(0);
    let s = aggregate(input(&empty, &PoolTally::default()));
    assert_eq!(cond(&s, "Ready").reason, "NoEndpoints");

    let r = roster(1);
    let reports = [report("a", false, &[(1, Ejected, "ProbeFailures", 1)])];
    assert_eq!(
        cond(&aggregate(input(&r, &tally(&reports))), "Ready").reason,
        "NoHealthyEndpoints"
    );
}

#[test]
fn transition_time_is_kept_while_a_condition_holds() {
    let r = roster(1);
    let first = aggregate(input(&r, &PoolTally::default()));
    let later = Timestamp::from_second(T0 + 60).unwrap();
    let second = aggregate(Input {
        previous: Some(&first),
        now: later,
        ..input(&r, &PoolTally::default())
    });
    assert_eq!(second, first);
    let reports = [report("a", false, &[(1, Ejected, "ProbeFailures", 1)])];
    let third = aggregate(Input {
        previous: Some(&second),
        now: later,
        ..input(&r, &tally(&reports))
    });
    assert_eq!(cond(&third, "Ready").last_transition_time, Time(later));
    assert_eq!(cond(&third, "Panic").last_transition_time, Time(now()));
}

#[test]
fn ejection_list_is_capped() {
    let r = roster(MAX_EJECTIONS + 10);
    let eps: Vec<_> = (1..=MAX_EJECTIONS + 10)
        .map(|i| (i, Ejected, "ProbeFailures", 1))
        .collect();
    let reports = [report("a", false, &eps)];
    let s = aggregate(input(&r, &tally(&reports)));
    assert_eq!(s.ejections.len(), MAX_EJECTIONS);
    assert_eq!(
        s.endpoints.as_ref().unwrap().ejected as usize,
        MAX_EJECTIONS + 10
    );
}

#[test]
fn a_minority_ejecting_the_lowest_addresses_cannot_push_a_majority_ejection_out_of_the_list() {
    // One pod ejects the 60 lowest addresses; the three others agree on endpoint 70 alone.
    let r = roster(70);
    let minority: Vec<_> = (1..=70)
        .map(|i| match i {
            1..=60 => (i, Ejected, "ProbeFailures", 1),
            _ => (i, Healthy, "", 1),
        })
        .collect();
    let majority: Vec<_> = (1..=70)
        .map(|i| match i {
            70 => (i, Ejected, "ConsecutiveGatewayErrors", 2),
            _ => (i, Healthy, "", 1),
        })
        .collect();
    let reports = [
        report("liar", false, &minority),
        report("a", false, &majority),
        report("b", false, &majority),
        report("c", false, &majority),
    ];
    let s = aggregate(input(&r, &tally(&reports)));
    assert_eq!(s.ejections.len(), MAX_EJECTIONS);
    let first = &s.ejections[0];
    assert_eq!(
        (first.address.as_str(), first.ejected_by, first.of),
        ("10.0.0.70:8080", 3, 4)
    );
    // The minority's fill the rest in address order.
    assert_eq!(s.ejections[1].address, "10.0.0.1:8080");
    assert!(s.ejections[1..].iter().all(|e| e.ejected_by == 1));
    // Only endpoint 70 counts as ejected: the others are healthy for most sidecars.
    assert_eq!(s.endpoints.as_ref().unwrap().ejected, 1);
}

/// One report per sidecar `s0`, `s1`, ...: endpoint 1 healthy, roster version 7.
fn healthy_reports(sidecars: usize) -> Vec<PoolHealth> {
    (0..sidecars)
        .map(|i| {
            report(
                &format!("s{i}"),
                false,
                &[(1, Healthy, "ProbeSucceeded", 1)],
            )
        })
        .collect()
}

/// `roster(n)` served as a version published `age_ms` before `now()`, with reports from
/// sidecars running `versions`.
fn served_since(age_ms: u64, versions: &[u64]) -> BackendPoolStatus {
    let r = roster(2);
    let version = (T0 as u64) * 1000 - age_ms;
    let mut reports = healthy_reports(versions.len());
    for (rep, v) in reports.iter_mut().zip(versions) {
        rep.roster_version = if *v == 0 { version } else { *v };
    }
    aggregate(Input {
        served: Served::Roster {
            version,
            roster: &r,
        },
        ..input(&r, &tally(&reports))
    })
}

#[test]
fn a_roster_no_sidecar_applied_is_not_ready_once_the_grace_has_passed() {
    let old = 1_000;
    // Every sidecar still on an older roster 20 s after publication: refused.
    let s = served_since(20_000, &[old, old]);
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "RosterNotApplied")
    );
    assert!(
        ready
            .message
            .starts_with("none of the 2 reporting sidecars runs roster version"),
        "{}",
        ready.message
    );
    assert!(
        ready.message.contains("published 20s ago"),
        "{}",
        ready.message
    );
    // Within the grace it may still be on its way.
    let s = served_since(APPLY_GRACE_MS - 1, &[old, old]);
    assert_eq!(cond(&s, "Ready").reason, "RosterServed");
    assert!(!cond(&s, "Ready").message.contains("older roster"));
    // Some behind: still ready, and the message says how many lag.
    let s = served_since(20_000, &[old, 0, 0]);
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "RosterServed")
    );
    assert!(
        ready
            .message
            .ends_with("; 1 of 3 sidecars still run an older roster"),
        "{}",
        ready.message
    );
    // All applied: nothing said.
    let s = served_since(20_000, &[0, 0]);
    assert!(!cond(&s, "Ready").message.contains("older"));
}

/// `roster(2)` served as version 7 with one report per entry of `refusals`: `Some(reason)` for
/// a sidecar that refused version 7 (it runs 6), `None` for one that runs 7.
fn with_refusals(refusals: &[Option<&str>]) -> BackendPoolStatus {
    let r = roster(2);
    let mut reports = healthy_reports(refusals.len());
    for (rep, refusal) in reports.iter_mut().zip(refusals) {
        if let Some(reason) = refusal {
            rep.roster_version = 6;
            rep.refused = Some(rollcall_api::roster::Refusal {
                version: 7,
                reason: reason.to_string(),
            });
        }
    }
    aggregate(input(&r, &tally(&reports)))
}

#[test]
fn a_roster_every_sidecar_refused_is_not_ready_at_once_with_their_reason() {
    let timeout = "policy.healthCheck.timeout: must be below interval";
    let s = with_refusals(&[Some(timeout), Some(timeout), Some("policy.x: other")]);
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "RosterRefused")
    );
    assert_eq!(
        ready.message,
        format!(
            "every reporting sidecar (3) refused roster version 7: {timeout}; they route on \
             the roster they had"
        )
    );
    // Some refused: ready, and the message says how many and why.
    let s = with_refusals(&[Some(timeout), None]);
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "RosterServed")
    );
    assert!(
        ready
            .message
            .ends_with(&format!("; 1 of 2 sidecars refused it: {timeout}")),
        "{}",
        ready.message
    );
    // None refused: nothing said.
    let s = with_refusals(&[None, None]);
    assert!(!cond(&s, "Ready").message.contains("refused"));
}
