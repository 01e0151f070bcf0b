//! Deltas and multi-part states over a real `Watch` stream: what a delta-capable sidecar is
//! sent for each kind of change, and that what it assembles is always the published roster.

mod common;

use std::time::Duration;

use common::*;
use rollcall_api::delta::{Assembled, Assembler, PART_ENDPOINTS};
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{PoolState, RosterUpdate, WatchRequest};
use rollcall_controller::server::Limits;
use tokio::time::timeout;
use tonic::Streaming;

async fn watch_deltas(
    c: &mut pb::roster_client::RosterClient<tonic::transport::Channel>,
    pod: &str,
) -> Streaming<pb::RosterUpdate> {
    let mut sidecar = sidecar();
    sidecar.pod = pod.to_string();
    let req = WatchRequest {
        fleet_health: false,
        sidecar,
        pools: vec![pool("web")],
        accepts_deltas: true,
        held: Vec::new(),
    };
    c.watch(pb::WatchRequest::from(&req))
        .await
        .unwrap()
        .into_inner()
}

/// The raw messages up to and including the one that completes a state, and that state.
async fn next_state(
    s: &mut Streaming<pb::RosterUpdate>,
    asm: &mut Assembler,
) -> (Vec<pb::RosterUpdate>, RosterUpdate) {
    let mut raw = Vec::new();
    loop {
        let msg = timeout(Duration::from_secs(5), s.message())
            .await
            .expect("no message within 5s")
            .unwrap()
            .expect("stream ended");
        raw.push(msg.clone());
        if let Assembled::Complete(update) = asm.accept(msg).unwrap() {
            return (raw, RosterUpdate::try_from(update).unwrap());
        }
    }
}

fn is_delta(m: &pb::RosterUpdate) -> bool {
    matches!(m.state, Some(pb::roster_update::State::Delta(_)))
}

/// `roster(n)` with endpoint `i` given weight `w`.
fn reweighted(n: usize, i: usize, w: u32) -> PoolState {
    let PoolState::Roster(mut r) = roster(n) else {
        unreachable!()
    };
    r.endpoints[i].weight = w;
    PoolState::Roster(r)
}

#[tokio::test]
async fn a_large_pool_comes_in_parts_and_a_small_change_as_one_small_delta() {
    let srv = start(Limits::default()).await;
    let n = 3 * PART_ENDPOINTS + 17;
    let v1 = srv.state.hub.publish(&pool("web"), roster(n), 100).unwrap();
    let mut c = client(srv.addr).await;
    let mut s = watch_deltas(&mut c, "front-d1").await;
    let mut asm = Assembler::new();

    let (raw, state) = next_state(&mut s, &mut asm).await;
    assert_eq!(raw.len(), 4, "{n} endpoints in parts of {PART_ENDPOINTS}");
    assert!(raw.iter().all(|m| m.version == v1));
    assert!(raw[..3].iter().all(|m| m.continued) && !raw[3].continued);
    assert!(
        raw.iter()
            .all(|m| prost::Message::encoded_len(m) < 16 * 1024)
    );
    assert_eq!(state.state, roster(n));

    let v2 = srv
        .state
        .hub
        .publish(&pool("web"), reweighted(n, 5, 3), 100)
        .unwrap();
    let (raw, state) = next_state(&mut s, &mut asm).await;
    assert_eq!(raw.len(), 1);
    assert!(is_delta(&raw[0]));
    let Some(pb::roster_update::State::Delta(d)) = &raw[0].state else {
        unreachable!()
    };
    assert_eq!(
        (d.base_version, d.upserted.len(), d.removed.len()),
        (v1, 1, 0)
    );
    assert!(d.policy_json.is_none(), "the policy did not change");
    assert!(prost::Message::encoded_len(&raw[0]) < 200);
    assert_eq!((state.version, state.state), (v2, reweighted(n, 5, 3)));

    // Most of the pool replaced: the complete state again, in parts.
    srv.state
        .hub
        .publish(&pool("web"), roster(2 * PART_ENDPOINTS + 1), 100)
        .unwrap();
    let PoolState::Roster(big) = roster(4 * PART_ENDPOINTS) else {
        unreachable!()
    };
    let mut shifted = big.clone();
    shifted.endpoints.drain(..2 * PART_ENDPOINTS);
    let _ = next_state(&mut s, &mut asm).await;
    srv.state
        .hub
        .publish(&pool("web"), PoolState::Roster(shifted.clone()), 100)
        .unwrap();
    let (raw, state) = next_state(&mut s, &mut asm).await;
    assert!(
        raw.len() > 1 && !is_delta(&raw[0]),
        "a change of {} entries goes whole",
        4 * PART_ENDPOINTS
    );
    assert_eq!(state.state, PoolState::Roster(shifted));
}

