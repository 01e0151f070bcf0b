//! The webhook over HTTPS: `POST /mutate` answers AdmissionReviews, `GET /healthz` says the
//! server answers. TLS comes from the `CertResolver`, so a renewed certificate is served from
//! the next handshake on. Bodies over 3 MiB (the API server's own request limit) are refused.

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::certs::roster::Trust;
use crate::config::SidecarSettings;
use crate::metrics::Metrics;
use crate::review;

/// Largest AdmissionReview accepted.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// What the webhook needs to answer.
pub struct Webhook {
    pub settings: SidecarSettings,
    pub metrics: Metrics,
    /// The CA bundle sidecars are handed, when the injector keeps the roster certificate.
    pub trust: Option<Trust>,
}

// === impl Webhook ===

impl Webhook {
    /// The settings to inject with now: the file's, with the current CA bundle.
    pub fn settings_now(&self) -> Cow<'_, SidecarSettings> {
        match self.trust.as_ref().map(|t| t.load_full()) {
            Some(Some(bundle)) => {
                let mut settings = self.settings.clone();
                settings.controller_ca_pem = Some(bundle.as_ref().clone());
                Cow::Owned(settings)
            }
            _ => Cow::Borrowed(&self.settings),
        }
    }
}

fn respond(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

/// Answer one HTTP request.
pub async fn handle(webhook: &Webhook, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/healthz") => respond(StatusCode::OK, "text/plain", b"ok\n".to_vec()),
        (&Method::POST, "/mutate") => {
            let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => {
                    return respond(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "text/plain",
                        format!("cannot read the request: {e}\n").into_bytes(),
                    );
                }
            };
            let (outcome, answer) = review::answer(&body, &webhook.settings_now());
            webhook
                .metrics
                .admissions
                .with_label_values(&[outcome.label()])
                .inc();
            match review::encode(&answer) {
                Ok(json) => respond(StatusCode::OK, "application/json", json),
                Err(e) => respond(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    format!("{e}\n").into_bytes(),
                ),
            }
        }
        _ => respond(
            StatusCode::NOT_FOUND,
            "text/plain",
            b"POST /mutate or GET /healthz\n".to_vec(),
        ),
    }
}

/// Serve HTTPS on `listener` until `shutdown`, then let open connections finish (at most
/// `drain`).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    webhook: Arc<Webhook>,
    drain: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let webhook = webhook.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls =
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let service = service_fn(move |req| {
                let webhook = webhook.clone();
                async move { Ok::<_, Infallible>(handle(&webhook, req).await) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {drain:?}; closing them");
    }
}
