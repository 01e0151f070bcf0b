//! Connections to one endpoint, owned by the sidecar rather than a generic client pool, because
//! three things need that control: the connect step is separate from the send step (a request
//! that never reached a connection can go anywhere, with its body intact); a pooled connection
//! found dead before the request was written hands the request back (hyper's `TrySendError`);
//! and draining closes this endpoint's idle connections at once and, at the drain deadline, every
//! other one. HTTP/1.1 keeps a stack of idle keep-alive connections (a connection returns when its
//! response body ends); HTTP/2 shares one multiplexed connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Any error a body can carry.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The request and response body type of the proxy.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// Idle HTTP/1 connections kept per endpoint; more are closed when they come back.
const MAX_IDLE_PER_ENDPOINT: usize = 256;
/// An idle connection unused this long is closed (see `expire_idle`).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a connection could not be had. Every variant means the request never left the sidecar.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connect to {addr} failed: {source}")]
    Io {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("connect to {addr} timed out after {timeout:?}")]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error("handshake with {addr} failed: {source}")]
    Handshake {
        addr: SocketAddr,
        #[source]
        source: hyper::Error,
    },
    #[error("endpoint {addr} is closed")]
    Closed { addr: SocketAddr },
}

/// A connection ready for one request.
pub enum Conn {
    Http1 {
        tx: http1::SendRequest<ProxyBody>,
        reused: bool,
    },
    Http2 {
        tx: http2::SendRequest<ProxyBody>,
        reused: bool,
    },
}

impl Conn {
    pub fn reused(&self) -> bool {
        match self {
            Conn::Http1 { reused, .. } | Conn::Http2 { reused, .. } => *reused,
        }
    }
}

/// The connections of one endpoint.
pub struct Upstream {
    addr: SocketAddr,
    http2: AtomicBool,
    /// Idle HTTP/1 connections, most recently used last, with when each went idle.
    idle: Mutex<Vec<(http1::SendRequest<ProxyBody>, Instant)>>,
    shared_h2: Mutex<Option<http2::SendRequest<ProxyBody>>>,
    draining: AtomicBool,
    /// Cancelling ends every connection task of this endpoint.
    close_all: CancellationToken,
    open: Arc<AtomicUsize>,
}

impl Upstream {
    pub fn new(addr: SocketAddr, http2: bool) -> Self {
        Self {
            addr,
            http2: AtomicBool::new(http2),
            idle: Mutex::new(Vec::new()),
            shared_h2: Mutex::new(None),
            draining: AtomicBool::new(false),
            close_all: CancellationToken::new(),
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections currently open to this endpoint (idle and busy).
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// A connection: a live idle one if there is one, else a new one.
    pub async fn acquire(&self, connect_timeout: Duration) -> Result<Conn, ConnectError> {
        if self.close_all.is_cancelled() {
            return Err(ConnectError::Closed { addr: self.addr });
        }
        let use_h2 = self.http2.load(Ordering::Acquire);
        if use_h2 {
            let shared = self.shared_h2.lock().clone();
            if let Some(tx) = shared.filter(|tx| !tx.is_closed()) {
                return Ok(Conn::Http2 { tx, reused: true });
            }
        } else {
            // A connection comes back the moment its response body ends, a hair before its
            // task marks it ready for the next request: wait for that instead of discarding it.
            // A dead one fails `ready` at once and the next is tried.
            loop {
                let Some((mut tx, _)) = self.idle.lock().pop() else {
                    break;
                };
                if tx.is_closed() {
                    continue;
                }
                if tx.is_ready() {
                    return Ok(Conn::Http1 { tx, reused: true });
                }
                if let Ok(Ok(())) = tokio::time::timeout(connect_timeout, tx.ready()).await {
                    return Ok(Conn::Http1 { tx, reused: true });
                }
            }
        }
        let stream =
            match tokio::time::timeout(connect_timeout, TcpStream::connect(self.addr)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(source)) => {
                    return Err(ConnectError::Io {
                        addr: self.addr,
                        source,
                    });
                }
                Err(_) => {
                    return Err(ConnectError::Timeout {
                        addr: self.addr,
                        timeout: connect_timeout,
                    });
                }
            };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        let handshake_error = |source| ConnectError::Handshake {
            addr: self.addr,
            source,
        };
        if use_h2 {
            let (tx, conn) = http2::Builder::new(TokioExecutor::new())
                .timer(hyper_util::rt::TokioTimer::new())
                .handshake(io)
                .await
                .map_err(handshake_error)?;
            self.drive(conn);
            if !self.draining.load(Ordering::Acquire) {
                *self.shared_h2.lock() = Some(tx.clone());
            }
            Ok(Conn::Http2 { tx, reused: false })
        } else {
            let (tx, conn) = http1::Builder::new()
                .handshake(io)
                .await
                .map_err(handshake_error)?;
            self.drive(conn);
            Ok(Conn::Http1 { tx, reused: false })
        }
    }

    /// Run a connection's I/O until it ends or the endpoint closes, counted as open meanwhile.
    fn drive<F: Future + Send + 'static>(&self, conn: F) {
        let close_all = self.close_all.clone();
        let open = OpenGuard::new(self.open.clone());
        tokio::spawn(async move {
            let _open = open;
            tokio::select! {
                _ = conn => {}
                _ = close_all.cancelled() => {}
            }
        });
    }

