//! One request's journey: pick an endpoint, get a connection, send, classify what came back,
//! and decide (through `retry`) whether to try again elsewhere. Every try is recorded against
//! its endpoint, even when a retry then succeeds. The in-flight count of an endpoint is held by
//! a guard that travels with the response body, so it is released on every path: success,
//! failure, timeout, and the client going away (the future is dropped).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::time::Instant;

use super::body::{TrackedBody, error_response};
use super::headers::{add_forwarded, strip_hop_by_hop};
use super::upstream::{BoxError, Conn, ProxyBody};
use crate::balance::{self, InFlight};
use crate::pool::{AttemptOutcome, Endpoint, Pool};
use crate::retry::{Decision, Failure, RequestFacts};

/// Request bodies up to this size are buffered so the request can be replayed on a retry;
/// larger ones stream and are only retried while none of their bytes have left.
const REPLAYABLE_BODY_LIMIT: u64 = 64 * 1024;
/// Tries on a fresh connection after a pooled one was found dead before writing.
const MAX_FREE_RETRIES: u32 = 3;

/// The request body as far as retries are concerned.
enum RequestBody {
    /// Fully read (or empty): can be sent any number of times.
    Replayable(Bytes),
    /// Streaming: can be sent once; `None` once it has left.
    Streaming(Option<ProxyBody>),
}

impl RequestBody {
    fn take(&mut self) -> Option<ProxyBody> {
        match self {
            RequestBody::Replayable(bytes) => Some(full(bytes.clone())),
            RequestBody::Streaming(body) => body.take(),
        }
    }

    /// Put back a body hyper returned unsent.
    fn restore(&mut self, body: ProxyBody) {
        if let RequestBody::Streaming(slot) = self {
            *slot = Some(body);
        }
    }

    fn replayable(&self) -> bool {
        match self {
            RequestBody::Replayable(_) => true,
            RequestBody::Streaming(body) => body.is_some(),
        }
    }
}

fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Forward one request of `client` through `pool`.
pub async fn forward(
    pool: Arc<Pool>,
    req: Request<Incoming>,
    client: SocketAddr,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let settings = pool.settings();
    pool.count_request(started);
    let (mut parts, body) = req.into_parts();
    let timeout = grpc_timeout(&parts.headers).map_or(settings.request_timeout, |t| {
        t.min(settings.request_timeout)
    });
    let deadline = started + timeout;

    let host = parts.headers.get(header::HOST).cloned().or_else(|| {
        parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    });
    strip_hop_by_hop(&mut parts.headers);
    add_forwarded(&mut parts.headers, client, host.as_ref());
    if let Some(host) = &host {
        parts.headers.insert(header::HOST, host.clone());
    }
    let idempotent = settings.retry.idempotent(&parts.method, &parts.headers);
    let hash_key = settings
        .hash_header
        .as_ref()
        .and_then(|h| parts.headers.get(h))
        .map(|v| v.as_bytes().to_vec());

    let mut body = match prepare_body(body, deadline).await {
        Ok(body) => body,
        Err(response) => return pool.finish(response, "client_error", started),
    };

    let mut tried: Vec<SocketAddr> = Vec::new();
    let mut tries = 0u32;
    let mut free_retries = 0u32;
    let mut last_error: Option<Response<ProxyBody>> = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            let response = error_response(
                StatusCode::GATEWAY_TIMEOUT,
                "deadline-exceeded",
                "the request deadline passed before an endpoint answered",
            );
            return pool.finish(response, "timeout", started);
        }
        let endpoint = match pool.pick(hash_key.as_deref(), &tried) {
            Ok(endpoint) => endpoint,
            Err(no_endpoint) => {
                let response = last_error.unwrap_or_else(|| {
                    error_response(
                        StatusCode::SERVICE_UNAVAILABLE,
                        no_endpoint.reason,
                        &no_endpoint.message,
                    )
                });
                let outcome = if tries == 0 {
                    "no_endpoint"
                } else {
                    "gateway_error"
                };
                return pool.finish(response, outcome, started);
            }
        };
        tries += 1;
        let attempt = Attempt {
            pool: &pool,
            endpoint: &endpoint,
            started: now,
            guard: endpoint.load.start(),
        };
        let conn = match tokio::time::timeout_at(
            deadline,
            endpoint.upstream.acquire(settings.connect_timeout),
        )
        .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(error)) => {
                attempt.fail(AttemptOutcome::ConnectFailure, &error.to_string());
                tried.push(endpoint.addr);
                let facts = facts(idempotent, &body, tries);
                last_error = Some(error_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "upstream-connect-failure",
                    &format!("could not connect to an endpoint: {error}"),
                ));
                if pool.retry(
                    settings.retry.decide(Failure::ConnectFailed, facts),
                    "connect_failure",
                ) {
                    continue;
                }
                return pool.finish(last_error_or_gateway(last_error), "gateway_error", started);
            }
            Err(_) => {
                attempt.fail(
                    AttemptOutcome::Timeout,
                    "connect did not finish before the request deadline",
                );
                let response = error_response(
                    StatusCode::GATEWAY_TIMEOUT,
                    "deadline-exceeded",
                    "the request deadline passed while connecting",
                );
                return pool.finish(response, "timeout", started);
            }
        };
        let Some(request_body) = body.take() else {
            // A streaming body already left with an earlier try; nothing can be re-sent.
            return pool.finish(last_error_or_gateway(last_error), "gateway_error", started);
        };
        let request = match build_request(&parts, request_body, &conn, host.as_ref()) {
            Ok(request) => request,
            Err(message) => {
                let response = error_response(StatusCode::BAD_REQUEST, "bad-request", &message);
                return pool.finish(response, "client_error", started);
            }
        };
        let try_deadline = (now + settings.per_try_timeout).min(deadline);
        let reused = conn.reused();
        let sent = tokio::time::timeout_at(try_deadline, send(conn, request)).await;
        match sent {
            Err(_elapsed) => {
                attempt.fail(
                    AttemptOutcome::Timeout,
                    "no answer within the per-try timeout",
                );
                tried.push(endpoint.addr);
                let status = if Instant::now() >= deadline {
                    "deadline-exceeded"
                } else {
                    "upstream-timeout"
                };
                last_error = Some(error_response(
                    StatusCode::GATEWAY_TIMEOUT,
                    status,
                    "the endpoint did not answer in time",
                ));
                if pool.retry(
                    settings
                        .retry
                        .decide(Failure::Reset, facts(idempotent, &body, tries)),
                    "timeout",
                ) {
                    continue;
                }
                return pool.finish(last_error_or_gateway(last_error), "timeout", started);
            }
            Ok(Err(SendError::NotSent { request, error })) => {
                // A pooled connection died before our bytes left: nothing reached the endpoint.
                body.restore(request.into_body());
                tries -= 1;
                free_retries += 1;
                tracing::debug!(endpoint = %endpoint.addr, reused, %error, "pooled connection was dead before writing");
                if free_retries <= MAX_FREE_RETRIES
                    && pool.retry(
                        settings.retry.decide(
                            Failure::DeadPooledConnection,
                            facts(idempotent, &body, tries),
                        ),
                        "dead_pooled_connection",
                    )
                {
                    continue;
                }
                let response = error_response(
                    StatusCode::BAD_GATEWAY,
                    "upstream-reset",
                    "connections to the endpoint kept closing",
                );
                return pool.finish(response, "gateway_error", started);
            }
            Ok(Err(SendError::Sent(error))) => {
                let (outcome, reason, status) = if error.is_parse() || error.is_parse_status() {
                    (
                        AttemptOutcome::ProtocolError,
                        "upstream-protocol-error",
                        StatusCode::BAD_GATEWAY,
                    )
                } else {
                    (
                        AttemptOutcome::Reset,
                        "upstream-reset",
                        StatusCode::BAD_GATEWAY,
                    )
                };
                attempt.fail(outcome, &error.to_string());
                tried.push(endpoint.addr);
                last_error = Some(error_response(
                    status,
                    reason,
                    &format!("the endpoint failed mid-request: {error}"),
                ));
                if pool.retry(
                    settings
                        .retry
                        .decide(Failure::Reset, facts(idempotent, &body, tries)),
                    "reset",
                ) {
                    continue;
                }
                return pool.finish(last_error_or_gateway(last_error), "gateway_error", started);
            }
            Ok(Ok((response, release))) => {
                let status = response.status().as_u16();
                let outcome = AttemptOutcome::from_status(status);
                let (guard, try_started) = attempt.answered(status);
                if status >= 500 {
                    tried.push(endpoint.addr);
                    let decision = settings
                        .retry
                        .decide(Failure::Status(status), facts(idempotent, &body, tries));
                    if matches!(decision, Decision::Retry) && pool.retry(decision, "status") {
                        continue;
                    }
                }
                let label = outcome.request_label();
                let response = TrackedBody::wrap(
                    response,
                    guard,
                    release,
                    Arc::clone(&pool),
                    Arc::clone(&endpoint),
                    try_started,
                );
                return pool.finish(response, label, started);
            }
        }
    }
}

/// One try of one endpoint: holds the endpoint's in-flight count until the try is settled.
struct Attempt<'a> {
    pool: &'a Pool,
    endpoint: &'a Arc<Endpoint>,
    started: Instant,
    guard: InFlight,
}

impl Attempt<'_> {
    /// The try failed: record it against the endpoint and release the in-flight count.
    fn fail(self, outcome: AttemptOutcome, detail: &str) {
        let now = Instant::now();
        self.pool
            .record_attempt(self.endpoint, outcome, detail, now - self.started);
        self.guard
            .finish(balance::Outcome::Failure, now - self.started, now);
    }

    /// The try got an answer: record it; the in-flight count goes with the response body.
    fn answered(self, status: u16) -> (InFlight, Instant) {
        let now = Instant::now();
        let outcome = AttemptOutcome::from_status(status);
        self.pool.record_attempt(
            self.endpoint,
            outcome,
            status_detail(status),
            now - self.started,
        );
        (self.guard, self.started)
    }
}

