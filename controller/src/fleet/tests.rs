//! The fleet registry end to end, without a network: members join and leave, report streams
//! vote, and each refresh's view says who checks what and what the fleet concludes.

use std::collections::HashSet;

use rollcall_api::policy::PoolPolicy;
use rollcall_api::roster::{Endpoint, EndpointHealth, EndpointState, Roster};

use super::*;

const SEC: Duration = Duration::from_secs(1);

fn addr(n: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, (n / 250) as u8, (n % 250) as u8 + 1], 80))
}

fn pool() -> PoolRef {
    PoolRef::new("shop", "web")
}

fn pod(n: usize) -> PodKey {
    ("shop".into(), format!("client-{n}"))
}

/// A hub serving `endpoints` endpoints with 1 s probes, `checkers` per endpoint, and
/// `max_ejection_percent`.
fn hub(endpoints: usize, checkers: u32, max_ejection_percent: u32) -> RosterHub {
    let mut policy = PoolPolicy::default();
    policy.health_check.kind = HealthCheckType::Http;
    policy.health_check.interval = rollcall_api::policy::DurationString::secs(1);
    policy.health_check.checkers = checkers;
    policy.outlier_detection.max_ejection_percent = max_ejection_percent;
    let roster = Roster {
        endpoints: (0..endpoints).map(|i| Endpoint::serving(addr(i))).collect(),
        policy,
        service: "shop/web:http".into(),
    };
    let hub = RosterHub::new();
    hub.publish(&pool(), PoolState::Roster(roster), 1);
    hub
}

fn member(n: usize) -> Member {
    Member {
        pod: pod(n),
        node: Some(format!("node-{n}")),
        zone: Some(format!("zone-{}", n % 3)),
    }
}

/// `n` members joined (each on a stream of its own).
fn joined(fleet: &Arc<Fleet>, n: usize) -> Vec<Membership> {
    (0..n)
        .map(|i| fleet.join(&pool(), member(i), fleet.stream_id()).0)
        .collect()
}

fn view(fleet: &Fleet) -> Arc<View> {
    fleet.view(&pool()).expect("a view")
}

fn report(entries: &[(usize, Option<ProbeVerdict>)], complete: bool) -> PoolHealth {
    PoolHealth {
        pool: pool(),
        roster_version: 1,
        panic: false,
        endpoints: entries
            .iter()
            .map(|&(n, probe)| EndpointHealth {
                addr: addr(n),
                state: EndpointState::Healthy,
                reason: String::new(),
                since_unix_ms: 0,
                times_ejected: 0,
                last_error: None,
                ejection_suppressed: false,
                probe,
            })
            .collect(),
        refused: None,
        removed: Vec::new(),
        complete,
        continued: false,
    }
}

/// The pods assigned to check endpoint `n`.
fn checkers(view: &View, n: usize) -> Vec<PodKey> {
    let mut out: Vec<PodKey> = view
        .assigned
        .iter()
        .filter(|(_, addrs)| addrs.contains(&addr(n)))
        .map(|(p, _)| p.clone())
        .collect();
    out.sort();
    out
}

/// Every checker of endpoint `n` reports `verdicts[i]` (the i-th checker, by pod).
fn vote(fleet: &Fleet, view: &View, n: usize, verdicts: &[ProbeVerdict], stream: u64) {
    for (pod, verdict) in checkers(view, n).iter().zip(verdicts) {
        fleet.record(pod, stream, &report(&[(n, Some(*verdict))], false));
    }
}

#[test]
fn with_no_more_sidecars_than_checkers_everyone_probes() {
    let fleet = Arc::new(Fleet::new());
    let hub = hub(10, 3, 50);
    let _members = joined(&fleet, 3);
    fleet.refresh(&hub, Instant::now());
    let v = view(&fleet);
    assert!(v.probe_all);
    assert!(v.assigned.is_empty());
    let _more = joined_from(&fleet, 3, 1);
    fleet.refresh(&hub, Instant::now());
    assert!(!view(&fleet).probe_all, "four sidecars, three checkers");
}

