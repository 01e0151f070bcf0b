//! The operations endpoint: `/metrics` (Prometheus text), `/livez` (the process answers) and
//! `/readyz` (caches synced, so the roster it serves is real; a standby or a starting replica
//! is not ready, and the Service sends sidecars elsewhere).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

fn respond(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res
}

fn route(path: &str, metrics: &Metrics, ready: &AtomicBool) -> Response<Full<Bytes>> {
    match path {
        "/livez" => respond(StatusCode::OK, "ok\n".into()),
        "/readyz" if ready.load(Ordering::Acquire) => respond(StatusCode::OK, "ok\n".into()),
        "/readyz" => respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "caches not synced\n".into(),
        ),
        "/metrics" => match metrics.render() {
            Ok(text) => respond(StatusCode::OK, text),
            Err(e) => respond(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
        },
        _ => respond(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

/// Serve until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let (io, _) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let (metrics, ready) = (metrics.clone(), ready.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let res = route(req.uri().path(), &metrics, &ready);
                async move { Ok::<_, Infallible>(res) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(io), svc)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_follows_the_sync_flag() {
        let m = Metrics::new().unwrap();
        let ready = AtomicBool::new(false);
        assert_eq!(
            route("/readyz", &m, &ready).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        ready.store(true, Ordering::Release);
        assert_eq!(route("/readyz", &m, &ready).status(), StatusCode::OK);
        assert_eq!(route("/livez", &m, &ready).status(), StatusCode::OK);
        assert_eq!(route("/metrics", &m, &ready).status(), StatusCode::OK);
        assert_eq!(route("/nope", &m, &ready).status(), StatusCode::NOT_FOUND);
    }
}
