//! HTTP/1.1 Upgrade end to end (WebSocket, and any other protocol a client switches to): the
//! request goes to one endpoint on a connection of its own, and when the endpoint agrees
//! (`101 Switching Protocols`), both sides are joined into a byte tunnel that lives until either
//! side closes or it moves no byte for `--tunnel-idle-timeout`. Each try has its record
//! (`super::try_record`), settled at the handshake's answer or failure like any request's; the
//! tunnel then holds the endpoint's in-flight count for as long as it is open, is counted once
//! in the request metrics, and at shutdown gets the listener's grace period, then is closed
//! (`Tunnels`). A connect failure is tried on another endpoint (nothing was sent), following
//! the pool's retry rules and budget like any request's (`retryOn: connect-failure`,
//! `attempts`); once sent, an upgrade is never retried. An endpoint that declines (any status
//! but 101) is answered as usual. A WebSocket over HTTP/2 (an extended CONNECT) takes the same
//! path, translated to and from HTTP/1.1 by `super::websocket_h2`.

use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::answer;
use super::client_body::Progress;
use super::headers::{ClientAddr, add_forwarded, strip_hop_by_hop};
use super::logged::{Arrival, Facts};
use super::reply::status_label;
use super::try_record::TryRecord;
use super::tunnel_idle::Activity;
use super::websocket_h2;
use crate::local_answer::LocalReason;
use crate::outcome::Outcome;
use crate::pool::Pool;
use crate::retry::{Decision, LocalAnswer, RequestFacts, RetryReason, RetryRules};
use crate::upstream::ProxyBody;

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
                return local_answer(
                    &pool,
                    (501, LocalReason::UnsupportedProtocol),
                    &refusal,
                    &[],
                    received,
                    logged,
                );
            }
        }
    } else {
        None
    };
    strip_all_but_upgrade(&mut parts.headers);
    add_forwarded(&mut parts.headers, client, host.as_ref());
    let mut unsent = Some(Request::from_parts(
        parts,
        body.map_err(Into::into).boxed_unsync(),
    ));
    let mut tried = Vec::new();
    let mut detail = String::new();
    for _ in 0..settings.retry.attempts {
        let now = Instant::now();
        let routing = pool.routing();
        let endpoint = match routing.pick(None, &tried, now) {
            Ok(endpoint) => endpoint,
            Err(none) => {
                if tried.is_empty() {
                    detail = none.message;
                }
                break;
            }
        };
        tried.push(endpoint.addr);
        // The try's record: in flight from the connect on, settled once however it ends.
        let mut record = TryRecord::start(&pool, Arc::clone(&endpoint), now);
        let (mut tx, closing) = match endpoint
            .upstream
            .open_for_upgrade(settings.connect_timeout)
            .await
        {
            Ok(opened) => opened,
            Err(error) => {
                detail = error.to_string();
                record.finish(Outcome::ConnectFailed, &detail, Instant::now());
                // Nothing was sent: another endpoint may be tried, by the pool's rules
                // (`retryOn`, attempts) and within its retry budget, as any request's retry.
                if may_retry_connect_failure(&pool, &settings.retry, tried.len()) {
                    continue;
                }
                break;
            }
        };
        let Some(request) = unsent.take() else { break };
        // The handshake gets one try's allowance, like any request: an endpoint that accepts
        // and never answers must not hold the client (and the in-flight count) forever.
        let allowance = settings.per_try_timeout;
        let sent = tokio::time::timeout(allowance, tx.send_request(request)).await;
        let (outcome, failure) = match &sent {
            Ok(Ok(response)) => (Outcome::Answered(response.status().as_u16()), None),
            Ok(Err(error)) => (
                Outcome::Reset,
                Some((502, LocalReason::UpstreamReset, error.to_string())),
            ),
            Err(_) => (
                Outcome::TimedOut,
                Some((
                    504,
                    LocalReason::UpstreamTimeout,
                    format!("no answer within {}", humantime::format_duration(allowance)),
                )),
            ),
        };
        record.answered(outcome, Instant::now(), false);
        let mut response = match (sent, failure) {
            (Ok(Ok(response)), _) => response,
            (_, failure) => {
                let (status, reason, detail) =
                    failure.unwrap_or((502, LocalReason::UpstreamReset, String::new()));
                record.finish_as_it_stands(&detail);
                return local_answer(&pool, (status, reason), &detail, &tried, received, logged);
            }
        };
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
                        endpoint: Some(endpoint.addr),
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
                    let failed = (502, LocalReason::UpstreamProtocolError);
                    return local_answer(&pool, failed, &error, &tried, received, logged);
                }
            }
            None => strip_all_but_upgrade(&mut head.headers),
        }
        // The try ends at its 101 (its latency is the handshake's); the tunnel then holds the
        // endpoint's in-flight count for as long as it is open.
        record.finish_as_it_stands("");
        let open_tunnel = endpoint.load.start();
        let addr = endpoint.addr;
        let pool_name = pool.name().to_owned();
        let cut = tunnels.cut.clone();
        let idle_limit = pool.tuning().tunnel_idle;
        tunnels.tracker.spawn(async move {
            let (client_io, endpoint_io) = match tokio::try_join!(client_side, endpoint_side) {
                Ok(both) => both,
                Err(error) => {
                    tracing::debug!(pool = %pool_name, endpoint = %addr, %error, "upgrade did not complete");
                    drop(open_tunnel);
                    if let Some(arrival) = logged {
                        arrival.tunnel_closed(addr, tries, answered_at, (0, 0));
                    }
                    return;
                }
            };
            let activity = Activity::new();
            let mut client_io = activity.track(TokioIo::new(client_io));
            let mut endpoint_io = activity.track(TokioIo::new(endpoint_io));
            tokio::select! {
                result = tokio::io::copy_bidirectional(&mut client_io, &mut endpoint_io) => {
                    if let Err(error) = result {
                        tracing::debug!(pool = %pool_name, endpoint = %addr, %error, "tunnel ended with an error");
                    }
                }
                () = cut.cancelled() => {
                    tracing::info!(pool = %pool_name, endpoint = %addr, "grace period over: closing a tunnel");
                }
                () = closing.cancelled() => {
                    tracing::info!(pool = %pool_name, endpoint = %addr, "endpoint closed: closing its tunnel");
                }
                () = activity.idle_for(idle_limit) => {
                    tracing::debug!(pool = %pool_name, endpoint = %addr, limit = ?idle_limit, "tunnel idle: closing it");
                }
            }
            drop(open_tunnel);
            if let Some(arrival) = logged {
                let bytes = (client_io.bytes_read(), endpoint_io.bytes_read());
                arrival.tunnel_closed(addr, tries, answered_at, bytes);
            }
        });
        let empty = http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        return pool.finish(Response::from_parts(head, empty), "success", received);
    }
    let none = if tried.is_empty() {
        (503, LocalReason::NoHealthyEndpoints)
    } else {
        (502, LocalReason::UpstreamConnectFailure)
    };
    local_answer(&pool, none, &detail, &tried, received, logged)
}

/// Whether an upgrade whose `tries`-th try could not connect may try another endpoint: the
/// pool's retry rules say so for a connect failure, and its retry budget has one to spend
/// (counted in `rollcall_retries_total` when it does).
fn may_retry_connect_failure(pool: &Pool, rules: &RetryRules, tries: usize) -> bool {
    let facts = RequestFacts {
        // An upgrade is a GET, and nothing of it reached the endpoint.
        idempotent: true,
        body_replayable: true,
        tries: u32::try_from(tries).unwrap_or(u32::MAX),
    };
    if rules.decide(Outcome::ConnectFailed, facts) != Decision::Retry
        || !pool.budget().try_retry(Instant::now())
    {
        return false;
    }
    pool.count_retry(RetryReason::ConnectFailure);
    true
}

/// The sidecar's own answer to an upgrade (`status`, `reason`) after `tried`, counted as the
/// request's end and given its access log line when sampled.
fn local_answer(
    pool: &Pool,
    (status, reason): (u16, LocalReason),
    detail: &str,
    tried: &[SocketAddr],
    received: Instant,
    logged: Option<Box<Arrival>>,
) -> Response<ProxyBody> {
    let local = LocalAnswer { status, reason };
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