fn joined_from(fleet: &Arc<Fleet>, first: usize, n: usize) -> Vec<Membership> {
    (first..first + n)
        .map(|i| fleet.join(&pool(), member(i), fleet.stream_id()).0)
        .collect()
}

#[test]
fn every_endpoint_gets_its_checkers_and_waits_for_their_verdicts() {
    let fleet = Arc::new(Fleet::new());
    let hub = hub(20, 3, 50);
    let _members = joined(&fleet, 8);
    let t0 = Instant::now();
    fleet.refresh(&hub, t0);
    let v = view(&fleet);
    for n in 0..20 {
        assert_eq!(checkers(&v, n).len(), 3, "endpoint {n}");
    }
    assert_eq!(v.pending.len(), 20, "nobody has spoken yet");
    assert!(v.unchecked.is_empty());
    // Two intervals of silence: every sidecar probes them itself.
    fleet.refresh(&hub, t0 + 2 * SEC);
    let v = view(&fleet);
    assert_eq!(v.unchecked.len(), 20);
    assert!(v.pending.is_empty());
    // One checker speaks for endpoint 0: it is checked again.
    let stream = fleet.stream_id();
    fleet.record(
        &checkers(&v, 0)[0],
        stream,
        &report(&[(0, Some(ProbeVerdict::Passing))], true),
    );
    fleet.refresh(&hub, t0 + 2 * SEC);
    let v = view(&fleet);
    assert!(!v.unchecked.contains(&addr(0)));
    assert_eq!(v.unchecked.len(), 19);
    assert_eq!(v.summary.partly_checked, 1);
}

#[test]
fn a_majority_fails_an_endpoint_and_a_lone_liar_is_outvoted() {
    use ProbeVerdict::{Failing as F, Passing as P};
    let fleet = Arc::new(Fleet::new());
    let hub = hub(10, 3, 50);
    let _members = joined(&fleet, 6);
    fleet.refresh(&hub, Instant::now());
    let v = view(&fleet);
    let stream = fleet.stream_id();
    vote(&fleet, &v, 1, &[F, F, P], stream);
    vote(&fleet, &v, 2, &[F, P, P], stream);
    vote(&fleet, &v, 3, &[P, P, P], stream);
    fleet.refresh(&hub, Instant::now());
    let v = view(&fleet);
    assert_eq!(v.failing, [addr(1)]);
    let summary = &v.summary;
    assert_eq!(
        summary.failing,
        [(
            addr(1),
            Tally {
                voters: 3,
                failing: 2
            }
        )]
    );
    assert_eq!(summary.fully_checked, 3);
    // Each sidecar's message: its assignment, the same verdicts.
    let mine = v.health_for(&pod(0));
    assert_eq!(mine.failing, [addr(1)]);
    assert_eq!(
        mine.assigned,
        v.assigned.get(&pod(0)).cloned().unwrap_or_default()
    );
}

#[test]
fn votes_of_a_sidecar_not_assigned_to_the_endpoint_do_not_count() {
    let fleet = Arc::new(Fleet::new());
    let hub = hub(10, 3, 50);
    let _members = joined(&fleet, 6);
    fleet.refresh(&hub, Instant::now());
    let v = view(&fleet);
    let outsiders: Vec<PodKey> = (0..6)
        .map(pod)
        .filter(|p| !checkers(&v, 4).contains(p))
        .collect();
    for p in &outsiders {
        fleet.record(p, 1, &report(&[(4, Some(ProbeVerdict::Failing))], false));
    }
    fleet.refresh(&hub, Instant::now());
    assert!(view(&fleet).failing.is_empty());
}

