//! Connections to one endpoint, owned by the sidecar rather than a generic client pool, because
//! the request path needs that control: the connect step is separate from the send step (a
//! request that never reached a connection can go anywhere, with its body intact); a pooled
//! connection found dead before the request was written hands the request back (`send`); draining
//! closes this endpoint's idle connections at once and, at the drain deadline, every other one;
//! an ejection retires the connections in use so a re-admitted endpoint starts on fresh ones.
//!
//! HTTP/1.1 keeps idle keep-alive connections in a set shared by the pool, under a pool-wide
//! budget (`http1_idle`); HTTP/2 keeps a set of
//! multiplexed connections, each used up to the stream limit its peer announced, with PING
//! keep-alive so a connection that went dark is closed instead of swallowing requests (`http2`).
//! This module sits below both `pool` and `proxy` and knows neither.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod direct;
mod http1_idle;
mod http2_set;
mod send;

use direct::DirectConn;
pub use direct::{PlainHead, RawAnswer, plain_head, send_plain};
pub use http1_idle::{DEFAULT_MAX_IDLE_PER_POOL, IdleConnections};
use http1_idle::{IdleConn, IdleKey};
use http2_set::ConnectionSet;
pub use http2_set::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, StreamSlot};
pub use send::{EndpointBody, Release, SendError, send};

use crate::poll_clock;

/// Any error a body can carry.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The request and response body type of the proxy.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// An idle connection unused this long is closed (see `expire_idle`, `IdleConnections::expire`).
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
        tx: hyper::client::conn::http2::SendRequest<ProxyBody>,
        /// Holds one of the connection's streams until the response ends.
        slot: StreamSlot,
        reused: bool,
    },
    /// HTTP/1.1 on a connection of the sidecar's own (`direct`), driven by the request.
    Direct { conn: DirectConn, reused: bool },
}

/// HTTP/2 keep-alive: how often an idle connection is pinged, and how long a PING may go
/// unanswered before the connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepAlive {
    pub interval: Duration,
    pub timeout: Duration,
}

/// The connections of one endpoint.
pub struct Upstream {
    addr: SocketAddr,
    http2: AtomicBool,
    /// HTTP/1.1 goes on the sidecar's own connections (`direct`), not hyper's client.
    direct_http1: bool,
    /// This endpoint's idle HTTP/1.1 connections, in its pool's set.
    idle: IdleKey,
    h2: ConnectionSet,
    draining: AtomicBool,
    /// What only an endpoint with connections needs, made with the first (or by a close):
    /// most endpoints of a wide pool never get a connection from this sidecar, and the two
    /// parts are allocations of 112 and 32 bytes.
    live: OnceLock<Box<Live>>,
}

/// An endpoint's connection bookkeeping, made with its first connection.
#[derive(Debug, Default)]
struct Live {
    /// Cancelling ends every connection task of this endpoint.
    close_all: CancellationToken,
    /// Connections open now.
    open: Arc<AtomicUsize>,
}

// === impl Conn ===

impl Conn {
    pub fn reused(&self) -> bool {
        match self {
            Conn::Http1 { reused, .. }
            | Conn::Http2 { reused, .. }
            | Conn::Direct { reused, .. } => *reused,
        }
    }
}

impl Default for KeepAlive {
    fn default() -> Self {
        Self {
            interval: KEEPALIVE_INTERVAL,
            timeout: KEEPALIVE_TIMEOUT,
        }
    }
}

// === impl Upstream ===

impl Upstream {
    /// An endpoint with an idle set of its own (the default budget) and default keep-alive.
    pub fn new(addr: SocketAddr, http2: bool) -> Self {
        let idle = IdleConnections::new(DEFAULT_MAX_IDLE_PER_POOL);
        Self::in_pool(addr, http2, &idle)
    }

