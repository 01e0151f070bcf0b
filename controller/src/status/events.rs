//! Which Kubernetes Events a status change deserves, pure: an endpoint that most reporting
//! sidecars now eject (`EndpointEjected`), one they no longer eject (`EndpointReadmitted`), and
//! panic mode starting or ending (`PanicModeEntered`, `PanicModeLeft`). Ejections and
//! readmissions come from the tally's uncapped set of majority ejections (`Majority`), compared
//! with the set this replica last recorded Events for; only before its first record (a new
//! leader) is the previous set read from the written status, whose capped list holds every
//! majority ejection unless it is full of them (then nothing is concluded from an endpoint
//! missing from it). Changes arrive coalesced (about one per pool per second), and at most
//! `MAX_ENDPOINT_EVENTS` endpoint events are emitted per change, with a summary for the rest,
//! so a pool-wide blip cannot flood the API server.

use std::collections::BTreeMap;

use super::aggregate::{MAX_EJECTIONS, Majority, MajorityEjection, is_majority};
use crate::crd::BackendPoolStatus;

pub const MAX_ENDPOINT_EVENTS: usize = 5;

/// One Event to record on the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// PascalCase.
    pub reason: &'static str,
    pub note: String,
    pub warning: bool,
    /// The endpoint's Pod, recorded as the Event's related object: each endpoint's ejection is
    /// its own Event instead of folding into the pool's first one.
    pub pod: Option<String>,
}

/// The majority ejections a written status lists (all of them unless its list is full).
pub fn listed_majority(status: &BackendPoolStatus) -> Majority {
    status
        .ejections
        .iter()
        .filter(|e| is_majority(e.ejected_by, e.of))
        .map(|e| {
            let ejection = MajorityEjection {
                pod: e.pod.clone(),
                reason: e.reason.clone(),
                ejected_by: e.ejected_by,
                of: e.of,
            };
            (e.address.clone(), ejection)
        })
        .collect()
}

/// The majority ejections (address to Pod) of the status written before, and whether that is
/// all of them: its list holds the most-ejected endpoints first up to `MAX_EJECTIONS`, so every
/// majority ejection is in it unless the list is full of them.
fn written_majority(status: Option<&BackendPoolStatus>) -> (BTreeMap<&str, Option<&str>>, bool) {
    let listed: BTreeMap<&str, Option<&str>> = status
        .into_iter()
        .flat_map(|s| s.ejections.iter())
        .filter(|e| is_majority(e.ejected_by, e.of))
        .map(|e| (e.address.as_str(), e.pod.as_deref()))
        .collect();
    let complete = listed.len() < MAX_EJECTIONS;
    (listed, complete)
}

fn panicking(status: Option<&BackendPoolStatus>) -> bool {
    status.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Panic" && c.status == "True")
    })
}