#[test]
fn the_fleet_never_fails_more_than_max_ejection_percent() {
    let fleet = Arc::new(Fleet::new());
    let hub = hub(10, 3, 20);
    let _members = joined(&fleet, 6);
    fleet.refresh(&hub, Instant::now());
    let v = view(&fleet);
    for n in 0..10 {
        vote(&fleet, &v, n, &[ProbeVerdict::Failing; 3], 1);
    }
    fleet.refresh(&hub, Instant::now());
    let v = view(&fleet);
    let summary = &v.summary;
    assert_eq!(v.failing.len(), 2, "20% of 10");
    assert_eq!(summary.capped, 8);
    assert_eq!(summary.failing.len(), 10);
}

#[test]
fn a_checker_leaving_hands_its_endpoints_on_and_its_votes_stop_counting() {
    let fleet = Arc::new(Fleet::new());
    let hub = hub(30, 3, 50);
    let mut members = joined(&fleet, 8);
    fleet.refresh(&hub, Instant::now());
    let before = view(&fleet);
    let gone = pod(2);
    let theirs: HashSet<SocketAddr> = before
        .assigned
        .get(&gone)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .collect();
    assert!(!theirs.is_empty());
    drop(members.remove(2));
    fleet.refresh(&hub, Instant::now());
    let after = view(&fleet);
    assert!(!after.assigned.contains_key(&gone));
    for n in 0..30 {
        let (was, now) = (checkers(&before, n), checkers(&after, n));
        assert_eq!(now.len(), 3);
        if theirs.contains(&addr(n)) {
            assert_eq!(was.iter().filter(|p| now.contains(p)).count(), 2, "{n}");
        } else {
            assert_eq!(was, now, "endpoint {n} moved");
        }
    }
    // A report stream that ends takes its votes with it.
    let voter = checkers(&after, 0)[0].clone();
    fleet.record(
        &voter,
        41,
        &report(&[(0, Some(ProbeVerdict::Failing))], true),
    );
    fleet.refresh(&hub, Instant::now());
    assert_eq!(view(&fleet).failing, [addr(0)], "its one vote decides");
    fleet.forget_votes(&voter, 40);
    fleet.refresh(&hub, Instant::now());
    assert_eq!(
        view(&fleet).failing,
        [addr(0)],
        "another stream's end changes nothing"
    );
    fleet.forget_votes(&voter, 41);
    fleet.refresh(&hub, Instant::now());
    assert!(view(&fleet).failing.is_empty());
}

#[test]
fn a_newer_watch_of_the_same_pod_is_not_undone_by_the_older_ones_end() {
    let fleet = Arc::new(Fleet::new());
    let hub = hub(10, 3, 50);
    let _others = joined_from(&fleet, 1, 4);
    let (old, _) = fleet.join(&pool(), member(0), fleet.stream_id());
    let (_new, _) = fleet.join(&pool(), member(0), fleet.stream_id());
    drop(old);
    fleet.refresh(&hub, Instant::now());
    assert_eq!(view(&fleet).summary.members, 5);
}

#[test]
fn a_complete_report_replaces_the_votes_and_a_newer_stream_starts_over() {
    let fleet = Arc::new(Fleet::new());
    let hub = hub(10, 3, 50);
    let _members = joined(&fleet, 6);
    fleet.refresh(&hub, Instant::now());
    let v = view(&fleet);
    let voter = checkers(&v, 5)[0].clone();
    fleet.record(
        &voter,
        1,
        &report(&[(5, Some(ProbeVerdict::Failing))], true),
    );
    fleet.refresh(&hub, Instant::now());
    assert_eq!(view(&fleet).failing, [addr(5)]);
    // The same stream's complete report without it: the vote is gone.
    fleet.record(&voter, 1, &report(&[(5, None)], true));
    fleet.refresh(&hub, Instant::now());
    assert!(view(&fleet).failing.is_empty());
    fleet.record(
        &voter,
        1,
        &report(&[(5, Some(ProbeVerdict::Failing))], false),
    );
    // A newer stream's first report: what the old one said no longer stands.
    fleet.record(
        &voter,
        2,
        &report(&[(6, Some(ProbeVerdict::Passing))], false),
    );
    fleet.refresh(&hub, Instant::now());
    assert!(view(&fleet).failing.is_empty());
}
