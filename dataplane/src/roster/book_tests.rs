use super::*;
use rollcall_api::proto::v1::roster_update::State as Wire;

fn book() -> Book {
    Book::new(&["shop/web=127.0.0.1:15001".parse().unwrap()])
}

fn ep(last: u8, ready: bool, serving: bool, terminating: bool) -> pb::Endpoint {
    pb::Endpoint {
        ip: format!("10.0.0.{last}"),
        port: 8080,
        pod: format!("web-{last}"),
        zone: "a".into(),
        ready,
        serving,
        terminating,
        weight: 1,
    }
}

fn roster(version: u64, endpoints: Vec<pb::Endpoint>, policy_json: &str) -> pb::RosterUpdate {
    pb::RosterUpdate {
        fleet: None,
        pool: Some(pb::PoolRef {
            namespace: "shop".into(),
            name: "web".into(),
        }),
        version,
        state: Some(Wire::Roster(pb::PoolRoster {
            endpoints,
            policy_json: policy_json.into(),
            service: "shop/web:80".into(),
        })),
        continued: false,
        fingerprint: Vec::new(),
    }
}

fn unavailable(version: u64, reason: pb::unavailable::Reason) -> pb::RosterUpdate {
    pb::RosterUpdate {
        state: Some(Wire::Unavailable(pb::Unavailable {
            reason: reason.into(),
            message: "why".into(),
        })),
        ..roster(version, vec![], "")
    }
}

fn addrs(book: &Book) -> Vec<(String, bool)> {
    book.config().pools[0]
        .endpoints
        .iter()
        .map(|e| (e.address.to_string(), e.terminating))
        .collect()
}

#[test]
fn ready_endpoints_route_serving_terminating_ones_are_last_resort_others_left_out() {
    let mut b = book();
    let outcome = b.apply(roster(
        1,
        vec![
            ep(1, true, true, false),
            ep(2, false, true, true),
            ep(3, false, false, true),
            ep(4, false, false, false),
            ep(5, false, true, false),
        ],
        "",
    ));
    assert_eq!(
        outcome,
        Outcome::Applied {
            pool: PoolRef::new("shop", "web"),
            version: 1,
            routed: 1,
            terminating: 1,
            left_out: 3,
        }
    );
    assert_eq!(
        addrs(&b),
        [
            ("10.0.0.1:8080".into(), false),
            ("10.0.0.2:8080".into(), true)
        ]
    );
    let config = b.config();
    assert_eq!(config.pools[0].name, "shop/web");
    assert_eq!(config.pools[0].listen, "127.0.0.1:15001".parse().unwrap());
    assert_eq!(config.pools[0].endpoints[0].zone.as_deref(), Some("a"));
    assert_eq!(b.versions()["shop/web"].version, 1);
}

#[test]
fn before_the_first_roster_a_pool_listens_with_no_endpoints() {
    let b = book();
    assert_eq!(b.config().pools.len(), 1);
    assert!(b.config().pools[0].endpoints.is_empty());
    assert!(b.versions().is_empty());
}

#[test]
fn unparsable_or_invalid_policy_keeps_the_previous_roster() {
    let mut b = book();
    b.apply(roster(
        1,
        vec![ep(1, true, true, false)],
        r#"{"panicThreshold": "30%"}"#,
    ));
    let before = b.config();
    let outcome = b.apply(roster(2, vec![ep(2, true, true, false)], "{not json"));
    assert!(
        matches!(outcome, Outcome::Refused { version: 2, .. }),
        "{outcome:?}"
    );
    let invalid = r#"{"healthCheck": {"interval": "1s", "timeout": "5s"}}"#;
    let outcome = b.apply(roster(3, vec![ep(2, true, true, false)], invalid));
    let Outcome::Refused { error, .. } = &outcome else {
        panic!("expected a refusal, got {outcome:?}");
    };
    assert!(error.contains("healthCheck.timeout"), "{error}");
    assert_eq!(outcome.changed(), None);
    assert_eq!(b.config(), before);
    assert_eq!(b.versions()["shop/web"].version, 1, "still runs version 1");
    // The refusal is reported with the reason until a roster at least that new runs.
    let refused = b.versions()["shop/web"].refused.clone().expect("refused");
    assert_eq!(refused.version, 3);
    assert!(
        refused.reason.contains("healthCheck.timeout"),
        "{}",
        refused.reason
    );
    b.apply(roster(4, vec![ep(2, true, true, false)], ""));
    assert_eq!(b.versions()["shop/web"].version, 4);
    assert_eq!(b.versions()["shop/web"].refused, None);
}

