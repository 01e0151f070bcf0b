//! The operations endpoint, plain HTTP: `/livez` (the process answers), `/readyz` (a
//! certificate is loaded, so the webhook can complete a handshake), `/metrics`.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::certs::CertResolver;
use crate::metrics::Metrics;

fn respond(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res
}

/// The answer for `path`.
pub fn route(path: &str, metrics: &Metrics, certs: &CertResolver) -> Response<Full<Bytes>> {
    match path {
        "/livez" => respond(StatusCode::OK, "ok\n".into()),
        "/readyz" if certs.is_loaded() => respond(StatusCode::OK, "ok\n".into()),
        "/readyz" => respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "no serving certificate loaded yet\n".into(),
        ),
        "/metrics" => respond(StatusCode::OK, metrics.render()),
        _ => respond(
            StatusCode::NOT_FOUND,
            "try /metrics, /readyz or /livez\n".into(),
        ),
    }
}

/// Serve until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    certs: Arc<CertResolver>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let (io, _) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let (metrics, certs) = (metrics.clone(), certs.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let res = route(req.uri().path(), &metrics, &certs);
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
    fn ready_once_a_certificate_is_loaded() {
        let metrics = Metrics::new().unwrap();
        let certs = CertResolver::default();
        assert_eq!(
            route("/readyz", &metrics, &certs).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(route("/livez", &metrics, &certs).status(), StatusCode::OK);
        assert_eq!(route("/metrics", &metrics, &certs).status(), StatusCode::OK);
    }
}
