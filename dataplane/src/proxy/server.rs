//! The listener the application sends to: one per pool, HTTP/1.1 and prior-knowledge HTTP/2 on
//! the same port (hyper-util's auto connection detects which). Stopping a listener stops
//! accepting at once and tells every open connection to finish: an HTTP/1 connection answers the
//! request in flight with `Connection: close` and closes (an idle one closes now), an HTTP/2 one
//! gets a GOAWAY and finishes its streams. Nothing is cut before the grace period ends; what is
//! still open then is closed, upgraded connections (tunnels) included.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use http::Response;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::fast;
use super::forward::forward;
use super::headers::ClientAddr;
use super::upgrade::Tunnels;
use crate::poll_clock;
use crate::pool::{Http1Engine, Pool};
use crate::upstream::ProxyBody;

/// A running listener; dropping it does not stop it, `stop` does.
pub struct Listener {
    pub addr: SocketAddr,
    /// Stop accepting and finish gracefully.
    stop: CancellationToken,
    /// Close whatever is still open.
    cut: CancellationToken,
    connections: TaskTracker,
    task: JoinHandle<()>,
}

impl Listener {
    /// Bind `addr` and serve `pool` on it.
    pub async fn bind(addr: SocketAddr, pool: Arc<Pool>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let cut = CancellationToken::new();
        let connections = TaskTracker::new();
        let task = tokio::spawn(accept_loop(
            listener,
            pool,
            stop.clone(),
            cut.clone(),
            connections.clone(),
        ));
        Ok(Self {
            addr,
            stop,
            cut,
            connections,
            task,
        })
    }

    /// Stop accepting; open connections finish within `grace`, then the rest are closed.
    /// Returns how many had to be closed.
    pub async fn stop(self, grace: Duration) -> usize {
        self.stop.cancel();
        // The accept loop ends at once; the listening socket closes with it.
        let _ = self.task.await;
        self.connections.close();
        if tokio::time::timeout(grace, self.connections.wait())
            .await
            .is_ok()
        {
            return 0;
        }
        let cut = self.connections.len();
        tracing::warn!(addr = %self.addr, connections = cut, "grace period over: closing connections still open");
        self.cut.cancel();
        self.connections.wait().await;
        cut
    }
}

async fn accept_loop(
    listener: TcpListener,
    pool: Arc<Pool>,
    stop: CancellationToken,
    cut: CancellationToken,
    connections: TaskTracker,
) {
    loop {
        let (stream, client) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            pool: Arc::clone(&pool),
            client: ClientAddr::new(client),
            peer: client,
            tunnels: Tunnels {
                tracker: connections.clone(),
                cut: cut.clone(),
            },
            stop: stop.clone(),
            cut: cut.clone(),
        };
        // The request path reads the clock once per poll of its connection (`poll_clock`).
        match pool.tuning().http1_engine {
            Http1Engine::Hyper => connections.spawn(poll_clock::scoped(serve_with_hyper(
                TokioIo::new(stream),
                connection,
            ))),
            Http1Engine::Fast => {
                connections.spawn(poll_clock::scoped(fast::serve(stream, connection)))
            }
        };
    }
}

/// What serving one client connection needs, whichever engine serves it.
pub(super) struct Connection {
    pub pool: Arc<Pool>,
    pub client: ClientAddr,
    pub peer: SocketAddr,
    pub tunnels: Tunnels,
    /// Finish gracefully.
    pub stop: CancellationToken,
    /// Close now.
    pub cut: CancellationToken,
}

/// Serve a client connection (or what is left of one, from the fast engine) with hyper's
/// HTTP/1 and HTTP/2 servers.
pub(super) async fn serve_with_hyper<I>(io: I, connection: Connection)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let Connection {
        pool,
        client,
        peer,
        tunnels,
        stop,
        cut,
    } = connection;
    let service =
        service_fn(move |req| forward(Arc::clone(&pool), req, &client, &tunnels).map(infallible));
    // A timer makes hyper enforce its HTTP/1 header read timeout (30 s), so a client that
    // trickles headers cannot hold a connection forever.
    let mut builder = auto::Builder::new(poll_clock::ScopedExecutor);
    builder.http1().timer(TokioTimer::new());
    // Extended CONNECT (RFC 8441), so HTTP/2 clients can open WebSockets.
    builder
        .http2()
        .timer(TokioTimer::new())
        .enable_connect_protocol();
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(client = %peer, %error, "client connection ended with an error");
            }
            return;
        }
        _ = stop.cancelled() => conn.as_mut().graceful_shutdown(),
    }
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = cut.cancelled() => {}
    }
}

/// The service's answer: the proxy always answers, so its error type is `Infallible`.
fn infallible(response: Response<ProxyBody>) -> Result<Response<ProxyBody>, Infallible> {
    Ok(response)
}
