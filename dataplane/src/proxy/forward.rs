//! One request's journey, as a thin driver over the attempt planner (`retry::Plan`): prepare
//! the request once, then pick an endpoint from the current routing snapshot, make a try
//! (`attempt`), record it against its endpoint, and do what the planner says: retry after its
//! back-off, or answer. Every try has one record (`super::try_record`) that holds its endpoint's
//! in-flight count and settles the try once: here when it is retried or answered without its
//! answer, with its response body when that answer goes to the client, and by itself when the
//! client goes away (the future or the body is dropped).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::header::HeaderValue;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use rand::Rng;
use tokio::time::Instant;
use tokio_util::either::Either;

use super::answer::{self, error_response};
use super::attempt::{self, Outgoing, TryResult};
use super::client_body::{ArrivingBody, Progress, RequestBody};
use super::grpc;
use super::headers::{ClientAddr, prepare_request_fields, request_host};
use super::logged::{Arrival, Facts};
use super::reply::{Kept, Reply};
use super::request::{Target, grpc_timeout};
use super::response_body::Answered;
use super::try_record::TryRecord;
use super::upgrade::{self, Tunnels};
use crate::local_answer::LocalReason;
use crate::outcome::Verdict;
use crate::poll_clock;
use crate::pool::Pool;
use crate::retry::{Answer, Clock, Next, Plan, TryReport, planner};
use crate::upstream::ProxyBody;

/// What the answer needs to know about the request beyond its head.
struct Arrived {
    received: Instant,
    /// The client's `grpc-timeout`.
    client_timeout: Option<Duration>,
    grpc_call: bool,
    /// What became of the client's body.
    progress: Arc<Progress>,
}

/// Forward one request of `client` through `pool`; a protocol upgrade becomes a tunnel on
/// `tunnels` (`super::upgrade`). Not an `async fn`: hyper boxes the future and moves it whole, so
/// it holds only what the request needs after its head is prepared (see `forward_request`).
pub fn forward(
    pool: Arc<Pool>,
    req: Request<Incoming>,
    client: &ClientAddr,
    tunnels: &Tunnels,
) -> impl Future<Output = Response<ProxyBody>> + Send + use<> {
    if upgrade::is_upgrade(&req) {
        let (client, tunnels) = (client.clone(), tunnels.clone());
        return Either::Left(Box::pin(async move {
            upgrade::forward(pool, req, &client, tunnels).await
        }));
    }
    Either::Right(forward_request(pool, req, client))
}

pin_project_lite::pin_project! {
    /// A request's future that notes, at debug, a client that went away (its connection
    /// closed, so hyper dropped the request) before it got its answer: the one case no try or
    /// answer line shows. A request the access log sampled gets its line here, or through its
    /// answer's body.
    struct ClientWaiting<F> {
        #[pin]
        answer: F,
        pool: Arc<Pool>,
        received: Instant,
        answered: bool,
        logged: Option<Box<Arrival>>,
    }

    impl<F> PinnedDrop for ClientWaiting<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if !*this.answered {
                tracing::debug!(
                    pool = this.pool.name(),
                    waited_ms = this.received.elapsed().as_millis() as u64,
                    "client left before its answer"
                );
                if let Some(arrival) = this.logged.take() {
                    arrival.write(crate::access_log::End::ClientGone);
                }
            }
        }
    }
}

impl<F: Future<Output = (Response<ProxyBody>, Facts)>> Future for ClientWaiting<F> {
    type Output = Response<ProxyBody>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response<ProxyBody>> {
        let this = self.project();
        let (response, facts) = ready!(this.answer.poll(cx));
        *this.answered = true;
        Poll::Ready(match this.logged.take() {
            Some(arrival) => arrival.answered(response, facts),
            None => response,
        })
    }
}

/// The request's head is prepared (hop-by-hop fields out, forwarding fields in) before its
/// future is made, so that future carries the prepared parts only, not the request beside them.
/// Either engine's request (`B`): hyper's, or the fast engine's (`super::fast`).
pub(super) fn forward_request<B: ArrivingBody>(
    pool: Arc<Pool>,
    req: Request<B>,
    client: &ClientAddr,
) -> impl Future<Output = Response<ProxyBody>> + Send + use<B> {
    let received = poll_clock::now();
    pool.budget().record_request(received);
    let (mut parts, body) = req.into_parts();
    let client_timeout = grpc_timeout(&parts.headers);
    let grpc_call = grpc::is_grpc(&parts.headers);
    let host = request_host(&parts.headers, &parts.uri);
    let progress = Arc::new(Progress::default());
    // The one branch a request pays while the access log is off.
    let logged = match &pool.tuning().access_log {
        Some(log) => Arrival::sampled(log, pool.name(), &parts, host.as_ref(), received, &progress),
        None => None,
    };
    prepare_request_fields(&mut parts.headers, client, host.as_ref());
    let arrived = Arrived {
        received,
        client_timeout,
        grpc_call,
        progress,
    };
    let answer = answer_request(Arc::clone(&pool), parts, body, host, arrived);
    ClientWaiting {
        answer,
        pool,
        received,
        answered: false,
        logged,
    }
}