#[tokio::test]
async fn a_sidecar_without_deltas_gets_every_state_complete_in_one_message() {
    let srv = start(Limits::default()).await;
    let n = 2 * PART_ENDPOINTS;
    srv.state.hub.publish(&pool("web"), roster(n), 100).unwrap();
    let mut c = client(srv.addr).await;
    let mut s = watch(&mut c, &["web"]).await;
    assert_eq!(next(&mut s).await.state, roster(n));
    srv.state
        .hub
        .publish(&pool("web"), reweighted(n, 0, 4), 100)
        .unwrap();
    let msg = timeout(Duration::from_secs(5), s.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!msg.continued && !is_delta(&msg));
    assert_eq!(
        RosterUpdate::try_from(msg).unwrap().state,
        reweighted(n, 0, 4)
    );
}

#[tokio::test]
async fn a_reconnect_naming_the_roster_it_holds_gets_an_empty_delta_not_the_roster_again() {
    let srv = start(Limits::default()).await;
    let n = 2 * PART_ENDPOINTS;
    srv.state.hub.publish(&pool("web"), roster(n), 100).unwrap();
    let mut c = client(srv.addr).await;
    let mut asm = Assembler::new();
    let mut s = watch_deltas(&mut c, "front-r1").await;
    let (raw, _) = next_state(&mut s, &mut asm).await;
    assert!(raw.len() > 1, "the first stream gets the roster in parts");
    drop(s);

    // The controller restarted, say: same roster, a newer version.
    let v2 = srv
        .state
        .hub
        .publish(&pool("web"), reweighted(n, 0, 1), 100);
    assert_eq!(v2, None, "the same roster is not a new version");
    srv.state
        .hub
        .publish(&pool("web"), reweighted(n, 0, 9), 100)
        .unwrap();
    let v3 = srv.state.hub.publish(&pool("web"), roster(n), 100).unwrap();
    asm.new_stream();
    let held = asm.held_rosters();
    let watch_holding = |c: &mut pb::roster_client::RosterClient<tonic::transport::Channel>,
                         held: Vec<pb::HeldRoster>| {
        let mut sidecar = sidecar();
        sidecar.pod = "front-r1".into();
        let mut req = pb::WatchRequest::from(&WatchRequest {
            fleet_health: false,
            sidecar,
            pools: vec![pool("web")],
            accepts_deltas: true,
            held: Vec::new(),
        });
        req.held = held;
        let mut c = c.clone();
        async move { c.watch(req).await.unwrap().into_inner() }
    };
    let mut s = watch_holding(&mut c, held.clone()).await;
    let (raw, state) = next_state(&mut s, &mut asm).await;
    assert_eq!(raw.len(), 1);
    assert!(
        is_delta(&raw[0]) && prost::Message::encoded_len(&raw[0]) < 120,
        "{:?}",
        raw[0]
    );
    assert_eq!((state.version, state.state), (v3, roster(n)));
    drop(s);

    // Holding something else (an older fingerprint): the complete roster, in parts.
    let mut stale = held;
    stale[0].fingerprint = vec![0; 32];
    let mut fresh = Assembler::new();
    let mut s = watch_holding(&mut c, stale).await;
    let (raw, state) = next_state(&mut s, &mut fresh).await;
    assert!(raw.len() > 1 && !is_delta(&raw[0]));
    assert_eq!(state.state, roster(n));
}
