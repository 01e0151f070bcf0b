use std::time::Duration;

use super::*;
use crate::health::machine::EndpointReport;
use crate::pool::EndpointView;
use rollcall_api::roster::{EndpointState, PoolRef};

const HEARTBEAT: Duration = Duration::from_secs(10);

fn report(port: u16, state: State, reason: Reason, since: Instant) -> EndpointReport {
    EndpointReport {
        probe_verdict: None,
        address: SocketAddr::from(([10, 0, 0, 1], port)),
        state,
        reason,
        since,
        seconds_in_state: 0,
        ejection_multiplier: 0,
        ejections_total: 0,
        ejection_remaining_seconds: None,
        consecutive_probe_failures: 0,
        consecutive_probe_successes: 0,
        consecutive_gateway_errors: 0,
        consecutive_5xx: 0,
        probation_successes: 0,
        window_requests: 0,
        window_failures: 0,
        last_error: None,
        seconds_since_last_error: None,
        ejection_suppressed: false,
        probe_successes_total: 0,
        probe_failures_total: 0,
        weight_factor: 1.0,
    }
}

fn view(name: &str, endpoints: Vec<EndpointReport>) -> PoolView {
    PoolView {
        name: name.into(),
        panic: false,
        endpoints: endpoints
            .into_iter()
            .map(|health| EndpointView {
                health,
                since: String::new(),
                zone: None,
                weight: 1,
                in_flight: 0,
                recent_error_rate: 0.0,
                open_connections: 0,
            })
            .collect(),
    }
}

fn versions(pools: &[(&str, u64)]) -> Versions {
    pools
        .iter()
        .map(|(name, v)| {
            let pool: PoolRef = name.parse().unwrap();
            let running = Running {
                pool,
                version: *v,
                refused: None,
            };
            (name.to_string(), running)
        })
        .collect()
}

fn sidecar() -> SidecarId {
    SidecarId {
        namespace: "shop".into(),
        pod: "front-1".into(),
        instance: "abc".into(),
    }
}

#[test]
fn view_becomes_the_protocol_report_with_wall_clock_since() {
    let now = Instant::now();
    let wall_now = UNIX_EPOCH + Duration::from_secs(1_000);
    let mut ejected = report(
        8080,
        State::Ejected,
        Reason::ConsecutiveGatewayErrors,
        now - Duration::from_secs(3),
    );
    ejected.ejection_multiplier = 2;
    ejected.last_error = Some("connection refused".into());
    ejected.ejection_suppressed = true;
    let mut v = view("shop/web", vec![ejected]);
    v.panic = true;
    let running = Running {
        pool: PoolRef::new("shop", "web"),
        version: 7,
        refused: Some(Refusal {
            version: 8,
            reason: "policy.retries.attempts: must be at most 10".into(),
        }),
    };
    let health = pool_health(&running, &v, now, wall_now);
    assert_eq!(health.roster_version, 7);
    assert_eq!(health.refused, running.refused);
    assert!(health.panic);
    let e = &health.endpoints[0];
    assert_eq!(e.addr, "10.0.0.1:8080".parse().unwrap());
    assert_eq!(e.state, EndpointState::Ejected);
    assert_eq!(e.reason, "ConsecutiveGatewayErrors");
    assert_eq!(e.since_unix_ms, 997_000);
    assert_eq!(e.times_ejected, 2);
    assert_eq!(e.last_error.as_deref(), Some("connection refused"));
    assert!(e.ejection_suppressed);
}

#[test]
fn first_report_names_the_sidecar_and_carries_every_pool_with_a_roster() {
    let now = Instant::now();
    let views = [
        view(
            "shop/web",
            vec![report(1, State::Unknown, Reason::New, now)],
        ),
        view("shop/cart", vec![]),
    ];
    let sent = Sent::new(sidecar(), false);
    let due = sent
        .due(
            &views,
            &versions(&[("shop/web", 1)]),
            HEARTBEAT,
            now,
            SystemTime::now(),
        )
        .expect("a first report");
    assert_eq!(due.reports[0].sidecar, Some(sidecar()));
    assert_eq!(due.reports[0].pools.len(), 1, "shop/cart has no roster yet");
    assert_eq!(due.reports[0].pools[0].pool, PoolRef::new("shop", "web"));
}