/// The Events from `previous` (the status written before) to `next` (the one just written),
/// with `majority` every endpoint most sidecars now eject and `recorded` the set this replica
/// last recorded Events for (`None` before its first; `majority` is then compared with what
/// `previous` lists).
pub fn transitions(
    previous: Option<&BackendPoolStatus>,
    recorded: Option<&Majority>,
    next: &BackendPoolStatus,
    majority: &Majority,
) -> Vec<Transition> {
    let (before, before_complete) = match recorded {
        Some(recorded) => (
            recorded
                .iter()
                .map(|(addr, e)| (addr.as_str(), e.pod.as_deref()))
                .collect(),
            true,
        ),
        None => written_majority(previous),
    };
    let mut out = Vec::new();
    let mut endpoint_events = Vec::new();
    for (addr, e) in majority {
        // Not in the set before is news only if that set was complete.
        if !before.contains_key(addr.as_str()) && before_complete {
            let pod = e
                .pod
                .as_deref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default();
            endpoint_events.push(Transition {
                reason: "EndpointEjected",
                note: format!(
                    "{addr}{pod} ejected by {} of {} sidecars: {}",
                    e.ejected_by, e.of, e.reason
                ),
                warning: true,
                pod: e.pod.clone(),
            });
        }
    }
    for (addr, pod) in &before {
        // The set after comes from the tally: complete.
        if !majority.contains_key(*addr) {
            endpoint_events.push(Transition {
                reason: "EndpointReadmitted",
                note: format!("{addr} is no longer ejected by most sidecars"),
                warning: false,
                pod: pod.map(str::to_string),
            });
        }
    }
    let extra = endpoint_events.len().saturating_sub(MAX_ENDPOINT_EVENTS);
    endpoint_events.truncate(MAX_ENDPOINT_EVENTS);
    out.extend(endpoint_events);
    if extra > 0 {
        out.push(Transition {
            reason: "EndpointsChanged",
            note: format!("{extra} more endpoints were ejected or readmitted"),
            warning: true,
            pod: None,
        });
    }
    if let Some(message) = newly_invalid(previous, next) {
        out.push(Transition {
            reason: "InvalidSpec",
            note: message,
            warning: true,
            pod: None,
        });
    }
    match (unchecked(previous), unchecked(Some(next))) {
        (0, n) if n > 0 => out.push(Transition {
            reason: "FleetHealthFallback",
            note: format!(
                "{n} endpoints have had no checker's verdict for two probe intervals: every \
                 sidecar probes them itself until their checkers report"
            ),
            warning: true,
            pod: None,
        }),
        (n, 0) if n > 0 => out.push(Transition {
            reason: "FleetHealthRestored",
            note: "every endpoint has a checker's verdict again".into(),
            warning: false,
            pod: None,
        }),
        _ => {}
    }
    match (panicking(previous), panicking(Some(next))) {
        (false, true) => out.push(Transition {
            reason: "PanicModeEntered",
            note: panic_note(next),
            warning: true,
            pod: None,
        }),
        (true, false) => out.push(Transition {
            reason: "PanicModeLeft",
            note: "no sidecar routes in panic mode any more".into(),
            warning: false,
            pod: None,
        }),
        _ => {}
    }
    out
}

/// Endpoints fleet health left unchecked (every sidecar probes them itself).
fn unchecked(status: Option<&BackendPoolStatus>) -> u32 {
    status
        .and_then(|s| s.fleet_health.as_ref())
        .map_or(0, |f| f.unchecked)
}

fn ready(
    status: Option<&BackendPoolStatus>,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    status?.conditions.iter().find(|c| c.type_ == "Ready")
}

/// The message of an `InvalidSpec` the previous status did not already report.
fn newly_invalid(previous: Option<&BackendPoolStatus>, next: &BackendPoolStatus) -> Option<String> {
    let now = ready(Some(next)).filter(|c| c.reason == "InvalidSpec")?;
    let before = ready(previous).filter(|c| c.reason == "InvalidSpec");
    let repeated = before.is_some_and(|b| {
        b.message == now.message && b.observed_generation == now.observed_generation
    });
    (!repeated).then(|| now.message.clone())
}

/// At most `per_window` Events per pool in any `window`, so a flapping pool cannot flood the
/// API server with Events (on top of the per-change cap). Pure: time comes in.
#[derive(Debug)]
pub struct EventBudget {
    per_window: u32,
    window: std::time::Duration,
    spent: std::collections::HashMap<rollcall_api::roster::PoolRef, (tokio::time::Instant, u32)>,
}

impl EventBudget {
    pub fn new(per_window: u32, window: std::time::Duration) -> Self {
        Self {
            per_window,
            window,
            spent: Default::default(),
        }
    }

    /// Whether `pool` may record one more Event at `now` (and count it if so).
    pub fn take(
        &mut self,
        pool: &rollcall_api::roster::PoolRef,
        now: tokio::time::Instant,
    ) -> bool {
        let (since, used) = self.spent.entry(pool.clone()).or_insert((now, 0));
        if now.saturating_duration_since(*since) >= self.window {
            *since = now;
            *used = 0;
        }
        if *used >= self.per_window {
            return false;
        }
        *used += 1;
        true
    }
}