    /// Give back an HTTP/1 connection whose response has been read to the end.
    pub fn release(&self, tx: http1::SendRequest<ProxyBody>) {
        if self.draining.load(Ordering::Acquire) || tx.is_closed() {
            return;
        }
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE_PER_ENDPOINT {
            idle.push((tx, Instant::now()));
        }
    }

    /// Close connections idle for longer than `max_idle` (the oldest sit at the bottom of the
    /// stack, where checkout never reaches them after a burst) and ones the endpoint closed.
    pub fn expire_idle(&self, max_idle: Duration, now: Instant) {
        self.idle.lock().retain(|(tx, since)| {
            !tx.is_closed() && now.saturating_duration_since(*since) < max_idle
        });
    }

    /// Stop reusing connections: idle ones close now, busy ones close when their response ends.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.idle.lock().clear();
        self.shared_h2.lock().take();
    }

    /// Switch protocol (a config change): connections of the old one are not reused.
    pub fn set_http2(&self, http2: bool) {
        if self.http2.swap(http2, Ordering::AcqRel) != http2 {
            self.idle.lock().clear();
            self.shared_h2.lock().take();
        }
    }

    /// Undo `drain` when the endpoint returns to the roster.
    pub fn undrain(&self) {
        self.draining.store(false, Ordering::Release);
    }

    /// Close every connection, busy or not (drain deadline, shutdown).
    pub fn close(&self) {
        self.drain();
        self.close_all.cancel();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.close_all.cancel();
    }
}

/// Counts a connection as open for as long as its task lives.
struct OpenGuard(Arc<AtomicUsize>);

impl OpenGuard {
    fn new(counter: Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollcall_testkit::{Behavior, Stats, TestBackend};

    /// Wait for the backend to see `done`; a hang fails the test instead of stalling it.
    async fn wait(backend: &TestBackend, done: impl Fn(&Stats) -> bool) {
        tokio::time::timeout(Duration::from_secs(30), backend.wait_until(done))
            .await
            .expect("the backend never saw it");
    }

    async fn one_request(upstream: &Upstream) -> http1::SendRequest<ProxyBody> {
        let Conn::Http1 { mut tx, .. } = upstream.acquire(Duration::from_secs(1)).await.unwrap()
        else {
            panic!("expected HTTP/1");
        };
        let response = tx
            .send_request(http::Request::new(http_body_util::BodyExt::boxed_unsync(
                http_body_util::BodyExt::map_err(http_body_util::Empty::<Bytes>::new(), |never| {
                    match never {}
                }),
            )))
            .await
            .unwrap();
        http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap();
        tx
    }

    #[tokio::test]
    async fn idle_connections_are_reused_then_closed_when_they_expire() {
        let backend = TestBackend::spawn(Behavior::ok()).await.unwrap();
        let upstream = Upstream::new(backend.addr(), false);
        let tx = one_request(&upstream).await;
        upstream.release(tx);
        let again = one_request(&upstream).await;
        assert_eq!(
            backend.stats().connections,
            1,
            "the idle connection was reused"
        );
        upstream.release(again);

        upstream.expire_idle(IDLE_TIMEOUT, Instant::now());
        assert_eq!(
            upstream.idle.lock().len(),
            1,
            "not idle long enough to expire"
        );
        upstream.expire_idle(IDLE_TIMEOUT, Instant::now() + IDLE_TIMEOUT);
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
}
