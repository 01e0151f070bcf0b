//! The controller's Kubernetes client, with a client-side rate limit, so nothing a caller does
//! (a burst of new tokens to review, a thousand pools to write status for) can make the
//! controller hammer the API server: at most `burst` requests start in any window of
//! `burst / qps` seconds, so `qps` on average (istiod runs 80 a second with bursts of 160;
//! client-go's default is 5/10). Excess requests wait their turn; watches are one request each
//! for their whole life. The Lease has its own client on its own runtime (`lease_runtime`), so
//! renewing it never queues behind this limit.
//!
//! tower's `RateLimit` (fixed windows, from the tower the tree already carries) rather than a
//! hand-written token bucket.

use std::time::Duration;

use kube::client::ClientBuilder;
use tower::limit::RateLimitLayer;

/// How many API requests the controller may start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Average requests a second.
    pub qps: f64,
    /// Requests that may start at once.
    pub burst: u64,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            qps: 100.0,
            burst: 200,
        }
    }
}

impl RateLimit {
    /// The window in which at most `burst` requests start.
    pub fn window(&self) -> Duration {
        let qps = if self.qps.is_finite() && self.qps > 0.0 {
            self.qps
        } else {
            1.0
        };
        Duration::from_secs_f64(self.burst.max(1) as f64 / qps)
    }
}

/// A client for `config` whose requests are limited by `limit`.
pub fn client(config: kube::Config, limit: RateLimit) -> Result<kube::Client, kube::Error> {
    let builder = ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&RateLimitLayer::new(limit.burst.max(1), limit.window()))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_holds_a_burst_at_the_average_rate() {
        let istiod = RateLimit {
            qps: 80.0,
            burst: 160,
        };
        assert_eq!(istiod.window(), Duration::from_secs(2));
        assert_eq!(RateLimit::default().window(), Duration::from_secs(2));
        let odd = RateLimit { qps: 0.0, burst: 0 };
        assert_eq!(
            odd.window(),
            Duration::from_secs(1),
            "nonsense is bounded, not infinite"
        );
    }

    /// An API server on 127.0.0.1 that answers every request and counts them.
    async fn counting_server() -> (
        std::net::SocketAddr,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = std::sync::Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((io, _)) = listener.accept().await else {
                    return;
                };
                let counter = counter.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_req| {
                        counter.fetch_add(1, Ordering::SeqCst);
                        async {
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                http_body_util::Full::new(bytes::Bytes::from_static(b"{}")),
                            ))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
                        .await;
                });
            }
        });
        (addr, seen)
    }

    #[tokio::test]
    async fn requests_past_the_burst_wait_for_the_next_window() {
        let (addr, seen) = counting_server().await;
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        // Two requests per half second.
        let limited = client(config, RateLimit { qps: 4.0, burst: 2 }).unwrap();
        let started = tokio::time::Instant::now();
        for _ in 0..6 {
            let request = http::Request::get("/version").body(Vec::new()).unwrap();
            limited.request_text(request).await.unwrap();
        }
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 6);
        // Windows start at 0, 0.5 and 1.0 s: the last two cannot start before the third. (A
        // loaded machine only makes this longer.)
        assert!(
            started.elapsed() >= Duration::from_millis(950),
            "six requests at two per half second took {:?}",
            started.elapsed()
        );
    }
}