fn panic_note(s: &BackendPoolStatus) -> String {
    s.conditions
        .iter()
        .find(|c| c.type_ == "Panic")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::Ejection;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    fn ejection(i: usize, by: u32, of: u32) -> Ejection {
        Ejection {
            address: format!("10.0.0.{i}:80"),
            pod: Some(format!("web-{i}")),
            zone: None,
            reason: "ProbeFailures".into(),
            since: "2023-11-14T22:13:20Z".into(),
            ejected_by: by,
            of,
            last_error: None,
        }
    }

    fn status(ejections: Vec<Ejection>, panic: bool) -> BackendPoolStatus {
        BackendPoolStatus {
            ejections,
            conditions: vec![Condition {
                type_: "Panic".into(),
                status: if panic { "True" } else { "False" }.into(),
                reason: "PanicMode".into(),
                message: "2 of 3 sidecars route in panic mode".into(),
                observed_generation: Some(1),
                last_transition_time: Time(Timestamp::UNIX_EPOCH),
            }],
            ..Default::default()
        }
    }

    /// The Events from `before` to `after` for a replica that recorded nothing yet, with the
    /// tally's majority set being what `after` lists.
    fn from_written(
        before: Option<&BackendPoolStatus>,
        after: &BackendPoolStatus,
    ) -> Vec<Transition> {
        transitions(before, None, after, &listed_majority(after))
    }

    fn majority_of(ejections: &[Ejection]) -> Majority {
        listed_majority(&status(ejections.to_vec(), false))
    }

    #[test]
    fn majority_ejection_and_readmission_are_events_minority_is_not() {
        let before = status(vec![ejection(1, 2, 3), ejection(2, 1, 3)], false);
        let after = status(vec![ejection(2, 2, 3), ejection(3, 1, 3)], false);
        let expected = [
            Transition {
                reason: "EndpointEjected",
                note: "10.0.0.2:80 (web-2) ejected by 2 of 3 sidecars: ProbeFailures".into(),
                warning: true,
                pod: Some("web-2".into()),
            },
            Transition {
                reason: "EndpointReadmitted",
                note: "10.0.0.1:80 is no longer ejected by most sidecars".into(),
                warning: false,
                pod: Some("web-1".into()),
            },
        ];
        assert_eq!(from_written(Some(&before), &after), expected);
        assert!(from_written(Some(&after), &after).is_empty());
        // The same from what this replica recorded.
        let recorded = listed_majority(&before);
        let t = transitions(
            Some(&before),
            Some(&recorded),
            &after,
            &listed_majority(&after),
        );
        assert_eq!(t, expected);
        // A tie is not a majority.
        let tie = status(vec![ejection(4, 2, 4)], false);
        assert!(from_written(None, &tie).is_empty());
    }

    #[test]
    fn endpoints_left_unchecked_by_fleet_health_are_an_event_and_so_is_their_return() {
        let with_unchecked = |n: u32| BackendPoolStatus {
            fleet_health: Some(crate::crd::FleetHealthStatus {
                checkers: 3,
                sidecars: 10,
                unchecked: n,
                ..Default::default()
            }),
            ..status(Vec::new(), false)
        };
        let fallback = from_written(Some(&with_unchecked(0)), &with_unchecked(4));
        assert_eq!(
            fallback.iter().map(|t| t.reason).collect::<Vec<_>>(),
            ["FleetHealthFallback"]
        );
        assert!(fallback[0].note.starts_with("4 endpoints"), "{fallback:?}");
        assert!(from_written(Some(&with_unchecked(4)), &with_unchecked(2)).is_empty());
        let restored = from_written(Some(&with_unchecked(2)), &with_unchecked(0));
        assert_eq!(restored[0].reason, "FleetHealthRestored");
        // No fleet health before: the first unchecked endpoints are news.
        let first = from_written(Some(&status(Vec::new(), false)), &with_unchecked(1));
        assert_eq!(first[0].reason, "FleetHealthFallback");
    }

    #[test]
    fn a_pool_records_at_most_its_budget_of_events_per_window() {
        let mut budget = EventBudget::new(3, std::time::Duration::from_secs(60));
        let (web, db) = (
            rollcall_api::roster::PoolRef::new("shop", "web"),
            rollcall_api::roster::PoolRef::new("shop", "db"),
        );
        let start = tokio::time::Instant::now();
        let taken: Vec<bool> = (0..5).map(|_| budget.take(&web, start)).collect();
        assert_eq!(taken, [true, true, true, false, false]);
        assert!(budget.take(&db, start), "pools have their own budgets");
        let later = start + std::time::Duration::from_secs(59);
        assert!(!budget.take(&web, later));
        assert!(budget.take(&web, start + std::time::Duration::from_secs(60)));
    }

    #[test]
    fn panic_mode_start_and_end_are_events() {
        let calm = status(vec![], false);
        let panic = status(vec![], true);
        let t = from_written(Some(&calm), &panic);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].reason, "PanicModeEntered");
        assert_eq!(t[0].note, "2 of 3 sidecars route in panic mode");
        assert_eq!(from_written(Some(&panic), &calm)[0].reason, "PanicModeLeft");
        assert!(from_written(None, &calm).is_empty());
    }

    #[test]
    fn a_new_leader_concludes_nothing_from_an_endpoint_missing_from_a_list_full_of_majorities() {
        let full: Vec<Ejection> = (1..=MAX_EJECTIONS).map(|i| ejection(i, 3, 4)).collect();
        // The tally now has one more majority ejection: the written list could not show
        // whether it was ejected before, so no Event for it; nothing was readmitted.
        let mut more = full.clone();
        more.push(ejection(MAX_EJECTIONS + 1, 4, 4));
        let written = status(full.clone(), false);
        let out = transitions(Some(&written), None, &written, &majority_of(&more));
        assert!(out.is_empty(), "{out:?}");
        // Readmissions are known from the tally, full list or not.
        let fewer: Vec<Ejection> = (2..=MAX_EJECTIONS).map(|i| ejection(i, 3, 4)).collect();
        let out = transitions(Some(&written), None, &written, &majority_of(&fewer));
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].reason, "EndpointReadmitted");
        assert!(out[0].note.starts_with("10.0.0.1:80"), "{out:?}");
    }

    #[test]
    fn past_the_cap_ejections_and_readmissions_come_from_the_tally_not_the_list() {
        // 60 endpoints ejected by most sidecars: the status lists 50, the tally knows all.
        let sixty: Vec<Ejection> = (1..=60).map(|i| ejection(i, 3, 4)).collect();
        let fifty_nine: Vec<Ejection> = (1..=59).map(|i| ejection(i, 3, 4)).collect();
        let listed = status(sixty[..MAX_EJECTIONS].to_vec(), false);
        let recorded = majority_of(&fifty_nine);
        let out = transitions(
            Some(&listed),
            Some(&recorded),
            &listed,
            &majority_of(&sixty),
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].reason, "EndpointEjected");
        assert!(out[0].note.starts_with("10.0.0.60:80 (web-60)"), "{out:?}");
        // Endpoint 55 (never listed) is readmitted: an Event, from the tally.
        let without_55: Vec<Ejection> = sixty
            .iter()
            .filter(|e| e.address != "10.0.0.55:80")
            .cloned()
            .collect();
        let out = transitions(
            Some(&listed),
            Some(&majority_of(&sixty)),
            &listed,
            &majority_of(&without_55),
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].reason, "EndpointReadmitted");
        assert!(out[0].note.starts_with("10.0.0.55:80"), "{out:?}");
    }

    #[test]
    fn a_pool_wide_change_is_summarised() {
        let all = status((1..=20).map(|i| ejection(i, 3, 3)).collect(), false);
        let t = from_written(None, &all);
        assert_eq!(t.len(), MAX_ENDPOINT_EVENTS + 1);
        assert_eq!(
            t[MAX_ENDPOINT_EVENTS].note,
            "15 more endpoints were ejected or readmitted"
        );
    }
}