#[test]
fn only_facts_that_matter_trigger_a_report() {
    let now = Instant::now();
    let vs = versions(&[("shop/web", 1), ("shop/cart", 1)]);
    let healthy = report(1, State::Healthy, Reason::ProbeSucceeded, now);
    let views = [
        view("shop/web", vec![healthy.clone()]),
        view("shop/cart", vec![]),
    ];
    let mut sent = Sent::new(sidecar(), false);
    let due = sent
        .due(&views, &vs, HEARTBEAT, now, SystemTime::now())
        .unwrap();
    sent.sent(due, now);

    let mut ticking = healthy.clone();
    ticking.probe_successes_total = 40;
    ticking.seconds_in_state = 9;
    ticking.window_requests = 100;
    ticking.last_error = Some("reset".into());
    let views = [view("shop/web", vec![ticking]), view("shop/cart", vec![])];
    assert!(
        sent.due(&views, &vs, HEARTBEAT, now, SystemTime::now())
            .is_none()
    );

    let later = now + Duration::from_secs(1);
    let ejected = report(1, State::Ejected, Reason::ProbeFailures, later);
    let views = [view("shop/web", vec![ejected]), view("shop/cart", vec![])];
    let due = sent
        .due(&views, &vs, HEARTBEAT, later, SystemTime::now())
        .unwrap();
    assert_eq!(due.reports[0].sidecar, None, "named only once per stream");
    assert_eq!(due.reports[0].pools.len(), 1, "only the pool that changed");
    assert_eq!(
        due.reports[0].pools[0].endpoints[0].state,
        EndpointState::Ejected
    );
    sent.sent(due, later);

    let bumped = versions(&[("shop/web", 2), ("shop/cart", 1)]);
    let due = sent
        .due(&views, &bumped, HEARTBEAT, later, SystemTime::now())
        .unwrap();
    assert_eq!(
        due.reports[0].pools[0].roster_version, 2,
        "a new roster is acknowledged"
    );
    sent.sent(due, later);

    let mut refusing = bumped.clone();
    if let Some(web) = refusing.get_mut("shop/web") {
        web.refused = Some(Refusal {
            version: 3,
            reason: "policy.retries.attempts: must be at most 10".into(),
        });
    }
    let due = sent
        .due(&views, &refusing, HEARTBEAT, later, SystemTime::now())
        .expect("a refusal is news");
    assert_eq!(due.reports[0].pools.len(), 1);
    assert_eq!(due.reports[0].pools[0].roster_version, 2, "it still runs 2");
    assert_eq!(
        due.reports[0].pools[0].refused.as_ref().map(|r| r.version),
        Some(3)
    );
}

#[test]
fn heartbeat_is_an_empty_report_after_a_quiet_interval() {
    let now = Instant::now();
    let vs = versions(&[("shop/web", 1)]);
    let views = [view("shop/web", vec![])];
    let mut sent = Sent::new(sidecar(), false);
    let due = sent
        .due(&views, &vs, HEARTBEAT, now, SystemTime::now())
        .unwrap();
    sent.sent(due, now);
    let soon = now + HEARTBEAT / 2;
    assert!(
        sent.due(&views, &vs, HEARTBEAT, soon, SystemTime::now())
            .is_none()
    );
    let later = now + HEARTBEAT;
    let due = sent
        .due(&views, &vs, HEARTBEAT, later, SystemTime::now())
        .unwrap();
    assert!(due.reports[0].pools.is_empty());
    assert_eq!(due.reports[0].sidecar, None);
}

#[test]
fn report_changes_sends_a_pool_whole_in_parts_once_then_only_what_changed() {
    let now = Instant::now();
    let vs = versions(&[("shop/web", 1)]);
    let endpoints = |n: u16| -> Vec<EndpointReport> {
        (1..=n)
            .map(|p| report(p, State::Healthy, Reason::ProbeSucceeded, now))
            .collect()
    };
    let views = [view("shop/web", endpoints(600))];
    let mut sent = Sent::new(sidecar(), true);
    let due = sent
        .due(&views, &vs, HEARTBEAT, now, SystemTime::now())
        .unwrap();
    // The sidecar's name first, then the pool in parts of at most PART_ENTRIES.
    let parts_of = |n: usize| n.div_ceil(PART_ENTRIES);
    assert_eq!(due.reports.len(), 1 + parts_of(600));
    assert_eq!(due.reports[0].sidecar, Some(sidecar()));
    assert!(due.reports[0].pools.is_empty());
    let parts: Vec<&PoolHealth> = due.reports[1..].iter().map(|r| &r.pools[0]).collect();
    assert!(parts[0].complete && parts[1..].iter().all(|p| !p.complete));
    assert!(parts[..parts.len() - 1].iter().all(|p| p.continued));
    assert!(!parts[parts.len() - 1].continued);
    assert!(parts.iter().all(|p| p.endpoints.len() <= PART_ENTRIES));
    assert_eq!(parts.iter().map(|p| p.endpoints.len()).sum::<usize>(), 600);
    sent.sent(due, now);

    // One endpoint ejected, one gone: a report of those two only.
    let later = now + Duration::from_secs(1);
    let mut changed = endpoints(599);
    changed[9] = report(10, State::Ejected, Reason::ConsecutiveGatewayErrors, later);
    let views = [view("shop/web", changed)];
    let due = sent
        .due(&views, &vs, HEARTBEAT, later, SystemTime::now())
        .unwrap();
    assert_eq!(due.reports.len(), 1);
    let health = &due.reports[0].pools[0];
    assert!(!health.complete && !health.continued);
    assert_eq!(health.endpoints.len(), 1);
    assert_eq!(health.endpoints[0].addr.port(), 10);
    assert_eq!(health.endpoints[0].state, EndpointState::Ejected);
    assert_eq!(health.removed, vec![SocketAddr::from(([10, 0, 0, 1], 600))]);
    sent.sent(due, later);

    // A new roster version with the same endpoints: the acknowledgement alone.
    let bumped = versions(&[("shop/web", 2)]);
    let due = sent
        .due(&views, &bumped, HEARTBEAT, later, SystemTime::now())
        .unwrap();
    let health = &due.reports[0].pools[0];
    assert_eq!(
        (
            health.roster_version,
            health.endpoints.len(),
            health.removed.len()
        ),
        (2, 0, 0)
    );
    sent.sent(due, later);

    // The controller asks for it again: complete, in parts.
    sent.forget("shop/web");
    let due = sent
        .due(&views, &bumped, HEARTBEAT, later, SystemTime::now())
        .unwrap();
    assert_eq!(
        due.reports.len(),
        parts_of(599),
        "599 entries in parts, nobody to name"
    );
    assert!(due.reports[0].pools[0].complete);
    let total: usize = due.reports.iter().map(|r| r.pools[0].endpoints.len()).sum();
    assert_eq!(total, 599);
}