    /// An endpoint of a pool whose idle HTTP/1.1 connections are kept in `idle` (with the pool's
    /// HTTP/2 keep-alive).
    pub fn in_pool(addr: SocketAddr, http2: bool, idle: &Arc<IdleConnections>) -> Self {
        Self {
            addr,
            http2: AtomicBool::new(http2),
            direct_http1: false,
            idle: idle.key(),
            h2: ConnectionSet::default(),
            draining: AtomicBool::new(false),
            live: OnceLock::new(),
        }
    }

    /// Send HTTP/1.1 on connections of the sidecar's own (`--http1-engine fast`).
    pub fn with_direct_http1(mut self, direct: bool) -> Self {
        self.direct_http1 = direct;
        self
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address, borrowed (the pool's endpoint set looks endpoints up by it).
    pub fn addr_ref(&self) -> &SocketAddr {
        &self.addr
    }

    /// Connections currently open to this endpoint (idle and busy).
    pub fn open_connections(&self) -> usize {
        self.live
            .get()
            .map_or(0, |live| live.open.load(Ordering::Relaxed))
    }

    /// Whether the sidecar closed this endpoint's connections itself (drain deadline, shutdown):
    /// a request that failed then failed because of us, not the endpoint.
    pub fn closed_locally(&self) -> bool {
        self.live
            .get()
            .is_some_and(|live| live.close_all.is_cancelled())
    }

    fn live(&self) -> &Live {
        self.live.get_or_init(Box::default)
    }

    /// The counter of this endpoint's open connections, made with the first.
    fn open_counter(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.live().open)
    }

    /// The token every connection task of this endpoint obeys.
    fn close_token(&self) -> &CancellationToken {
        &self.live().close_all
    }

    /// A connection: a live pooled one if there is one with room, else a new one. Opening one
    /// is boxed: it is rare next to reuse, and its handshake state (over 1 KB for HTTP/2) would
    /// otherwise be part of every request's future, which is moved and copied whole.
    pub async fn acquire(&self, connect_timeout: Duration) -> Result<Conn, ConnectError> {
        if self.closed_locally() {
            return Err(ConnectError::Closed { addr: self.addr });
        }
        if self.http2.load(Ordering::Acquire) {
            if let Some((tx, slot)) = self.h2.checkout() {
                return Ok(Conn::Http2 {
                    tx,
                    slot,
                    reused: true,
                });
            }
            return Box::pin(self.open_http2(connect_timeout)).await;
        }
        match self
            .idle
            .checkout(connect_timeout.min(http1_idle::READY_WAIT))
            .await
        {
            Some(IdleConn::Hyper(tx)) => return Ok(Conn::Http1 { tx, reused: true }),
            Some(IdleConn::Direct(conn)) => return Ok(Conn::Direct { conn, reused: true }),
            None => {}
        }
        if self.direct_http1 {
            return Box::pin(self.open_direct(connect_timeout)).await;
        }
        Box::pin(self.open_http1(connect_timeout)).await
    }

    async fn open_direct(&self, connect_timeout: Duration) -> Result<Conn, ConnectError> {
        let io = self.connect(connect_timeout).await?.into_inner();
        let open = OpenGuard::new(self.open_counter());
        Ok(Conn::Direct {
            conn: DirectConn::new(io, self.close_token(), open),
            reused: false,
        })
    }

    async fn open_http2(&self, connect_timeout: Duration) -> Result<Conn, ConnectError> {
        let io = self.connect(connect_timeout).await?;
        let (tx, slot) = http2_set::handshake(
            io,
            self.idle.keepalive(),
            &self.h2,
            !self.draining.load(Ordering::Acquire),
            |conn| self.drive(conn),
        )
        .await
        .map_err(|source| ConnectError::Handshake {
            addr: self.addr,
            source,
        })?;
        Ok(Conn::Http2 {
            tx,
            slot,
            reused: false,
        })
    }

    async fn open_http1(&self, connect_timeout: Duration) -> Result<Conn, ConnectError> {
        let (tx, conn) = self.http1_handshake(connect_timeout).await?;
        self.drive(conn);
        Ok(Conn::Http1 { tx, reused: false })
    }

    /// A new HTTP/1.1 connection, handshake done; the caller drives it.
    async fn http1_handshake(
        &self,
        connect_timeout: Duration,
    ) -> Result<
        (
            http1::SendRequest<ProxyBody>,
            http1::Connection<TokioIo<TcpStream>, ProxyBody>,
        ),
        ConnectError,
    > {
        let io = self.connect(connect_timeout).await?;
        http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|source| ConnectError::Handshake {
                addr: self.addr,
                source,
            })
    }

