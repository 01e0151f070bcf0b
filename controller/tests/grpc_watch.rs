//! Watch over real TCP on 127.0.0.1 with real tonic clients: snapshot then changes, reconnects,
//! slow readers, and refused input.

mod common;

use common::*;
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{PoolState, UnavailableReason, WatchRequest};
use rollcall_controller::server::Limits;
use tonic::Code;

#[tokio::test]
async fn snapshot_comes_first_then_changes_in_order() {
    let srv = start(Limits::default()).await;
    let hub = &srv.state.hub;
    let v_web = hub.publish(&pool("web"), roster(3), 100).unwrap();
    let v_api = hub.publish(&pool("api"), roster(1), 100).unwrap();
    let mut c = client(srv.addr).await;
    let mut s = watch(&mut c, &["web", "api", "missing"]).await;

    let mut snapshot: Vec<_> = Vec::new();
    for _ in 0..3 {
        let u = next(&mut s).await;
        snapshot.push((u.pool.name.clone(), u.version, u.state));
    }
    snapshot.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(snapshot[0].0, "api");
    assert_eq!(snapshot[0].1, v_api);
    assert!(matches!(
        snapshot[1].2,
        PoolState::Unavailable {
            reason: UnavailableReason::PoolNotFound,
            ..
        }
    ));
    assert_eq!((snapshot[2].0.as_str(), snapshot[2].1), ("web", v_web));
    assert_eq!(snapshot[2].2, roster(3));
    quiet(&mut s).await;

    let v2 = hub.publish(&pool("web"), roster(4), 100).unwrap();
    let u = next(&mut s).await;
    assert_eq!(
        (u.pool.name.as_str(), u.version, u.state),
        ("web", v2, roster(4))
    );
    assert!(v2 > v_web);
    // The same content again is not a change.
    assert_eq!(hub.publish(&pool("web"), roster(4), 100), None);
    quiet(&mut s).await;
    let v3 = hub.publish(&pool("api"), roster(2), 100).unwrap();
    assert_eq!(next(&mut s).await.version, v3);
    // A pool created after the watch started arrives too.
    hub.publish(&pool("missing"), roster(1), 100).unwrap();
    let u = next(&mut s).await;
    assert_eq!((u.pool.name.as_str(), u.state), ("missing", roster(1)));
    hub.remove(&pool("web"), 100);
    assert!(matches!(
        next(&mut s).await.state,
        PoolState::Unavailable {
            reason: UnavailableReason::PoolDeleted,
            ..
        }
    ));
}

#[tokio::test]
async fn reconnecting_sidecar_gets_the_current_roster() {
    let srv = start(Limits::default()).await;
    let hub = &srv.state.hub;
    hub.publish(&pool("web"), roster(1), 100).unwrap();
    let mut c = client(srv.addr).await;
    let mut s = watch(&mut c, &["web"]).await;
    assert_eq!(next(&mut s).await.state, roster(1));
    drop(s);
    drop(c);
    hub.publish(&pool("web"), roster(2), 100).unwrap();
    let v = hub.publish(&pool("web"), roster(5), 100).unwrap();
    let mut c = client(srv.addr).await;
    let mut s = watch(&mut c, &["web"]).await;
    let u = next(&mut s).await;
    assert_eq!((u.version, u.state), (v, roster(5)));
    quiet(&mut s).await;
}

#[tokio::test]
async fn slow_sidecar_does_not_hold_up_others_and_skips_to_the_newest() {
    let srv = start(Limits::default()).await;
    let hub = srv.state.hub.clone();
    hub.publish(&pool("web"), roster(1000), 1).unwrap();
    let mut slow_client = client(srv.addr).await;
    let mut slow = watch(&mut slow_client, &["web"]).await; // never read until the end
    let mut fast_client = client(srv.addr).await;
    let mut fast = watch(&mut fast_client, &["web"]).await;
    next(&mut fast).await;

    const VERSIONS: usize = 300;
    let mut last = 0;
    for i in 0..VERSIONS {
        last = hub
            .publish(&pool("web"), roster(1000 + (i % 2) + 1), 1)
            .unwrap();
        let u = next(&mut fast).await;
        assert_eq!(
            u.version, last,
            "the fast sidecar sees every version in order"
        );
    }

    let mut seen = 0;
    let mut prev = 0;
    loop {
        let u = next(&mut slow).await;
        assert!(u.version > prev, "versions increase within a stream");
        prev = u.version;
        seen += 1;
        if u.version == last {
            break;
        }
    }
    assert!(
        seen < VERSIONS / 2,
        "the slow sidecar skipped versions (got {seen} of {VERSIONS})"
    );
    quiet(&mut slow).await;
}

