//! The HTTP/2 connections of one endpoint. Each is used up to the stream limit its peer
//! announced in SETTINGS (read from the connection when a stream is wanted); a request that finds every
//! connection full opens another one rather than queueing behind the limit, where its per-try
//! timer would run out while it waited and the endpoint would be blamed for our queue. PING
//! keep-alive closes a connection whose peer stopped answering, so a connection that went dark
//! does not keep swallowing requests; `retire_all` (an ejection, a drain) stops handing out the
//! connections open now, while the requests on them finish.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::client::conn::http2;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{KeepAlive, ProxyBody};
use crate::poll_clock;

/// How often an HTTP/2 connection is pinged (idle or not).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a PING may go unanswered before the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The stream limit assumed until the peer's SETTINGS arrive: one, the stream that opened the
/// connection. Assuming more would queue a burst behind a limit not known yet; h2 replaces it
/// with the peer's value (unlimited when the peer sets none) as soon as its SETTINGS are read.
const INITIAL_MAX_STREAMS: usize = 1;

/// Connections per endpoint; past this, requests share the least busy one and may queue.
const MAX_CONNECTIONS: usize = 64;

type Connection = http2::Connection<TokioIo<TcpStream>, ProxyBody, poll_clock::ScopedExecutor>;
type Shared = Arc<Mutex<Pin<Box<Connection>>>>;

/// Made with the endpoint's first HTTP/2 connection: an endpoint that never gets one (every
/// endpoint of an HTTP/1.1 pool, most of a wide one) pays 8 bytes here, not an empty list's 24.
#[derive(Default)]
#[allow(clippy::box_collection)] // the box is the point
pub(super) struct ConnectionSet {
    connections: Mutex<Option<Box<Vec<Arc<Multiplexed>>>>>,
}

/// One HTTP/2 connection and how many of its streams our requests hold.
struct Multiplexed {
    tx: http2::SendRequest<ProxyBody>,
    streams: AtomicUsize,
    /// The connection itself, shared with its driver, to read the peer's current
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (hyper drives the frames in a task of its own, so the
    /// value is read when wanted rather than copied when the driver happens to run).
    connection: Shared,
    retired: AtomicBool,
    last_used: Mutex<Instant>,
}

/// One stream of an HTTP/2 connection, held by a request until its response ends.
pub struct StreamSlot(Arc<Multiplexed>);

// === impl ConnectionSet ===

impl ConnectionSet {
    /// A stream on a live connection with room, if there is one. At the connection cap the
    /// least busy connection takes the request even when full.
    pub(super) fn checkout(&self) -> Option<(http2::SendRequest<ProxyBody>, StreamSlot)> {
        let mut guard = self.connections.lock();
        let connections = guard.as_deref_mut()?;
        connections.retain(|c| !c.tx.is_closed());
        for connection in connections.iter() {
            if connection.try_reserve() {
                return Some((connection.tx.clone(), StreamSlot(Arc::clone(connection))));
            }
        }
        if connections.len() < MAX_CONNECTIONS {
            return None;
        }
        let least = connections
            .iter()
            .min_by_key(|c| c.streams.load(Ordering::Acquire))?;
        least.streams.fetch_add(1, Ordering::AcqRel);
        Some((least.tx.clone(), StreamSlot(Arc::clone(least))))
    }

    /// Stop handing out the connections open now; requests on them finish.
    pub(super) fn retire_all(&self) {
        if let Some(connections) = self.connections.lock().as_deref_mut() {
            for connection in connections.drain(..) {
                connection.retired.store(true, Ordering::Release);
            }
        }
    }

    /// Close connections without a stream for longer than `max_idle`, and closed ones.
    pub(super) fn expire(&self, max_idle: Duration, now: Instant) {
        if let Some(connections) = self.connections.lock().as_deref_mut() {
            connections.retain(|c| {
                !c.tx.is_closed()
                    && (c.streams.load(Ordering::Acquire) > 0
                        || now.saturating_duration_since(*c.last_used.lock()) < max_idle)
            });
        }
    }

    #[cfg(test)]
    pub(super) fn max_streams(&self) -> Vec<usize> {
        self.connections
            .lock()
            .iter()
            .flat_map(|connections| connections.iter())
            .map(|c| c.max_streams())
            .collect()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.connections.lock().as_ref().map_or(0, |c| c.len())
    }
}

// === impl Multiplexed ===

impl Multiplexed {
    /// The peer's stream limit now (at least 1).
    fn max_streams(&self) -> usize {
        self.connection.lock().current_max_send_streams().max(1)
    }

    /// Take a stream if the peer's limit allows one more.
    fn try_reserve(&self) -> bool {
        if self.retired.load(Ordering::Acquire) {
            return false;
        }
        let max = self.max_streams();
        let mut current = self.streams.load(Ordering::Acquire);
        loop {
            if current >= max {
                return false;
            }
            match self.streams.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    *self.last_used.lock() = poll_clock::now();
                    return true;
                }
                Err(actual) => current = actual,
            }
        }
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
        *self.0.last_used.lock() = poll_clock::now();
    }
}

/// Open an HTTP/2 connection over `io` and take its first stream. `share` adds it to `set`
/// for other requests (not while draining); `drive` runs its I/O.
pub(super) async fn handshake(
    io: TokioIo<TcpStream>,
    keepalive: KeepAlive,
    set: &ConnectionSet,
    share: bool,
    drive: impl FnOnce(Driver),
) -> Result<(http2::SendRequest<ProxyBody>, StreamSlot), hyper::Error> {
    let (tx, connection) = http2::Builder::new(poll_clock::ScopedExecutor)
        .timer(TokioTimer::new())
        .initial_max_send_streams(INITIAL_MAX_STREAMS)
        .keep_alive_interval(keepalive.interval)
        .keep_alive_timeout(keepalive.timeout)
        .keep_alive_while_idle(true)
        .handshake(io)
        .await?;
    let connection: Shared = Arc::new(Mutex::new(Box::pin(connection)));
    drive(Driver {
        connection: Arc::clone(&connection),
    });
    let multiplexed = Arc::new(Multiplexed {
        tx: tx.clone(),
        streams: AtomicUsize::new(1),
        connection,
        retired: AtomicBool::new(false),
        last_used: Mutex::new(Instant::now()),
    });
    if share {
        set.connections
            .lock()
            .get_or_insert_default()
            .push(Arc::clone(&multiplexed));
    }
    Ok((tx, StreamSlot(multiplexed)))
}

/// Drives one connection (its lock is held only while it is polled).
pub(super) struct Driver {
    connection: Shared,
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.connection.lock().as_mut().poll(cx).map(|_| ())
    }
}
