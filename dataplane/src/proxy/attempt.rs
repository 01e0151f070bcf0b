//! One try of one request on one endpoint: get a connection, send, and say how it ended as an
//! [`Outcome`], racing the try's clocks (`retry::Clock`). The clocks of a streamed upload start
//! only once the client has sent it all, so the try waits for that before its allowance runs;
//! a deadline (the client's, or what is left of ours) can cut the try at any time, and that cut
//! is told apart from the try using up its own allowance. A failure whose cause is on the
//! client's side (its body broke or stalled) or ours (we closed the connection) is named so.

use std::time::Duration;

use http::Response;
use tokio::time::Instant;

use super::client_body::{Progress, RequestBody};
use super::grpc;
use super::request::{Target, build_request};
use crate::outcome::Outcome;
use crate::poll_clock;
use crate::pool::Endpoint;
use crate::retry::Clock;
use crate::upstream::{self, Conn, ConnectError, EndpointBody, Release, SendError, plain_head};
use futures_util::future::Either;

/// The request as every try sends it.
pub(super) struct Outgoing<'a> {
    pub parts: &'a http::request::Parts,
    pub target: &'a Target,
    /// The client sent `grpc-timeout`: each try carries what is left of it.
    pub grpc: bool,
    /// A gRPC call: a `grpc-status` in the response headers is the answer's real status.
    pub grpc_call: bool,
    pub connect_timeout: Duration,
    /// How long a streamed upload may sit untaken by the endpoint (the request-body idle
    /// timeout, applied to the other side).
    pub upload_idle: Duration,
    /// The client's connection writes an answer's head itself from the endpoint's bytes (the
    /// fast engine's, to an HTTP/1.1 client) and nothing on the way reads the answer's fields
    /// (not a gRPC call): an answer on the sidecar's own connection may come without a field
    /// map (`upstream::RawAnswer`).
    pub raw_answer: bool,
}

/// How one try went.
pub(super) struct TryResult {
    pub outcome: Outcome,
    /// What went wrong, in words (empty for an answer).
    pub detail: String,
    pub answer: Option<(Response<EndpointBody>, Release)>,
    pub started: Instant,
    pub ended: Instant,
}

impl TryResult {
    /// A 200 answer to a gRPC call with no `grpc-status` in its headers: the outcome is in the
    /// trailers still to come.
    pub fn grpc_status_in_trailers(&self) -> bool {
        matches!(self.outcome, Outcome::Answered(200))
            && self
                .answer
                .as_ref()
                .is_some_and(|(response, _)| grpc::status(response.headers()).is_none())
    }

    /// A trailers-only `UNAVAILABLE` to a gRPC call: the server refused it before producing
    /// anything, which gRPC treats as safe to retry.
    pub fn grpc_unavailable(&self) -> bool {
        self.answer.as_ref().is_some_and(|(response, _)| {
            grpc::status(response.headers()) == Some(grpc::Code::Unavailable)
        })
    }
}

/// Make one try on `endpoint`.
pub(super) async fn run(
    endpoint: &Endpoint,
    outgoing: &Outgoing<'_>,
    body: &mut RequestBody,
    progress: &Progress,
    clock: &mut Clock,
) -> TryResult {
    let started = poll_clock::now();
    let (outcome, detail, answer) =
        attempt(endpoint, outgoing, body, progress, clock, started).await;
    if let Some(at) = progress.completed_at() {
        clock.complete(at);
    }
    TryResult {
        outcome,
        detail,
        answer,
        started,
        ended: poll_clock::now(),
    }
}

type Ended = (Outcome, String, Option<(Response<EndpointBody>, Release)>);