#[derive(Clone, PartialEq, prost::Message)]
struct NotAWatchRequest {
    /// Field 1 of WatchRequest is a message; a varint there cannot decode.
    #[prost(uint64, tag = "1")]
    sidecar: u64,
}

#[tokio::test]
async fn malformed_messages_are_refused_and_the_server_keeps_serving() {
    let srv = start(Limits::default()).await;
    srv.state.hub.publish(&pool("web"), roster(1), 100).unwrap();

    let mut grpc = tonic::client::Grpc::new(channel(srv.addr).await);
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<NotAWatchRequest, pb::RosterUpdate>::default();
    let path = http::uri::PathAndQuery::from_static("/rollcall.v1.Roster/Watch");
    let err = grpc
        .server_streaming(
            tonic::Request::new(NotAWatchRequest { sidecar: 7 }),
            path,
            codec,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err}");

    let mut c = client(srv.addr).await;
    let bad_ref = pb::WatchRequest {
        fleet_health: false,
        sidecar: None,
        pools: vec![pb::PoolRef {
            namespace: "Shop!".into(),
            name: "web".into(),
        }],
        accepts_deltas: false,
        held: Vec::new(),
    };
    let err = c.watch(bad_ref).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("Shop!/web"), "{}", err.message());
    let err = c.watch(pb::WatchRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    let mut s = watch(&mut c, &["web"]).await;
    assert_eq!(next(&mut s).await.state, roster(1));
}

#[tokio::test]
async fn oversized_messages_are_refused_and_the_server_keeps_serving() {
    let limits = Limits {
        max_watch_request: 1024,
        max_report_part: 1024,
        max_report: 1024,
        max_pools_per_watch: 4,
        ..Limits::default()
    };
    let srv = start(limits).await;
    srv.state.hub.publish(&pool("web"), roster(1), 100).unwrap();
    let mut c = client(srv.addr).await;

    let huge = pb::WatchRequest {
        fleet_health: false,
        sidecar: None,
        pools: vec![pb::PoolRef {
            namespace: "shop".into(),
            name: "x".repeat(2000),
        }],
        accepts_deltas: false,
        held: Vec::new(),
    };
    let err = c.watch(huge).await.unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err}");

    let many: Vec<&str> = vec!["a", "b", "c", "d", "e"];
    let req = WatchRequest {
        fleet_health: false,
        sidecar: sidecar(),
        pools: many.iter().map(|p| pool(p)).collect(),
        accepts_deltas: false,
        held: Vec::new(),
    };
    let err = c.watch(pb::WatchRequest::from(&req)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    let big_report = pb::HealthReport {
        sidecar: Some((&sidecar()).into()),
        pools: vec![pb::PoolHealth {
            pool: Some((&pool("web")).into()),
            endpoints: (0..100)
                .map(|i| pb::EndpointHealth {
                    ip: format!("10.0.0.{i}"),
                    port: 80,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
    };
    let err = c
        .report(tokio_stream::iter(vec![big_report]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err}");

    let mut s = watch(&mut c, &["web"]).await;
    assert_eq!(next(&mut s).await.state, roster(1));
}

#[tokio::test]
async fn a_pod_has_one_watch_a_newer_one_ends_the_older() {
    let srv = start(Limits::default()).await;
    srv.state.hub.publish(&pool("web"), roster(3), 1).unwrap();
    let mut c = client(srv.addr).await;
    let mut first = common::watch_as(&mut c, "front-7", &["web"]).await;
    next(&mut first).await;
    let mut second = common::watch_as(&mut c, "front-7", &["web"]).await;
    next(&mut second).await;
    // The older stream ends with a reason, so a half-open connection is never counted twice.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), first.message())
        .await
        .expect("the older stream ends");
    let status = ended.expect_err("it ends with a status");
    assert_eq!(status.code(), tonic::Code::Aborted);
    assert!(status.message().contains("newer stream"), "{status}");
    assert_eq!(srv.state.metrics.connected_sidecars.get(), 1);
}