fn last_error_or_gateway(last: Option<Response<ProxyBody>>) -> Response<ProxyBody> {
    last.unwrap_or_else(|| {
        error_response(
            StatusCode::BAD_GATEWAY,
            "upstream-failure",
            "the endpoint failed",
        )
    })
}

fn facts(idempotent: bool, body: &RequestBody, tries: u32) -> RequestFacts {
    RequestFacts {
        idempotent,
        body_replayable: body.replayable(),
        client_gone: false,
        tries,
    }
}

fn status_detail(status: u16) -> &'static str {
    match status {
        502 => "502 Bad Gateway",
        503 => "503 Service Unavailable",
        504 => "504 Gateway Timeout",
        500..=599 => "5xx answer",
        _ => "",
    }
}

/// Read a small body whole so it can be replayed; stream a large or unknown-length one.
async fn prepare_body(
    body: Incoming,
    deadline: Instant,
) -> Result<RequestBody, Response<ProxyBody>> {
    use http_body::Body as _;
    if body.is_end_stream() {
        return Ok(RequestBody::Replayable(Bytes::new()));
    }
    let small = body
        .size_hint()
        .upper()
        .is_some_and(|upper| upper <= REPLAYABLE_BODY_LIMIT);
    if !small {
        let streaming = body.map_err(|e| Box::new(e) as BoxError).boxed_unsync();
        return Ok(RequestBody::Streaming(Some(streaming)));
    }
    match tokio::time::timeout_at(deadline, body.collect()).await {
        Ok(Ok(collected)) => Ok(RequestBody::Replayable(collected.to_bytes())),
        Ok(Err(error)) => Err(error_response(
            StatusCode::BAD_REQUEST,
            "client-body-error",
            &format!("reading the request body failed: {error}"),
        )),
        Err(_) => Err(error_response(
            StatusCode::REQUEST_TIMEOUT,
            "client-body-timeout",
            "the request body did not arrive before the deadline",
        )),
    }
}

/// The upstream request: origin-form URI for HTTP/1.1, absolute URI for HTTP/2.
fn build_request(
    parts: &http::request::Parts,
    body: ProxyBody,
    conn: &Conn,
    host: Option<&HeaderValue>,
) -> Result<Request<ProxyBody>, String> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let (uri, version) = match conn {
        Conn::Http1 { .. } => (
            Uri::try_from(path).map_err(|e| e.to_string())?,
            Version::HTTP_11,
        ),
        Conn::Http2 { .. } => {
            let authority = host.and_then(|h| h.to_str().ok()).unwrap_or("localhost");
            let uri = Uri::builder()
                .scheme("http")
                .authority(authority)
                .path_and_query(path)
                .build()
                .map_err(|e| format!("cannot build the upstream URI: {e}"))?;
            (uri, Version::HTTP_2)
        }
    };
    let mut request = Request::new(body);
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = parts.headers.clone();
    if version == Version::HTTP_2 {
        request.headers_mut().remove(header::HOST);
    }
    Ok(request)
}

enum SendError {
    /// The connection refused the request before writing it; here it is back.
    NotSent {
        request: Box<Request<ProxyBody>>,
        error: hyper::Error,
    },
    /// The request was (or may have been) written.
    Sent(hyper::Error),
}

/// What `TrackedBody` needs to give an HTTP/1 connection back once the response has been read.
pub type Release = Option<hyper::client::conn::http1::SendRequest<ProxyBody>>;

async fn send(
    conn: Conn,
    request: Request<ProxyBody>,
) -> Result<(Response<Incoming>, Release), SendError> {
    let result = match conn {
        Conn::Http1 { mut tx, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response, Some(tx))),
            Err(e) => e,
        },
        Conn::Http2 { mut tx, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response, None)),
            Err(e) => e,
        },
    };
    let mut error = result;
    match error.take_message() {
        Some(request) => Err(SendError::NotSent {
            request: Box::new(request),
            error: error.into_error(),
        }),
        None => Err(SendError::Sent(error.into_error())),
    }
}

/// A client deadline from `grpc-timeout` (`<digits><unit>`, units H M S m u n).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units_parse_and_garbage_is_ignored() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&m)
        };
        assert_eq!(h("5S"), Some(Duration::from_secs(5)));
        assert_eq!(h("250m"), Some(Duration::from_millis(250)));
        assert_eq!(h("2M"), Some(Duration::from_secs(120)));
        assert_eq!(h("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(h("S"), None);
        assert_eq!(h("10x"), None);
        assert_eq!(h("1234567890S"), None);
    }
}
