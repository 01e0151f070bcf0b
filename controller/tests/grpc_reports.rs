//! Report over real TCP on 127.0.0.1: reports land in the store attributed to their sidecar,
//! and leave it when the stream ends.

mod common;

use std::time::Duration;

use common::*;
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{EndpointHealth, EndpointState, HealthReport, PoolHealth, SidecarId};
use rollcall_controller::server::Limits;
use rollcall_controller::server::identity::{NAMESPACE_HEADER, POD_HEADER};
use tokio::time::Instant;

fn health(state: EndpointState) -> HealthReport {
    HealthReport {
        sidecar: Some(sidecar()),
        pools: vec![PoolHealth {
            pool: pool("web"),
            roster_version: 7,
            panic: false,
            endpoints: vec![EndpointHealth {
                probe: None,
                addr: "10.0.0.0:8080".parse().unwrap(),
                state,
                reason: "ConsecutiveGatewayErrors".into(),
                since_unix_ms: 1,
                times_ejected: 1,
                last_error: Some("connection refused".into()),
                ejection_suppressed: false,
            }],
            refused: None,
            complete: false,
            continued: false,
            removed: Vec::new(),
        }],
    }
}

#[tokio::test]
async fn reports_are_recorded_per_sidecar_until_the_stream_ends() {
    let srv = start(Limits::default()).await;
    srv.state.hub.publish(&pool("web"), roster(1), 100).unwrap();
    let store = srv.state.reports.clone();
    let mut c = client(srv.addr).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::HealthReport>(4);
    let call = tokio::spawn(async move {
        c.report(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .map(|r| r.into_inner())
    });
    tx.send((&health(EndpointState::Ejected)).into())
        .await
        .unwrap();
    tx.send(pb::HealthReport::default()).await.unwrap(); // heartbeat
    let mut unknown = health(EndpointState::Healthy);
    unknown.pools[0].pool = pool("unknown");
    tx.send((&unknown).into()).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(5);
    let fresh = || Instant::now() - Duration::from_secs(60);
    let reporters = loop {
        let r = store.reporters(&pool("web"), fresh());
        if !r.is_empty() || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(reporters, [sidecar()]);
    let endpoint: std::net::SocketAddr = "10.0.0.0:8080".parse().unwrap();
    let (counts, reasons) = store.with_pool(&pool("web"), fresh(), |t| {
        let e = t.endpoint(&endpoint).expect("the endpoint is reported");
        let reasons: Vec<String> = e.ejecting().map(|e| e.reason.clone()).collect();
        (e.counts, reasons)
    });
    assert_eq!(counts, [0, 0, 0, 0, 1], "one sidecar ejects it");
    assert_eq!(reasons, ["ConsecutiveGatewayErrors"]);
    assert!(store.take_dirty().contains(&pool("web")));

    drop(tx);
    let summary = call.await.unwrap().unwrap();
    assert_eq!((summary.accepted, summary.ignored), (2, 1));
    assert!(store.reporters(&pool("web"), fresh()).is_empty());
    assert_eq!(store.with_pool(&pool("web"), fresh(), |t| t.reporting()), 0);
}

/// hyper drops a stream's handler when the stream is reset or its connection dies; the
/// stream must leave the store all the same, or a dead sidecar's reports would be counted until
/// the freshness limit and held for the life of the controller.
#[tokio::test]
async fn a_report_stream_whose_connection_dies_leaves_the_store() {
    for changes in [false, true] {
        let srv = start(Limits::default()).await;
        srv.state.hub.publish(&pool("web"), roster(1), 100).unwrap();
        let store = srv.state.reports.clone();
        let (via, cut) = relay(srv.addr).await;
        let mut c = client(via).await;
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::HealthReport>(4);
        let reports = tokio_stream::wrappers::ReceiverStream::new(rx);
        let call = tokio::spawn(async move {
            if changes {
                let mut feedback = c.report_changes(reports).await?.into_inner();
                while feedback.message().await?.is_some() {}
            } else {
                c.report(reports).await?;
            }
            Ok::<_, tonic::Status>(())
        });
        tx.send((&health(EndpointState::Ejected)).into())
            .await
            .unwrap();
        let fresh = || Instant::now() - Duration::from_secs(60);
        wait_until("the report is in", || {
            store.reporters(&pool("web"), fresh()) == [sidecar()]
        })
        .await;

        // The stream is still open on the sidecar's side (`tx` lives): only the cut ends it.
        cut.abort();
        wait_until("the stream leaves the store", || {
            store.reporters(&pool("web"), fresh()).is_empty()
                && store.with_pool(&pool("web"), fresh(), |t| t.reporting()) == 0
        })
        .await;
        assert!(call.await.unwrap().is_err(), "changes={changes}");
        drop(tx);
    }
}

/// A sidecar that resets its `ReportChanges` stream while still sending (RST_STREAM, speaking
/// HTTP/2 directly: tonic's client cannot reset a stream it is sending on). hyper drops the
/// stream's response at once, with the ingest inside it; the stream leaves the store even so.
#[tokio::test]
async fn a_report_stream_reset_by_the_sidecar_leaves_the_store() {
    use prost::Message;

    let srv = start(Limits::default()).await;
    srv.state.hub.publish(&pool("web"), roster(1), 100).unwrap();
    let store = srv.state.reports.clone();
    let io = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let (h2, connection) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(connection);
    let mut h2 = h2.ready().await.unwrap();
    let request = http::Request::post(format!(
        "http://{}/rollcall.v1.Roster/ReportChanges",
        srv.addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .unwrap();
    let (response, mut send) = h2.send_request(request, false).unwrap();
    let message = pb::HealthReport::from(&health(EndpointState::Ejected)).encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&message);
    send.send_data(framed.into(), false).unwrap();
    assert_eq!(response.await.unwrap().status(), http::StatusCode::OK);
    let fresh = || Instant::now() - Duration::from_secs(60);
    wait_until("the report is in", || {
        store.reporters(&pool("web"), fresh()) == [sidecar()]
    })
    .await;

    send.send_reset(h2::Reason::CANCEL);
    wait_until("the stream leaves the store", || {
        store.reporters(&pool("web"), fresh()).is_empty()
            && store.with_pool(&pool("web"), fresh(), |t| t.reporting()) == 0
    })
    .await;
}

#[tokio::test]
async fn reports_are_attributed_to_the_identity_in_call_metadata() {
    let srv = start(Limits::default()).await;
    srv.state.hub.publish(&pool("web"), roster(1), 100).unwrap();
    let mut c = client(srv.addr).await;
    // The stream stays open after the report, so the store still holds it.
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::HealthReport>(1);
    tx.send((&health(EndpointState::Healthy)).into())
        .await
        .unwrap();
    let mut req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    req.metadata_mut()
        .insert(POD_HEADER, "front-9".parse().unwrap());
    req.metadata_mut()
        .insert(NAMESPACE_HEADER, "shop".parse().unwrap());
    let call = tokio::spawn(async move { c.report(req).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    let reporters = loop {
        let r = srv
            .state
            .reports
            .reporters(&pool("web"), Instant::now() - Duration::from_secs(60));
        if !r.is_empty() || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // The claim in metadata wins over the one in the message (front-1).
    assert_eq!(
        reporters[0],
        SidecarId {
            namespace: "shop".into(),
            pod: "front-9".into(),
            instance: String::new(),
        }
    );
    drop(tx);
    assert_eq!(call.await.unwrap().unwrap().into_inner().accepted, 1);
}

#[tokio::test]
async fn starting_and_ending_a_watch_asks_for_a_status_update() {
    let srv = start(Limits::default()).await;
    srv.state.hub.publish(&pool("web"), roster(1), 100).unwrap();
    let store = srv.state.reports.clone();
    let mut c = client(srv.addr).await;
    let mut s = watch(&mut c, &["web"]).await;
    next(&mut s).await;
    assert!(store.take_dirty().contains(&pool("web")));
    assert_eq!(srv.state.hub.watchers(&pool("web")), 1);
    drop(s);
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !store.take_dirty().contains(&pool("web")) {
        assert!(
            Instant::now() < deadline,
            "the end of the watch was not noticed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(srv.state.hub.watchers(&pool("web")), 0);
}

/// `roster(n)`'s endpoint `i`, reported in `state`.
fn entry(i: usize, state: EndpointState) -> EndpointHealth {
    EndpointHealth {
        probe: None,
        addr: format!("10.0.{}.{}:8080", i / 256 % 256, i % 256)
            .parse()
            .unwrap(),
        state,
        reason: "ProbeSucceeded".into(),
        since_unix_ms: 1,
        times_ejected: 0,
        last_error: None,
        ejection_suppressed: false,
    }
}

fn pool_health(
    entries: Vec<EndpointHealth>,
    removed: Vec<std::net::SocketAddr>,
    complete: bool,
    continued: bool,
) -> pb::HealthReport {
    (&HealthReport {
        sidecar: None,
        pools: vec![PoolHealth {
            pool: pool("web"),
            roster_version: 7,
            panic: false,
            endpoints: entries,
            refused: None,
            removed,
            complete,
            continued,
        }],
    })
        .into()
}

#[tokio::test]
async fn report_changes_applies_parts_whole_and_changes_onto_them_and_asks_back_when_it_lacks_a_base()
 {
    let srv = start(Limits::default()).await;
    srv.state
        .hub
        .publish(&pool("web"), roster(600), 100)
        .unwrap();
    let store = srv.state.reports.clone();
    let mut c = client(srv.addr).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::HealthReport>(16);
    let mut feedback = c
        .report_changes(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let fresh = || Instant::now() - Duration::from_secs(60);
    let seen = |store: &rollcall_controller::status::ReportStore| {
        store.with_pool(&pool("web"), fresh(), |t| {
            (0..600)
                .map(|i| {
                    t.endpoint(&entry(i, EndpointState::Healthy).addr)
                        .map_or(0, |e| e.seen())
                })
                .sum::<u32>()
        })
    };

    tx.send(pb::HealthReport {
        sidecar: Some((&sidecar()).into()),
        pools: vec![],
    })
    .await
    .unwrap();
    // A complete report in three parts: counted once the last is in.
    let all: Vec<EndpointHealth> = (0..600).map(|i| entry(i, EndpointState::Healthy)).collect();
    tx.send(pool_health(all[..256].to_vec(), vec![], true, true))
        .await
        .unwrap();
    tx.send(pool_health(all[256..512].to_vec(), vec![], false, true))
        .await
        .unwrap();
    tx.send(pool_health(all[512..].to_vec(), vec![], false, false))
        .await
        .unwrap();
    wait_until("the complete report", || seen(&store) == 600).await;

    // Changes: one ejected, one gone.
    let gone = entry(599, EndpointState::Healthy).addr;
    tx.send(pool_health(
        vec![entry(3, EndpointState::Ejected)],
        vec![gone],
        false,
        false,
    ))
    .await
    .unwrap();
    wait_until("the changes", || seen(&store) == 599).await;
    let counts = store.with_pool(&pool("web"), fresh(), |t| {
        t.endpoint(&entry(3, EndpointState::Ejected).addr)
            .map(|e| e.counts)
    });
    assert_eq!(counts, Some([0, 0, 0, 0, 1]));

    // A report on a pool with no roster is ignored and its history for that pool dropped;
    // the next changes find no base, and the controller asks for a complete report.
    let mut elsewhere = pool_health(vec![], vec![], false, false);
    elsewhere.pools[0].pool = Some((&pool("unserved")).into());
    tx.send(elsewhere).await.unwrap();
    let ignored = || {
        srv.state
            .metrics
            .reports
            .with_label_values(&["ignored"])
            .get()
    };
    wait_until("the report to be ignored", || ignored() == 1).await;
    let mut unserved = pool_health(vec![], vec![], false, false);
    unserved.pools[0].pool = Some((&pool("unserved")).into());
    srv.state
        .hub
        .publish(&pool("unserved"), roster(3), 100)
        .unwrap();
    tx.send(unserved).await.unwrap();
    let asked = tokio::time::timeout(Duration::from_secs(5), feedback.message())
        .await
        .expect("feedback within 5 s")
        .unwrap()
        .expect("a message");
    assert_eq!(asked.resend, vec![pb::PoolRef::from(&pool("unserved"))]);
    assert!(asked.summary.is_none());
    let reporting = |store: &rollcall_controller::status::ReportStore| {
        store.with_pool(&pool("unserved"), fresh(), |t| t.reporting())
    };
    assert_eq!(
        reporting(&store),
        0,
        "changes onto nothing do not count as a report"
    );
    let mut complete = pool_health(vec![], vec![], true, false);
    complete.pools[0].pool = Some((&pool("unserved")).into());
    tx.send(complete).await.unwrap();
    wait_until("the complete report asked for", || reporting(&store) == 1).await;

    drop(tx);
    let last = tokio::time::timeout(Duration::from_secs(5), feedback.message())
        .await
        .unwrap()
        .unwrap()
        .expect("the summary");
    let summary = last.summary.expect("the last message carries the summary");
    assert_eq!((summary.accepted, summary.ignored), (7, 1));
}

async fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "waited for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
