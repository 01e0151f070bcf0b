//! HTTP/1.1 Upgrade end to end (WebSocket, and any other protocol a client switches to): the
//! request goes to one endpoint on a connection of its own, and when the endpoint agrees
//! (`101 Switching Protocols`), both sides are joined into a byte tunnel (`super::tunnel`). The
//! handshake's tries are planned by the request planner (`crate::retry::Plan`) like any
//! request's: the request deadline, back-off, retry budget, `retryOn` and never the same
//! endpoint twice. A connect failure may go elsewhere (nothing was sent); once sent, an upgrade is
//! never retried (`Plan::last_try`). Each try has its record (`super::try_record`), settled at
//! the handshake's answer or failure; the tunnel then holds the endpoint's in-flight count for as
//! long as it is open, is counted once in the request metrics, and at shutdown gets the
//! listener's grace period, then is closed (`Tunnels`). An endpoint that declines (any status but
//! 101) is answered as usual. A WebSocket over HTTP/2 (an extended CONNECT) takes the same path,
//! translated to and from HTTP/1.1 by `super::websocket_h2`.

use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::answer;
use super::client_body::Progress;
use super::headers::{ClientAddr, add_forwarded, strip_hop_by_hop};
use super::logged::{Arrival, Facts};
use super::reply::status_label;
use super::try_record::TryRecord;
use super::tunnel::Tunnel;
use super::websocket_h2;
use crate::local_answer::LocalReason;
use crate::outcome::Outcome;
use crate::pool::{Endpoint, Pool, PoolSettings};
use crate::retry::planner::TryWindow;
use crate::retry::{Answer, Clock, LocalAnswer, Next, Plan, TryReport, planner};
use crate::upstream::{ConnectError, ProxyBody};

/// Where tunnels run: tracked with the listener's connections, so a stop waits for them within
/// its grace period, and `cut` closes what is left after it.
#[derive(Clone, Debug)]
pub struct Tunnels {
    pub tracker: TaskTracker,
    pub cut: CancellationToken,
}

/// Whether a request asks to switch protocols: `Connection: upgrade` and an `Upgrade` header
/// on HTTP/1.1, or an HTTP/2 extended CONNECT (RFC 8441).
pub(super) fn is_upgrade<B>(req: &Request<B>) -> bool {
    websocket_h2::is_extended_connect(req) || is_http1_upgrade(req)
}

fn is_http1_upgrade<B>(req: &Request<B>) -> bool {
    req.version() == http::Version::HTTP_11
        && req.headers().contains_key(header::UPGRADE)
        && req
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
}

