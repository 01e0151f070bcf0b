//! The admin listener (localhost by default): `/metrics` in the Prometheus text format,
//! `/endpoints` (every endpoint's state, reason, since and counters as JSON — the same facts
//! the controller receives), `/ready` (200 once the configured pools listen, 503 again from the
//! moment the sidecar is told to stop) and `/live`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::pool::PoolView;
use crate::runtime::Runtime;

/// What the admin endpoints read.
pub struct AdminState {
    pub runtime: Arc<Runtime>,
    pub metrics: Arc<Metrics>,
    pub readiness: Readiness,
}

/// Where the sidecar stands, as `/ready` says it.
#[derive(Debug, Default)]
pub struct Readiness(AtomicU8);

impl Readiness {
    const STARTING: u8 = 0;
    const READY: u8 = 1;
    const STOPPING: u8 = 2;

    /// Every pool listens.
    pub fn ready(&self) {
        let _ = self.0.compare_exchange(
            Self::STARTING,
            Self::READY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Told to stop: not ready from now on, whatever happens next.
    pub fn stopping(&self) {
        self.0.store(Self::STOPPING, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire) == Self::READY
    }

    fn text(&self) -> &'static str {
        match self.0.load(Ordering::Acquire) {
            Self::READY => "ready\n",
            Self::STOPPING => "shutting down\n",
            _ => "starting\n",
        }
    }
}

#[derive(Serialize)]
struct EndpointsDoc {
    pools: Vec<PoolView>,
}

/// Serve the admin endpoints on an already-bound listener until the task is aborted.
pub async fn serve(listener: TcpListener, state: Arc<AdminState>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "admin accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let state = Arc::clone(&state);
                async move { Ok::<_, std::convert::Infallible>(handle(&state, req).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Bind the admin address.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

async fn handle(state: &AdminState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    match req.uri().path() {
        "/metrics" => {
            let mut response = text(StatusCode::OK, state.metrics.render());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        "/endpoints" => {
            let doc = EndpointsDoc {
                pools: state.runtime.views().await,
            };
            match serde_json::to_string_pretty(&doc) {
                Ok(json) => {
                    let mut response = text(StatusCode::OK, json + "\n");
                    response.headers_mut().insert(
                        header::CONTENT_TYPE,
                        header::HeaderValue::from_static("application/json"),
                    );
                    response
                }
                Err(error) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")),
            }
        }
        "/ready" => {
            let status = if state.readiness.is_ready() {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            text(status, state.readiness.text().into())
        }
        "/live" => text(StatusCode::OK, "live\n".into()),
        _ => text(
            StatusCode::NOT_FOUND,
            "try /endpoints, /metrics, /ready or /live\n".into(),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}