/// Everything after the head: the body prepared, then tries until the planner answers. Says
/// how it answered beside the answer, for the access log.
async fn answer_request<B: ArrivingBody>(
    pool: Arc<Pool>,
    parts: Parts,
    body: B,
    host: Option<HeaderValue>,
    arrived: Arrived,
) -> (Response<ProxyBody>, Facts) {
    let Arrived {
        received,
        client_timeout,
        grpc_call,
        progress,
    } = arrived;
    let pool = &pool;
    let settings = pool.settings();
    let target = match Target::of(&parts, host.as_ref(), settings.http2) {
        Ok(target) => target,
        Err(message) => {
            let response = if grpc_call {
                grpc::local_answer(400, LocalReason::BadRequest, &message)
            } else {
                let reason = LocalReason::BadRequest.as_str();
                error_response(StatusCode::BAD_REQUEST, reason, &message)
            };
            pool.log_local_answer(400, LocalReason::BadRequest, 0, &message);
            let facts = Facts::local(LocalReason::BadRequest, &[]);
            return (pool.finish(response, "client_error", received), facts);
        }
    };
    let idempotent = settings.retry.idempotent(&parts.method, &parts.headers);
    let hash_key = settings
        .hash_header
        .as_ref()
        .and_then(|h| parts.headers.get(h))
        .map(|v| v.as_bytes().to_vec());

    let idle = pool.tuning().request_body_idle;
    let mut body = match RequestBody::prepare(body, idle, &progress).await {
        Ok(body) => body,
        Err((outcome, detail)) => {
            let local = planner::local_for(outcome);
            pool.log_local_answer(local.status, local.reason, 0, &detail);
            let response = answer::local(local, &detail, grpc_call);
            let facts = Facts::local(local.reason, &[]);
            return (pool.finish(response, "client_error", received), facts);
        }
    };
    let mut clock = Clock::new(
        received,
        client_timeout,
        settings.request_timeout,
        settings.per_try_timeout,
    );
    if let Some(at) = progress.completed_at() {
        clock.complete(at);
    }
    let mut plan = Plan::new(clock, idempotent);
    let outgoing = Outgoing {
        parts: &parts,
        target: &target,
        grpc: client_timeout.is_some(),
        grpc_call,
        connect_timeout: settings.connect_timeout,
        upload_idle: idle,
        raw_answer: B::RAW_ANSWERS && parts.version == http::Version::HTTP_11 && !grpc_call,
    };
    let mut kept: Option<Kept> = None;
    let mut detail = String::new();
    let reply = Reply {
        pool,
        received,
        client: &progress,
        grpc_call,
    };
    loop {
        let now = poll_clock::now();
        if let Err(answer) = plan.may_start(now) {
            return reply.respond(answer, None, kept, &detail, plan.tried());
        }
        let routing = pool.routing();
        let endpoint = match routing.pick(hash_key.as_deref(), plan.tried(), now) {
            Ok(endpoint) => endpoint,
            Err(none) => {
                if plan.first_try() {
                    detail = none.message;
                }
                let answer = plan.no_endpoint(none.answer);
                return reply.respond(answer, None, kept, &detail, plan.tried());
            }
        };
        let mut record = TryRecord::start(pool, Arc::clone(&endpoint), now);
        let result =
            attempt::run(&endpoint, &outgoing, &mut body, &progress, &mut plan.clock).await;
        // A gRPC answer whose grpc-status comes in the trailers is judged when they arrive.
        let judged_later = grpc_call && result.grpc_status_in_trailers();
        record.answered(result.outcome, result.ended, judged_later);
        let untried_left = pool.routing().has_untried(plan.tried(), endpoint.addr());
        let next = plan.after_try(
            TryReport {
                endpoint: endpoint.addr(),
                outcome: result.outcome,
                started: result.started,
                ended: result.ended,
                body_replayable: body.replayable(),
                unprocessed: grpc_call && result.grpc_unavailable(),
            },
            planner::Context {
                rules: &settings.retry,
                budget: pool.budget(),
                untried_left,
                jitter: rand::rng().random::<f64>(),
            },
        );
        // One line per try that did not get a usable answer: what an access log would show.
        if !matches!(
            result.outcome.verdict(),
            Verdict::Success | Verdict::ClientError
        ) {
            tracing::debug!(
                pool = pool.name(),
                endpoint = %endpoint.addr(),
                outcome = result.outcome.attempt_label(),
                try_ms = (result.ended - result.started).as_millis() as u64,
                request_ms = (result.ended - received).as_millis() as u64,
                next = ?next,
                "try failed"
            );
        }
        let TryResult {
            outcome,
            detail: try_detail,
            answer,
            ended,
            ..
        } = result;
        match next {
            Next::Retry {
                after,
                reason,
                keep_answer,
            } => {
                pool.count_retry(reason);
                // The answer (if any) is not passed on: the try ends here.
                record.finish(outcome, &try_detail, ended);
                if keep_answer && let Some((response, release)) = answer {
                    kept = Some(Kept {
                        response,
                        release,
                        endpoint: Arc::clone(&endpoint),
                        answered_at: ended,
                    });
                }
                note_detail(&mut detail, try_detail);
                if !after.is_zero() {
                    tokio::time::sleep(after).await;
                }
            }
            Next::Answer(Answer::ThisTry) => {
                let this = match answer {
                    // The try ends with its answer's body.
                    Some((response, release)) => Some((
                        Answered {
                            response,
                            release,
                            endpoint,
                            record: Some(record),
                            client: Arc::clone(&progress),
                        },
                        ended,
                    )),
                    None => {
                        record.finish(outcome, &try_detail, ended);
                        None
                    }
                };
                note_detail(&mut detail, try_detail);
                return reply.respond(Answer::ThisTry, this, kept, &detail, plan.tried());
            }
            Next::Answer(other) => {
                record.finish(outcome, &try_detail, ended);
                note_detail(&mut detail, try_detail);
                return reply.respond(other, None, kept, &detail, plan.tried());
            }
        }
    }
}

/// The request's detail for a local answer is the last try's that said something.
fn note_detail(detail: &mut String, try_detail: String) {
    if !try_detail.is_empty() {
        *detail = try_detail;
    }
}
