//! The test harness of the gRPC tests: a real roster server on 127.0.0.1 and real clients.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use rollcall_api::policy::PoolPolicy;
use rollcall_api::proto::v1 as pb;
use rollcall_api::proto::v1::roster_client::RosterClient;
use rollcall_api::roster::{
    Endpoint, PoolRef, PoolState, Roster, RosterUpdate, SidecarId, WatchRequest,
};
use rollcall_controller::metrics::Metrics;
use rollcall_controller::server::{self, Limits, State};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::timeout;
use tonic::Streaming;
use tonic::transport::Channel;

pub struct Server {
    pub addr: SocketAddr,
    pub state: State,
    _stop: oneshot::Sender<()>,
}

pub async fn start(limits: Limits) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = State::open(Metrics::new().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server::serve(
        listener,
        state.clone(),
        limits,
        None,
        async {
            stopped.await.ok();
        },
    ));
    state.hub.mark_synced(1, []);
    Server {
        addr,
        state,
        _stop: stop,
    }
}

/// A TCP relay to `to`: clients connect to the returned address instead. Aborting the returned
/// task cuts every connection it carries at once, as a killed pod or a severed network would.
pub async fn relay(to: SocketAddr) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        // Owned here, so aborting this task drops (aborts) every connection's copy.
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await else {
                continue;
            };
            connections.spawn(async move {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (addr, task)
}

pub async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

pub async fn client(addr: SocketAddr) -> RosterClient<Channel> {
    RosterClient::new(channel(addr).await)
}

pub fn pool(name: &str) -> PoolRef {
    PoolRef::new("shop", name)
}

pub fn roster(n: usize) -> PoolState {
    PoolState::Roster(Roster {
        endpoints: (0..n)
            .map(|i| Endpoint {
                addr: format!("10.{}.{}.{}:8080", i / 65536, i / 256 % 256, i % 256)
                    .parse()
                    .unwrap(),
                pod: Some(format!("web-{i}")),
                zone: Some("zone-a".into()),
                ready: true,
                serving: true,
                terminating: false,
                weight: 1,
            })
            .collect(),
        policy: PoolPolicy::default(),
        service: "shop/web:http".into(),
    })
}

pub fn sidecar() -> SidecarId {
    SidecarId {
        namespace: "shop".into(),
        pod: "front-1".into(),
        instance: "i1".into(),
    }
}

/// A Watch from a sidecar of its own (each call is another pod).
pub async fn watch(c: &mut RosterClient<Channel>, pools: &[&str]) -> Streaming<pb::RosterUpdate> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    watch_as(c, &format!("front-{n}"), pools).await
}

/// A Watch from pod `pod`.
pub async fn watch_as(
    c: &mut RosterClient<Channel>,
    pod: &str,
    pools: &[&str],
) -> Streaming<pb::RosterUpdate> {
    let mut sidecar = sidecar();
    sidecar.pod = pod.to_string();
    let req = WatchRequest {
        fleet_health: false,
        sidecar,
        pools: pools.iter().map(|p| pool(p)).collect(),
        accepts_deltas: false,
        held: Vec::new(),
    };
    c.watch(pb::WatchRequest::from(&req))
        .await
        .unwrap()
        .into_inner()
}

pub async fn next(s: &mut Streaming<pb::RosterUpdate>) -> RosterUpdate {
    let msg = timeout(Duration::from_secs(5), s.message())
        .await
        .expect("no update within 5s")
        .unwrap()
        .expect("stream ended");
    RosterUpdate::try_from(msg).unwrap()
}

pub async fn quiet(s: &mut Streaming<pb::RosterUpdate>) {
    assert!(
        timeout(Duration::from_millis(200), s.message())
            .await
            .is_err(),
        "unexpected update"
    );
}