async fn attempt(
    endpoint: &Endpoint,
    outgoing: &Outgoing<'_>,
    body: &mut RequestBody,
    progress: &Progress,
    clock: &mut Clock,
    started: Instant,
) -> Ended {
    let connect = endpoint.upstream.acquire(outgoing.connect_timeout);
    let connected = match clock.deadline() {
        Some(deadline) => match tokio::time::timeout_at(deadline, connect).await {
            Ok(connected) => connected,
            Err(_) => {
                return (
                    Outcome::DeadlineCut,
                    "the deadline passed while connecting".into(),
                    None,
                );
            }
        },
        None => connect.await,
    };
    let conn = match connected {
        Ok(conn) => conn,
        Err(error @ ConnectError::Closed { .. }) => {
            return (Outcome::ClosedLocally, error.to_string(), None);
        }
        Err(error) => return (Outcome::ConnectFailed, error.to_string(), None),
    };
    let Some(request_body) = body.take() else {
        // Unreachable by the retry rules (a streamed body is never sent twice); say so.
        return (
            Outcome::ClosedLocally,
            "the request body already left with an earlier try".into(),
            None,
        );
    };
    let http2 = matches!(conn, Conn::Http2 { .. });
    let grpc_left = outgoing
        .grpc
        .then(|| clock.window(started).ends())
        .flatten()
        .map(|(at, _)| at.saturating_duration_since(poll_clock::now()));
    progress.sending();
    // The sidecar's own connection writes a request that needs no framing edits straight from
    // the parts (no copy of the field map per try); anything else is built as hyper takes it.
    let plain = match &conn {
        Conn::Direct { .. } if grpc_left.is_none() => plain_head(outgoing.parts, &request_body),
        _ => None,
    };
    let sending = match (conn, plain) {
        (Conn::Direct { conn, reused }, Some(plain)) => Either::Left(upstream::send_plain(
            conn,
            reused,
            outgoing.parts,
            outgoing.target.origin(),
            request_body,
            plain,
            outgoing.raw_answer,
        )),
        (conn, _) => {
            let request = build_request(
                outgoing.parts,
                outgoing.target,
                request_body,
                http2,
                grpc_left,
            );
            Either::Right(upstream::send(conn, request))
        }
    };
    tokio::pin!(sending);
    loop {
        let ends = clock.window(started).ends();
        let timer = async {
            match ends {
                Some((at, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let stall = progress.endpoint_stall_at(outgoing.upload_idle);
        let stalled = async {
            match stall {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            sent = &mut sending => return classify(sent, outgoing.grpc_call, endpoint, body, progress),
            () = timer => {
                return match ends {
                    Some((_, true)) => (
                        Outcome::TimedOut,
                        format!(
                            "no answer within {}",
                            humantime::format_duration(clock.allowance())
                        ),
                        None,
                    ),
                    _ => (
                        Outcome::DeadlineCut,
                        "the deadline passed before the endpoint answered".into(),
                        None,
                    ),
                };
            }
            at = progress.completed(), if !clock.is_complete() => clock.complete(at),
            // The endpoint stopped taking the upload (hyper stopped asking for it): its stall.
            () = stalled, if !clock.is_complete() => {
                // The clock itself, not this poll's reading: on a multi-thread runtime the
                // timer can fire on another thread after this poll read the time.
                if progress
                    .endpoint_stall_at(outgoing.upload_idle)
                    .is_some_and(|at| at <= Instant::now())
                {
                    return (
                        Outcome::TimedOut,
                        format!(
                            "the endpoint took none of the request body for {}",
                            humantime::format_duration(outgoing.upload_idle)
                        ),
                        None,
                    );
                }
            }
        }
    }
}

fn classify(
    sent: Result<(Response<EndpointBody>, Release), SendError>,
    grpc_call: bool,
    endpoint: &Endpoint,
    body: &mut RequestBody,
    progress: &Progress,
) -> Ended {
    match sent {
        Ok((response, release)) => {
            // Trailers-only: the call's outcome is here already.
            let grpc_code = grpc_call
                .then(|| grpc::status(response.headers()))
                .flatten();
            let status = grpc_code.map_or(response.status().as_u16(), grpc::http_equivalent);
            (
                Outcome::Answered(status),
                String::new(),
                Some((response, release)),
            )
        }
        Err(SendError::NotSent {
            body: unsent,
            error,
        }) => {
            // Nothing reached the endpoint: the body is whole again.
            body.restore(unsent);
            tracing::debug!(endpoint = %endpoint.addr(), %error, "pooled connection was dead before writing");
            (Outcome::DeadPooledConnection, error.to_string(), None)
        }
        Err(SendError::Sent { error, malformed }) => {
            let outcome = if let Some(fault) = progress.fault() {
                fault
            } else if endpoint.upstream.closed_locally() {
                Outcome::ClosedLocally
            } else if malformed {
                Outcome::ProtocolError
            } else {
                Outcome::Reset
            };
            (outcome, error.to_string(), None)
        }
    }
}
