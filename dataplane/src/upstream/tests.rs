//! Connections to one endpoint against real servers on 127.0.0.1: HTTP/1 reuse, expiry and
//! draining; HTTP/2 stream limits, retirement and PING keep-alive.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioExecutor;
use rollcall_testkit::{Behavior, Stats, TestBackend};
use tokio::net::TcpListener;

use super::*;

const PATIENCE: Duration = Duration::from_secs(30);

/// Wait for the backend to see `done`; a hang fails the test instead of stalling it.
async fn wait(backend: &TestBackend, done: impl Fn(&Stats) -> bool) {
    tokio::time::timeout(PATIENCE, backend.wait_until(done))
        .await
        .expect("the backend never saw it");
}

fn empty() -> ProxyBody {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

async fn one_request(upstream: &Upstream) -> Release {
    let conn = upstream.acquire(Duration::from_secs(1)).await.unwrap();
    let request = http::Request::builder()
        .uri(format!("http://{}/", upstream.addr()))
        .body(empty())
        .unwrap();
    let Ok((response, release)) = send(conn, request).await else {
        panic!("the request failed");
    };
    response.into_body().collect().await.unwrap();
    release
}

#[tokio::test]
async fn idle_connections_are_reused_then_closed_when_they_expire() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let idle = IdleConnections::new(DEFAULT_MAX_IDLE_PER_POOL);
    let upstream = Upstream::in_pool(backend.addr(), false, &idle);
    let release = one_request(&upstream).await;
    upstream.release(release);
    let again = one_request(&upstream).await;
    assert_eq!(
        backend.stats().connections,
        1,
        "the idle connection was reused"
    );
    upstream.release(again);

    idle.expire(IDLE_TIMEOUT, Instant::now());
    assert_eq!(upstream.idle.len(), 1, "not idle long enough to expire");
    idle.expire(IDLE_TIMEOUT, Instant::now() + IDLE_TIMEOUT);
    wait(&backend, |s| s.open_connections == 0).await;
    assert!(idle.is_empty());
}

#[tokio::test]
async fn past_the_pool_budget_the_connection_idle_longest_is_closed_whichever_endpoint_it_is_to() {
    let first = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let second = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let evictions = prometheus::IntCounter::new("evictions", "test").unwrap();
    let idle = IdleConnections::counted(2, Some(evictions.clone()), KeepAlive::default());
    let to_first = Upstream::in_pool(first.addr(), false, &idle);
    let to_second = Upstream::in_pool(second.addr(), false, &idle);
    // Two connections to the first endpoint, held at once, then idle: the budget is full.
    let a = one_request(&to_first).await;
    let b = one_request(&to_first).await;
    to_first.release(a);
    to_first.release(b);
    assert_eq!(idle.len(), 2);
    // A third, to the other endpoint, goes idle: the first endpoint's older one is closed.
    let c = one_request(&to_second).await;
    to_second.release(c);
    assert_eq!(idle.len(), 2);
    assert_eq!(evictions.get(), 1);
    wait(&first, |s| s.open_connections == 1).await;
    assert_eq!(to_first.idle.len(), 1);
    assert_eq!(to_second.idle.len(), 1);
    // The survivor is the first endpoint's newer connection, and it is still used.
    let again = one_request(&to_first).await;
    assert_eq!(first.stats().connections, 2, "no new connection was needed");
    to_first.release(again);
    assert_eq!(second.stats().open_connections, 1);
}

#[tokio::test]
async fn an_endpoint_that_is_gone_leaves_nothing_in_its_pools_budget() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let idle = IdleConnections::new(DEFAULT_MAX_IDLE_PER_POOL);
    let upstream = Upstream::in_pool(backend.addr(), false, &idle);
    let release = one_request(&upstream).await;
    upstream.release(release);
    assert_eq!(idle.len(), 1);
    drop(upstream);
    assert!(idle.is_empty());
    wait(&backend, |s| s.open_connections == 0).await;
}

#[tokio::test]
async fn draining_closes_idle_connections_at_once_and_refuses_returns() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let upstream = Upstream::new(backend.addr(), false);
    let idle = one_request(&upstream).await;
    let busy = one_request(&upstream).await;
    upstream.release(idle);
    wait(&backend, |s| s.open_connections == 2).await;
    upstream.drain();
    wait(&backend, |s| s.open_connections == 1).await;
    upstream.release(busy);
    wait(&backend, |s| s.open_connections == 0).await;
    assert_eq!(upstream.open_connections(), 0);
}