#[test]
fn a_pool_whose_first_roster_is_refused_reports_the_refusal_at_version_0() {
    let mut b = book();
    assert!(b.versions().is_empty());
    b.apply(roster(5, vec![ep(1, true, true, false)], "{not json"));
    let running = &b.versions()["shop/web"];
    assert_eq!(running.version, 0);
    assert_eq!(running.refused.as_ref().map(|r| r.version), Some(5));
}

#[test]
fn pool_gone_empties_the_pool_other_reasons_keep_the_last_roster() {
    let mut b = book();
    b.apply(roster(1, vec![ep(1, true, true, false)], ""));
    let outcome = b.apply(unavailable(2, pb::unavailable::Reason::ServiceNotFound));
    assert!(
        matches!(
            outcome,
            Outcome::Stale {
                has_roster: true,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(outcome.changed(), None);
    assert_eq!(addrs(&b).len(), 1);
    let outcome = b.apply(unavailable(3, pb::unavailable::Reason::PoolDeleted));
    assert!(
        matches!(outcome, Outcome::Gone { version: 3, .. }),
        "{outcome:?}"
    );
    assert!(outcome.changed().is_some());
    assert!(addrs(&b).is_empty());
    assert_eq!(b.versions()["shop/web"].version, 3);
}

#[test]
fn stale_versions_are_ignored_within_a_stream_and_accepted_after_a_reconnect() {
    let mut b = book();
    b.apply(roster(5, vec![ep(1, true, true, false)], ""));
    let outcome = b.apply(roster(5, vec![ep(1, true, true, false)], ""));
    assert!(
        matches!(outcome, Outcome::Superseded { seen: 5, .. }),
        "{outcome:?}"
    );
    let outcome = b.apply(roster(4, vec![ep(2, true, true, false)], ""));
    assert!(matches!(outcome, Outcome::Superseded { .. }), "{outcome:?}");
    b.new_stream();
    let outcome = b.apply(roster(1, vec![ep(1, true, true, false)], ""));
    assert!(
        matches!(outcome, Outcome::Unchanged { version: 1, .. }),
        "{outcome:?}"
    );
    let outcome = b.apply(roster(2, vec![ep(2, true, true, false)], ""));
    assert!(
        matches!(outcome, Outcome::Applied { version: 2, .. }),
        "{outcome:?}"
    );
    assert_eq!(addrs(&b), [("10.0.0.2:8080".into(), false)]);
}

#[test]
fn updates_for_other_pools_and_without_pools_change_nothing() {
    let mut b = book();
    let mut other = roster(1, vec![ep(1, true, true, false)], "");
    other.pool = Some(pb::PoolRef {
        namespace: "shop".into(),
        name: "cart".into(),
    });
    assert!(matches!(b.apply(other), Outcome::Unrequested { .. }));
    let mut anonymous = roster(1, vec![ep(1, true, true, false)], "");
    anonymous.pool = None;
    assert!(matches!(b.apply(anonymous), Outcome::Malformed { .. }));
    let mut bad_ip = roster(1, vec![ep(1, true, true, false)], "");
    if let Some(Wire::Roster(r)) = &mut bad_ip.state {
        r.endpoints[0].ip = "not-an-ip".into();
    }
    assert!(matches!(b.apply(bad_ip), Outcome::Refused { .. }));
    assert!(addrs(&b).is_empty());
}

#[test]
fn a_message_names_the_one_pool_it_changed_and_that_pools_config_is_its_part_of_the_whole() {
    let mut b = Book::new(&[
        "shop/web=127.0.0.1:15001".parse().unwrap(),
        "shop/db=127.0.0.1:15002".parse().unwrap(),
    ]);
    let db = PoolRef::new("shop", "db");
    let web = PoolRef::new("shop", "web");
    let mut for_db = roster(1, vec![ep(7, true, true, false)], "");
    for_db.pool = Some(pb::PoolRef {
        namespace: "shop".into(),
        name: "db".into(),
    });
    let outcome = b.apply(for_db);
    assert_eq!(outcome.changed(), Some(&db));
    let one = b.pool_config(&db).unwrap();
    assert_eq!(one.name, "shop/db");
    assert_eq!(one.endpoints.len(), 1);
    // The whole is every pool's part, and web's part is untouched (still empty).
    let all = b.config();
    assert!(all.pools.contains(&one));
    assert!(all.pools.contains(&b.pool_config(&web).unwrap()));
    assert!(b.pool_config(&web).unwrap().endpoints.is_empty());
    assert_eq!(b.pool_config(&PoolRef::new("shop", "other")), None);
}
