//! One request's journey: pick an endpoint, get a connection, send, classify what came back,
//! and decide (through `retry`) whether to try again elsewhere. Every try is recorded against
//! its endpoint, even when a retry then succeeds. The in-flight count of an endpoint is held by
//! a guard that travels with the response body, so it is released on every path: success,
//! failure, timeout, and the client going away (the future is dropped).

use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::time::Instant;

use super::body::{TrackedBody, error_response};
use super::headers::{add_forwarded, strip_hop_by_hop};
use super::request::{RequestBody, SendError, build_request, grpc_timeout, prepare_body, send};
use super::upstream::ProxyBody;
use crate::balance::{self, InFlight};
use crate::pool::{AttemptOutcome, Endpoint, Pool};
use crate::retry::{Decision, Failure, RequestFacts};

/// Tries on a fresh connection after a pooled one was found dead before writing.
const MAX_FREE_RETRIES: u32 = 3;

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
                        // The answer is dropped for a retry: count it in the balancer's error
                        // rate as the response body would have.
                        let now = Instant::now();
                        guard.finish(balance::Outcome::Failure, now - try_started, now);
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