/// An h2c server allowing one stream per connection.
async fn one_stream_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|_req| async {
                    Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .max_concurrent_streams(1)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_full_http2_connection_makes_room_on_a_new_one() {
    let addr = one_stream_server().await;
    let upstream = Upstream::new(addr, true);
    // A first exchange, so the peer's SETTINGS (one stream) have been read.
    let release = one_request(&upstream).await;
    upstream.release(release);
    let held = upstream.acquire(Duration::from_secs(1)).await.unwrap();
    assert_eq!(
        upstream.h2.max_streams(),
        [1],
        "the peer's SETTINGS were read"
    );
    assert!(held.reused(), "the connection had room for one stream");
    let second = upstream.acquire(Duration::from_secs(1)).await.unwrap();
    assert!(!second.reused(), "a full connection is not queued behind");
    assert_eq!(upstream.h2.len(), 2);
    drop(held);
    let third = upstream.acquire(Duration::from_secs(1)).await.unwrap();
    assert!(third.reused(), "a freed stream is used again");
}

#[tokio::test]
async fn retired_http2_connections_are_not_handed_out_again() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let upstream = Upstream::new(backend.addr(), true);
    let release = one_request(&upstream).await;
    upstream.release(release);
    upstream.retire();
    let fresh = upstream.acquire(Duration::from_secs(1)).await.unwrap();
    assert!(!fresh.reused());
    drop(fresh);
    wait(&backend, |s| s.connections == 2).await;
}

#[tokio::test]
async fn an_http2_connection_whose_peer_stops_answering_pings_is_closed() {
    // A peer that accepts and then never reads or writes: PINGs go unanswered.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let keepalive = KeepAlive {
        interval: Duration::from_millis(100),
        timeout: Duration::from_millis(100),
    };
    let idle = IdleConnections::counted(DEFAULT_MAX_IDLE_PER_POOL, None, keepalive);
    let upstream = Upstream::in_pool(addr, true, &idle);
    let conn = upstream.acquire(Duration::from_secs(1)).await.unwrap();
    drop(conn);
    assert_eq!(upstream.open_connections(), 1);
    tokio::time::timeout(PATIENCE, async {
        while upstream.open_connections() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the silent connection was closed by keep-alive");
    holder.abort();
}

#[tokio::test]
async fn a_new_endpoint_in_a_freed_slot_is_judged_by_its_own_connections_age() {
    let gone = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let older = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let newer = TestBackend::spawn(Behavior::ok()).await.unwrap();
    let idle = IdleConnections::new(2);
    let to_gone = Upstream::in_pool(gone.addr(), false, &idle);
    let release = one_request(&to_gone).await;
    to_gone.release(release);
    drop(to_gone);
    // Takes the slot the gone endpoint had; its connection goes idle first of the two left.
    let to_older = Upstream::in_pool(older.addr(), false, &idle);
    let to_newer = Upstream::in_pool(newer.addr(), false, &idle);
    let release = one_request(&to_older).await;
    to_older.release(release);
    let a = one_request(&to_newer).await;
    let b = one_request(&to_newer).await;
    to_newer.release(a);
    to_newer.release(b);
    assert_eq!(idle.len(), 2);
    wait(&older, |s| s.open_connections == 0).await;
    assert_eq!(newer.stats().open_connections, 2);
    assert_eq!(to_newer.idle.len(), 2);
}

#[tokio::test]
async fn closing_reaches_connections_made_before_it_and_refuses_new_ones() {
    let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
    // Closed before it ever had a connection (its token not made yet): refused, and said to
    // be our doing, not the endpoint's.
    let never_used = Upstream::new(backend.addr(), false);
    assert!(!never_used.closed_locally());
    never_used.close();
    assert!(never_used.closed_locally());
    assert!(matches!(
        never_used.acquire(Duration::from_secs(1)).await,
        Err(ConnectError::Closed { .. })
    ));

    // Closed with a connection open: the connection ends, whatever the order of events.
    let upstream = Upstream::new(backend.addr(), false);
    let release = one_request(&upstream).await;
    upstream.release(release);
    assert_eq!(upstream.open_connections(), 1);
    upstream.close();
    wait(&backend, |s| s.open_connections == 0).await;
    assert_eq!(upstream.open_connections(), 0);
    assert!(matches!(
        upstream.acquire(Duration::from_secs(1)).await,
        Err(ConnectError::Closed { .. })
    ));
}
