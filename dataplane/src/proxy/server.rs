//! The listener the application sends to: one per pool, HTTP/1.1 and prior-knowledge HTTP/2 on
//! the same port (hyper-util's auto connection detects which). Stopping a listener stops
//! accepting and lets each open connection finish its in-flight requests (HTTP/2 gets a GOAWAY,
//! HTTP/1 closes after the current response), up to a grace period.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::forward::forward;
use crate::pool::Pool;

/// A running listener; dropping it does not stop it, `stop` does.
pub struct Listener {
    pub addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Listener {
    /// Bind `addr` and serve `pool` on it.
    pub async fn bind(addr: SocketAddr, pool: Arc<Pool>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let task = tokio::spawn(accept_loop(listener, pool, stop.clone()));
        Ok(Self { addr, stop, task })
    }

    /// Stop accepting; open connections finish gracefully within `grace`.
    pub async fn stop(self, grace: Duration) {
        self.stop.cancel();
        if tokio::time::timeout(grace, self.task).await.is_err() {
            tracing::warn!(addr = %self.addr, "listener connections did not finish within the grace period");
        }
    }
}

async fn accept_loop(listener: TcpListener, pool: Arc<Pool>, stop: CancellationToken) {
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, client) = tokio::select! {
            _ = stop.cancelled() => break,
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
        let pool = Arc::clone(&pool);
        let stop = stop.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| {
                let pool = Arc::clone(&pool);
                async move { Ok::<_, std::convert::Infallible>(forward(pool, req, client).await) }
            });
            // A timer makes hyper enforce its HTTP/1 header read timeout (30 s), so a client
            // that trickles headers cannot hold a connection forever.
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new());
            builder.http2().timer(TokioTimer::new());
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%client, %error, "client connection ended with an error");
                    }
                }
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    connections.close();
    connections.wait().await;
}
