use super::*;
use rollcall_api::policy::PoolPolicy;
use rollcall_api::roster::Roster;

fn roster(n: usize) -> PoolState {
    PoolState::Roster(Roster {
        endpoints: (0..n)
            .map(|i| {
                rollcall_api::roster::Endpoint::serving(
                    format!("10.0.0.{}:80", i + 1).parse().unwrap(),
                )
            })
            .collect(),
        policy: PoolPolicy::default(),
        service: "shop/web:80".into(),
    })
}

fn web() -> PoolRef {
    PoolRef::new("shop", "web")
}

#[test]
fn version_bumps_only_when_content_changes() {
    let hub = RosterHub::new();
    assert_eq!(hub.publish(&web(), roster(1), 1000), Some(1000));
    assert_eq!(hub.publish(&web(), roster(1), 2000), None);
    assert_eq!(hub.publish(&web(), roster(2), 1000), Some(1001));
    assert_eq!(hub.publish(&web(), roster(3), 5000), Some(5000));
    let published = hub.current(&web()).unwrap();
    assert_eq!(published.update.version, 5000);
    // The bytes every stream sends are that version, encoded.
    let wire: pb::RosterUpdate =
        prost::Message::decode(published.wire().bytes().clone()).expect("the wire form decodes");
    assert_eq!(wire.version, 5000);
    // With the fingerprint of the roster, for a later stream to name what it holds.
    let mut expected = pb::RosterUpdate::try_from(&published.update).unwrap();
    if let PoolState::Roster(r) = &published.update.state {
        let policy = serde_json::to_string(&r.policy).unwrap();
        expected.fingerprint = rollcall_api::delta::fingerprint(r, &policy);
    }
    assert_eq!(wire.fingerprint.len(), 32);
    assert_eq!(published.fingerprint, wire.fingerprint);
    assert_eq!(expected, wire);
}

#[test]
fn unknown_pool_waits_until_synced_then_reads_not_found() {
    let hub = RosterHub::new();
    let rx = hub.subscribe(&web(), 1);
    assert!(rx.borrow().is_none());
    hub.mark_synced(7, []);
    let slot = rx.borrow().clone().unwrap();
    assert!(matches!(
        slot.update.state,
        PoolState::Unavailable {
            reason: UnavailableReason::PoolNotFound,
            ..
        }
    ));
    let other = hub.subscribe(&PoolRef::new("shop", "nope"), 8);
    assert!(other.borrow().is_some());
}

#[test]
fn deleted_pool_reads_deleted_and_prune_forgets_unwatched_junk() {
    let hub = RosterHub::new();
    hub.publish(&web(), roster(1), 1);
    assert_eq!(hub.live(), [web()]);
    let rx = hub.subscribe(&web(), 2);
    hub.remove(&web(), 3);
    assert!(matches!(
        rx.borrow().as_deref().unwrap().update.state,
        PoolState::Unavailable {
            reason: UnavailableReason::PoolDeleted,
            ..
        }
    ));
    assert_eq!(hub.watchers(&web()), 1);
    assert!(hub.live().is_empty());
    drop(rx);
    hub.prune();
    assert!(hub.current(&web()).is_none());
}

#[test]
fn a_pool_that_exists_at_sync_is_never_called_missing() {
    let hub = RosterHub::new();
    let rx = hub.subscribe(&web(), 1);
    hub.mark_synced(2, [web()]);
    assert!(rx.borrow().is_none(), "waits for its reconcile");
    let late = hub.subscribe(&web(), 3);
    assert!(late.borrow().is_none());
    hub.publish(&web(), roster(1), 4);
    assert!(matches!(
        late.borrow().as_deref().unwrap().update.state,
        PoolState::Roster(_)
    ));
}