/// Remove the hop-by-hop fields but the two that make the switch: `Upgrade` as it was, and
/// `Connection: upgrade`.
fn strip_all_but_upgrade(headers: &mut http::HeaderMap) {
    let protocol = headers.get(header::UPGRADE).cloned();
    strip_hop_by_hop(headers);
    if let Some(protocol) = protocol {
        headers.insert(header::UPGRADE, protocol);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// Forward an upgrade request through `pool` and, on `101`, run the tunnel on `tunnels`.
pub(super) async fn forward(
    pool: Arc<Pool>,
    mut req: Request<Incoming>,
    client: &ClientAddr,
    tunnels: Tunnels,
) -> Response<ProxyBody> {
    let received = Instant::now();
    // An upgrade is a request for the retry budget's ratio, as any other.
    pool.budget().record_request(received);
    let settings = pool.settings();
    let over_h2 = websocket_h2::is_extended_connect(&req);
    let client_side = hyper::upgrade::on(&mut req);
    let (mut parts, body) = req.into_parts();
    let host = parts.headers.get(header::HOST).cloned();
    // A sampled upgrade's access log line: at its own answer, or when its tunnel closes.
    let logged = match &pool.tuning().access_log {
        Some(log) => {
            // A tunnel's bytes are counted by the tunnel, not as a request body.
            let progress = Arc::new(Progress::default());
            Arrival::sampled(log, pool.name(), &parts, host.as_ref(), received, &progress)
        }
        None => None,
    };
    // The key the endpoint's handshake must answer, for a WebSocket that came over HTTP/2.
    let h2_key = if over_h2 {
        match websocket_h2::to_http1(&mut parts, rand::random()) {
            Ok(key) => Some(key),
            Err(refusal) => {
                let refused = LocalAnswer {
                    status: 501,
                    reason: LocalReason::UnsupportedProtocol,
                };
                return local_answer(&pool, refused, &refusal, &[], received, logged);
            }
        }
    } else {
        None
    };
    strip_all_but_upgrade(&mut parts.headers);
    add_forwarded(&mut parts.headers, client, host.as_ref());
    let request = Request::from_parts(parts, body.map_err(Into::into).boxed_unsync());
    // The planner runs the upgrade's tries as any request's: its deadline, back-off, retry
    // budget and `retryOn`, never the same endpoint twice. An upgrade has no body before the
    // switch, so its clocks start at once.
    let mut clock = Clock::new(
        received,
        None,
        settings.request_timeout,
        settings.per_try_timeout,
    );
    clock.complete(received);
    let mut plan = Plan::new(clock, true);
    let mut detail = String::new();
    let handshook = handshake(&pool, &settings, request, &mut plan, &mut detail).await;
    let Handshook {
        endpoint,
        record,
        mut response,
        closing,
    } = match handshook {
        Ok(handshook) => handshook,
        Err(local) => return local_answer(&pool, local, &detail, plan.tried(), received, logged),
    };
    let tried = plan.tried();
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        // Declined: an ordinary answer on a connection nobody reuses.
        let status = response.status().as_u16();
        let ended = Instant::now();
        record.finish_as_it_stands("");
        let (parts, body) = response.into_parts();
        let body = body.map_err(Into::into).boxed_unsync();
        let response = pool.finish(
            Response::from_parts(parts, body),
            status_label(status),
            received,
        );
        return match logged {
            Some(arrival) => {
                let facts = Facts {
                    reason: None,
                    endpoint: Some(endpoint.addr()),
                    tries: tried.len(),
                    first_byte: Some(ended),
                };
                arrival.answered(response, facts)
            }
            None => response,
        };
    }
    let answered_at = Instant::now();
    let tries = tried.len();
    let endpoint_side = hyper::upgrade::on(&mut response);
    let (mut head, _) = response.into_parts();
    match &h2_key {
        Some(key) => {
            if let Err(error) = websocket_h2::to_h2_response(&mut head, key) {
                // Agreed to switch, but not to our handshake: not a tunnel to join.
                record.finish(Outcome::ProtocolError, &error, Instant::now());
                let failed = planner::local_for(Outcome::ProtocolError);
                return local_answer(&pool, failed, &error, tried, received, logged);
            }
        }
        None => strip_all_but_upgrade(&mut head.headers),
    }
    // The try ends at its 101 (its latency is the handshake's); the tunnel then holds the
    // endpoint's in-flight count for as long as it is open.
    record.finish_as_it_stands("");
    let open_tunnel = endpoint.start();
    let tunnel = Tunnel {
        pool_name: pool.name().to_owned(),
        addr: endpoint.addr(),
        tries,
        answered_at,
        idle_limit: pool.tuning().tunnel_idle,
        cut: tunnels.cut.clone(),
        closing,
        open: open_tunnel,
        logged,
    };
    tunnels
        .tracker
        .spawn(tunnel.run(client_side, endpoint_side));
    let empty = http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    pool.finish(Response::from_parts(head, empty), "success", received)
}

/// An endpoint that answered the handshake, and the try's record, still open.
struct Handshook {
    endpoint: Arc<Endpoint>,
    record: TryRecord,
    response: Response<Incoming>,
    /// Fires when the endpoint's connections are closed.
    closing: CancellationToken,
}

/// A connection opened for the upgrade, nothing sent on it yet.
struct Opened {
    endpoint: Arc<Endpoint>,
    record: TryRecord,
    tx: SendRequest<ProxyBody>,
    closing: CancellationToken,
    window: TryWindow,
}

/// Send the upgrade `request` to an endpoint, trying others as `plan` allows while nothing was
/// sent. `Err` is the sidecar's own answer; `detail` says why in words.
async fn handshake(
    pool: &Arc<Pool>,
    settings: &PoolSettings,
    request: Request<ProxyBody>,
    plan: &mut Plan,
    detail: &mut String,
) -> Result<Handshook, LocalAnswer> {
    let Opened {
        endpoint,
        mut record,
        mut tx,
        closing,
        window,
    } = open(pool, settings, plan, detail).await?;
    // The handshake gets one try's allowance, cut short by the request's deadline: an
    // endpoint that accepts and never answers must not hold the client (and the in-flight
    // count) forever.
    let ends = window.ends();
    let sent = within(ends.map(|(at, _)| at), tx.send_request(request)).await;
    let ended = Instant::now();
    let outcome = match &sent {
        Some(Ok(response)) => Outcome::Answered(response.status().as_u16()),
        Some(Err(error)) => {
            *detail = error.to_string();
            if error.is_parse() || error.is_parse_status() {
                Outcome::ProtocolError
            } else {
                Outcome::Reset
            }
        }
        None if matches!(ends, Some((_, true))) => {
            let allowance = humantime::format_duration(plan.clock.allowance());
            *detail = format!("no answer within {allowance}");
            Outcome::TimedOut
        }
        None => {
            *detail = "the deadline passed before the endpoint answered".to_owned();
            Outcome::DeadlineCut
        }
    };
    record.answered(outcome, ended, false);
    // Once sent, an upgrade is never tried again: its stream is the request's own.
    let answer = plan.last_try(endpoint.addr(), outcome);
    match (sent, answer) {
        (Some(Ok(response)), Answer::ThisTry) => Ok(Handshook {
            endpoint,
            record,
            response,
            closing,
        }),
        (_, answer) => {
            record.finish_as_it_stands(detail);
            Err(planned_local(answer, outcome))
        }
    }
}

/// Open a connection for the upgrade on an endpoint `plan` allows, trying others while connects
/// fail as the pool's retry rules say. `Err` is the sidecar's own answer; `detail` says why.
async fn open(
    pool: &Arc<Pool>,
    settings: &PoolSettings,
    plan: &mut Plan,
    detail: &mut String,
) -> Result<Opened, LocalAnswer> {
    loop {
        let now = Instant::now();
        if let Err(answer) = plan.may_start(now) {
            return Err(planned_local(answer, Outcome::DeadlineCut));
        }
        let routing = pool.routing();
        let endpoint = match routing.pick(None, plan.tried(), now) {
            Ok(endpoint) => endpoint,
            Err(none) => {
                if plan.first_try() {
                    *detail = none.message;
                }
                let local = planned_local(plan.no_endpoint(none.answer), Outcome::ConnectFailed);
                return Err(local);
            }
        };
        // The try's record: in flight from the connect on, settled once however it ends.
        let record = TryRecord::start(pool, Arc::clone(&endpoint), now);
        let window = plan.clock.window(now);
        let opening = endpoint.upstream.open_for_upgrade(settings.connect_timeout);
        let (tx, closing) = match within(window.deadline, opening).await {
            Some(Ok(opened)) => opened,
            failed => {
                let (outcome, what) = match failed {
                    Some(Err(error @ ConnectError::Closed { .. })) => {
                        (Outcome::ClosedLocally, error.to_string())
                    }
                    Some(Err(error)) => (Outcome::ConnectFailed, error.to_string()),
                    _ => (
                        Outcome::DeadlineCut,
                        "the deadline passed while connecting".to_owned(),
                    ),
                };
                let ended = Instant::now();
                record.finish(outcome, &what, ended);
                *detail = what;
                // Nothing was sent: the planner may send it elsewhere after its back-off.
                let report = TryReport {
                    endpoint: endpoint.addr(),
                    outcome,
                    started: now,
                    ended,
                    body_replayable: true,
                    unprocessed: false,
                };
                let untried_left = pool.routing().has_untried(plan.tried(), endpoint.addr());
                let cx = planner::Context {
                    rules: &settings.retry,
                    budget: pool.budget(),
                    untried_left,
                    jitter: rand::random::<f64>(),
                };
                match plan.after_try(report, cx) {
                    Next::Retry { after, reason, .. } => {
                        pool.count_retry(reason);
                        tokio::time::sleep(after).await;
                        continue;
                    }
                    Next::Answer(answer) => {
                        return Err(planned_local(answer, outcome));
                    }
                }
            }
        };
        // The try's record stays open: the handshake sent next is its try.
        return Ok(Opened {
            endpoint,
            record,
            tx,
            closing,
            window,
        });
    }
}

/// `work`, or `None` when `deadline` passes first.
async fn within<F: Future>(deadline: Option<Instant>, work: F) -> Option<F::Output> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at, work).await.ok(),
        None => Some(work.await),
    }
}

/// The sidecar's own answer the planner chose; an upgrade never keeps an endpoint's answer to
/// fall back on, so anything else is the try's own failure (`outcome`).
fn planned_local(answer: Answer, outcome: Outcome) -> LocalAnswer {
    match answer {
        Answer::Local(local) => local,
        Answer::ThisTry | Answer::Kept => planner::local_for(outcome),
    }
}

/// The sidecar's own answer to an upgrade (`local`) after `tried`, counted as the
/// request's end and given its access log line when sampled.
fn local_answer(
    pool: &Pool,
    local: LocalAnswer,
    detail: &str,
    tried: &[SocketAddr],
    received: Instant,
    logged: Option<Box<Arrival>>,
) -> Response<ProxyBody> {
    let LocalAnswer { status, reason } = local;
    pool.log_local_answer(status, reason, tried.len(), detail);
    let response = pool.finish(
        answer::local(local, detail, false),
        local.request_label(),
        received,
    );
    match logged {
        Some(arrival) => arrival.answered(response, Facts::local(reason, tried)),
        None => response,
    }
}
