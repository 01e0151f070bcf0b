//! How long a checkout may wait, on paused time: connections whose task will never ask for a
//! request (alive, busy forever) and one that turns ready a moment after it is popped, over
//! in-memory pipes so no real timer or socket is involved.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;

/// What keeps a busy connection busy: its peer's end of the pipe and the pending response.
type Held = (
    DuplexStream,
    Pin<Box<dyn Future<Output = hyper::Result<http::Response<hyper::body::Incoming>>> + Send>>,
);

fn get() -> http::Request<ProxyBody> {
    let body = Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    http::Request::builder()
        .uri("/")
        .header(http::header::HOST, "backend")
        .body(body)
        .expect("a valid request")
}

/// A connection with one request on it that is never answered: alive but never ready, as a
/// pooled connection still writing an upload that will not move is.
async fn busy_sender(held: &mut Vec<Held>) -> Sender {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (mut tx, conn) = http1::handshake(TokioIo::new(ours))
        .await
        .expect("handshake over a pipe");
    tokio::spawn(conn);
    let pending = tx.send_request(get());
    held.push((theirs, Box::pin(pending)));
    tx
}

/// A connection whose request is answered `after` from now: ready again once the answer is in.
async fn answered_later(after: Duration) -> Sender {
    let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
    let (mut tx, conn) = http1::handshake(TokioIo::new(ours))
        .await
        .expect("handshake over a pipe");
    tokio::spawn(conn);
    let pending = Box::pin(tx.send_request(get()));
    tokio::spawn(async move {
        let mut request = [0u8; 1024];
        let _ = theirs.read(&mut request).await;
        tokio::time::sleep(after).await;
        let _ = theirs
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await;
        let _ = pending.await;
        // The peer stays for the next request.
        std::future::pending::<()>().await;
    });
    tx
}

#[tokio::test(start_paused = true)]
async fn a_checkout_waits_once_however_many_pooled_connections_cannot_be_used() {
    let idle = IdleConnections::new(DEFAULT_MAX_IDLE_PER_POOL);
    let key = idle.key();
    let mut held = Vec::new();
    for _ in 0..8 {
        let tx = busy_sender(&mut held).await;
        key.put(IdleConn::Hyper(tx), Instant::now());
    }
    // Let every connection task take its request, so none is ready or closed.
    tokio::task::yield_now().await;
    assert_eq!(key.len(), 8);

    let started = Instant::now();
    let got = key.checkout(READY_WAIT).await;
    assert!(got.is_none(), "no pooled connection could be used");
    assert_eq!(
        started.elapsed(),
        READY_WAIT,
        "one wait for the whole checkout, not one per connection"
    );
    assert_eq!(key.len(), 0, "every unusable connection was let go");
}

#[tokio::test(start_paused = true)]
async fn a_usable_connection_under_unusable_ones_is_found_within_the_one_wait() {
    let idle = IdleConnections::new(DEFAULT_MAX_IDLE_PER_POOL);
    let key = idle.key();
    let mut held = Vec::new();
    // At the bottom of the stack, one answered long ago and ready now.
    let mut ready = answered_later(Duration::ZERO).await;
    ready
        .ready()
        .await
        .expect("the answered connection turns ready");
    key.put(IdleConn::Hyper(ready), Instant::now());
    for _ in 0..4 {
        let tx = busy_sender(&mut held).await;
        key.put(IdleConn::Hyper(tx), Instant::now());
    }
    tokio::task::yield_now().await;

    let started = Instant::now();
    let got = key.checkout(READY_WAIT).await;
    assert!(got.is_some_and(|idle| matches!(idle, IdleConn::Hyper(tx) if tx.is_ready())));
    assert!(
        started.elapsed() <= READY_WAIT,
        "waited {:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_connection_that_turns_ready_within_the_wait_is_reused() {
    let idle = IdleConnections::new(DEFAULT_MAX_IDLE_PER_POOL);
    let key = idle.key();
    // Its response is on its way: ready a few milliseconds after it is pooled.
    let tx = answered_later(Duration::from_millis(3)).await;
    key.put(IdleConn::Hyper(tx), Instant::now());

    let started = Instant::now();
    let got = key.checkout(READY_WAIT).await;
    assert!(got.is_some(), "the connection was worth the wait");
    assert!(
        started.elapsed() < READY_WAIT,
        "waited {:?}",
        started.elapsed()
    );
}