    /// A fresh HTTP/1.1 connection of its own for a request that asks to switch protocols
    /// (WebSocket and the like): never pooled, driven with upgrades enabled, and closed with the
    /// endpoint's connections. Also returns the token that fires when the endpoint's
    /// connections are closed (drain deadline, shutdown), which the tunnel must obey too.
    pub async fn open_for_upgrade(
        &self,
        connect_timeout: Duration,
    ) -> Result<(http1::SendRequest<ProxyBody>, CancellationToken), ConnectError> {
        if self.closed_locally() {
            return Err(ConnectError::Closed { addr: self.addr });
        }
        let (tx, conn) = self.http1_handshake(connect_timeout).await?;
        self.drive(conn.with_upgrades());
        Ok((tx, self.close_token().clone()))
    }

    async fn connect(&self, timeout: Duration) -> Result<TokioIo<TcpStream>, ConnectError> {
        match tokio::time::timeout(timeout, TcpStream::connect(self.addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                Ok(TokioIo::new(stream))
            }
            Ok(Err(source)) => Err(ConnectError::Io {
                addr: self.addr,
                source,
            }),
            Err(_) => Err(ConnectError::Timeout {
                addr: self.addr,
                timeout,
            }),
        }
    }

    /// Run a connection's I/O until it ends or the endpoint closes, counted as open meanwhile.
    fn drive<F: Future + Send + 'static>(&self, conn: F) {
        let close_all = self.close_token().clone();
        let open = OpenGuard::new(self.open_counter());
        tokio::spawn(poll_clock::scoped(async move {
            let _open = open;
            tokio::select! {
                _ = conn => {}
                _ = close_all.cancelled() => {}
            }
        }));
    }

    /// A response has been read to its end: an HTTP/1 connection goes back to the idle stack
    /// (unless draining), an HTTP/2 stream is freed.
    pub fn release(&self, release: Release) {
        match release {
            Release::Http1(tx) => {
                if !self.draining.load(Ordering::Acquire) {
                    self.idle.put(IdleConn::Hyper(tx), poll_clock::now());
                }
            }
            Release::Http2(slot) => drop(slot),
            Release::Direct(slot) => {
                let conn = slot.lock().take();
                if let Some(conn) = conn
                    && !self.draining.load(Ordering::Acquire)
                {
                    self.idle.put(IdleConn::Direct(conn), poll_clock::now());
                }
            }
        }
    }

    /// Close HTTP/2 connections idle for longer than `max_idle`, and ones the endpoint closed.
    /// (Idle HTTP/1.1 connections are the pool's: `IdleConnections::expire`.)
    pub fn expire_idle(&self, max_idle: Duration, now: Instant) {
        self.h2.expire(max_idle, now);
    }

    /// Stop reusing connections: idle ones close now, busy ones close when their response ends.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.retire();
    }

    /// Undo `drain` when the endpoint returns to the roster.
    pub fn undrain(&self) {
        self.draining.store(false, Ordering::Release);
    }

    /// Stop handing out the connections open now (an ejection: a connection that went dark must
    /// not survive into the endpoint's re-admission). Requests on them finish.
    pub fn retire(&self) {
        self.idle.clear();
        self.h2.retire_all();
    }

    /// Switch protocol (a config change): connections of the old one are not reused.
    pub fn set_http2(&self, http2: bool) {
        if self.http2.swap(http2, Ordering::AcqRel) != http2 {
            self.retire();
        }
    }

    /// Close every connection, busy or not (drain deadline, shutdown).
    pub fn close(&self) {
        self.drain();
        self.close_token().cancel();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(live) = self.live.get() {
            live.close_all.cancel();
        }
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
mod tests;
