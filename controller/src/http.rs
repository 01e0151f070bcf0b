//! The operations endpoint: `/metrics` (Prometheus text), `/livez` (the process answers),
//! `/readyz` (leading with caches synced, so the roster it serves is real; a standby or a
//! starting replica is not), and `/readyz/replica` (this replica runs and can take over: the
//! kubelet's readiness probe in the chart, where the Service reaches the leader through the
//! EndpointSlice it writes, `leader_slice`).

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

use rollcall_api::tls::CertResolver;

use crate::metrics::Metrics;

fn respond(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res
}

/// Whether this replica serves (`serving`: leading and synced, and with TLS on, a roster
/// certificate loaded) and whether it runs at all (`replica`: competing for the Lease or
/// leading, not shutting down).
#[derive(Debug, Default)]
pub struct Readiness {
    pub serving: Arc<AtomicBool>,
    pub replica: Arc<AtomicBool>,
    /// The roster port's certificate, when it speaks TLS.
    pub certificate: Option<Arc<CertResolver>>,
}

fn route(path: &str, metrics: &Metrics, readiness: &Readiness) -> Response<Full<Bytes>> {
    let ready = &readiness.serving;
    match path {
        "/livez" => respond(StatusCode::OK, "ok\n".into()),
        "/readyz/replica" if readiness.replica.load(Ordering::Acquire) => {
            respond(StatusCode::OK, "ok\n".into())
        }
        "/readyz/replica" => respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "not competing for the lead (starting or shutting down)\n".into(),
        ),
        "/readyz"
            if readiness
                .certificate
                .as_ref()
                .is_some_and(|c| !c.is_loaded()) =>
        {
            respond(
                StatusCode::SERVICE_UNAVAILABLE,
                "no roster TLS certificate loaded yet\n".into(),
            )
        }
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
    readiness: Arc<Readiness>,
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
        let (metrics, readiness) = (metrics.clone(), readiness.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let res = route(req.uri().path(), &metrics, &readiness);
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
    fn readyz_follows_the_sync_flag_and_the_replica_probe_its_own() {
        let m = Metrics::new().unwrap();
        let ready = Readiness::default();
        for path in ["/readyz", "/readyz/replica"] {
            assert_eq!(
                route(path, &m, &ready).status(),
                StatusCode::SERVICE_UNAVAILABLE
            );
        }
        ready.replica.store(true, Ordering::Release);
        assert_eq!(
            route("/readyz/replica", &m, &ready).status(),
            StatusCode::OK
        );
        assert_eq!(
            route("/readyz", &m, &ready).status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "a standby does not serve"
        );
        ready.serving.store(true, Ordering::Release);
        assert_eq!(route("/readyz", &m, &ready).status(), StatusCode::OK);
        assert_eq!(route("/livez", &m, &ready).status(), StatusCode::OK);
        assert_eq!(route("/metrics", &m, &ready).status(), StatusCode::OK);
        assert_eq!(route("/nope", &m, &ready).status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn with_tls_on_readyz_waits_for_a_roster_certificate() {
        let m = Metrics::new().unwrap();
        let certificate = Arc::new(CertResolver::default());
        let ready = Readiness {
            certificate: Some(Arc::clone(&certificate)),
            ..Readiness::default()
        };
        ready.serving.store(true, Ordering::Release);
        let waiting = route("/readyz", &m, &ready);
        assert_eq!(waiting.status(), StatusCode::SERVICE_UNAVAILABLE);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["rollcall-controller".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        certificate.load(&cert.pem(), &key.serialize_pem()).unwrap();
        assert_eq!(route("/readyz", &m, &ready).status(), StatusCode::OK);
    }
}
