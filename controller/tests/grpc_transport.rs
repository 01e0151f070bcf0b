//! The roster port's HTTP/2 transport over real TCP on 127.0.0.1: a roster far larger than a
//! stream's send buffer still arrives whole at every watcher, and shutdown ends the open
//! streams, closes the port and returns once the connections are gone.

mod common;

use std::time::Duration;

use common::*;
use rollcall_api::roster::RosterUpdate;
use rollcall_controller::metrics::Metrics;
use rollcall_controller::server::{self, Limits, State, auth};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::timeout;
use tonic::Code;

#[tokio::test]
async fn a_roster_larger_than_the_send_buffer_reaches_every_watcher_whole() {
    let srv = start(Limits::default()).await;
    // 20,000 endpoints in one complete message: about 1 MB against a 32 KiB send buffer.
    let version = srv
        .state
        .hub
        .publish(&pool("web"), roster(20_000), 100)
        .unwrap();
    let mut watchers = Vec::new();
    for _ in 0..3 {
        let mut c = client(srv.addr).await;
        watchers.push(watch(&mut c, &["web"]).await);
    }
    for s in &mut watchers {
        let RosterUpdate {
            version: got,
            state,
            ..
        } = timeout(Duration::from_secs(30), next(s)).await.unwrap();
        assert_eq!(got, version);
        assert_eq!(state, roster(20_000));
    }
}

#[tokio::test]
async fn shutdown_ends_streams_closes_the_port_and_returns_when_connections_are_gone() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closing_tx, closing) = watch::channel(false);
    let state = State::new(
        Metrics::new().unwrap(),
        closing.clone(),
        auth::Mode::Insecure,
        Limits::default().grant_recheck,
    );
    state.hub.mark_synced(1, []);
    state.hub.publish(&pool("web"), roster(3), 100).unwrap();
    let mut stop = closing.clone();
    let served = tokio::spawn(server::serve(
        listener,
        state,
        Limits::default(),
        None,
        async move {
            let _ = stop.wait_for(|c| *c).await;
        },
    ));
    let mut c = client(addr).await;
    let mut s = watch(&mut c, &["web"]).await;
    assert_eq!(next(&mut s).await.state, roster(3));

    closing_tx.send(true).unwrap();
    let ended = timeout(Duration::from_secs(10), s.message()).await.unwrap();
    assert!(
        matches!(&ended, Err(status) if status.code() == Code::Unavailable),
        "the open watch ends with UNAVAILABLE, got {ended:?}"
    );
    timeout(Duration::from_secs(10), served)
        .await
        .expect("serve returns once its connections are gone")
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "nobody accepts on the port after shutdown"
    );
}
