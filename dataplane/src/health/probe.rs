//! Active probes: one task per endpoint, so a black-holed endpoint delays no other. Each probe
//! has a real timeout; intervals carry random jitter so a fleet of sidecars does not probe in
//! lock-step; the first probe goes out at once (after a little jitter) so `Unknown` resolves
//! fast. While a verdict is in the making (failures not yet `unhealthyThreshold` in a row, or
//! successes after a failure not yet `healthyThreshold`) the next probe goes out after a quarter
//! of the interval, as HAProxy's `fastinter` does: a fault is confirmed, and a recovery proven,
//! in a fraction of the time; a stable endpoint, up or down, is probed at the interval.
//! TCP probes connect and close; HTTP probes open a fresh connection (h2c for pools that speak
//! HTTP/2) and `GET` the path, expecting a status in range; gRPC probes call
//! `grpc.health.v1.Health/Check` over h2c and expect SERVING. The task knows nothing of pools: it reads the current check from
//! a watch channel and hands each result to `report`, which says whether anyone still listens.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message as _;
use rand::Rng;
use rollcall_api::policy::{HealthCheck, HealthCheckType};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::grpc_status::{self as grpc, Code};

/// When a probe task's first probe goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstProbe {
    /// Almost at once (a little jitter): a new endpoint's `Unknown` resolves fast.
    Soon,
    /// At a random moment within one interval: a whole pool's probes starting together (a
    /// sidecar falling back to probing everything itself, as every sidecar of the fleet does
    /// when the controller goes) are spread out instead of reaching every backend at once.
    Spread,
}

/// Probe `addr` with the check `settings` holds now, until `report` returns `false` or the
/// settings go away. `report(ok, detail)` gets every result.
pub async fn run(
    addr: SocketAddr,
    mut settings: watch::Receiver<ProbeSpec>,
    start: FirstProbe,
    mut report: impl FnMut(bool, String) -> bool,
) {
    let mut first = true;
    let mut start = start;
    let mut streak = Streak::default();
    loop {
        let spec = settings.borrow_and_update().clone();
        let check = &spec.check;
        if check.kind == HealthCheckType::None {
            // Probes are off: wait for a reload that turns them on.
            if settings.changed().await.is_err() {
                return;
            }
            first = true;
            // Turned back on by a reload: as soon as possible.
            start = FirstProbe::Soon;
            streak = Streak::default();
            continue;
        }
        let wait = if first && start == FirstProbe::Spread {
            check
                .interval
                .get()
                .mul_f64(rand::rng().random_range(0.0..1.0))
        } else if first {
            jitter(Duration::from_millis(100), check.jitter.fraction().max(0.5))
        } else {
            jitter(streak.interval(check), check.jitter.fraction())
        };
        first = false;
        tokio::time::sleep(wait).await;
        // Boxed: the probe's state (an HTTP/2 or gRPC exchange) exists only while it runs,
        // instead of sizing every endpoint's waiting task for it.
        let (ok, detail) = match Box::pin(probe(addr, &spec)).await {
            Ok(()) => (true, String::new()),
            Err(detail) => (false, detail),
        };
        streak.record(ok);
        if !report(ok, detail) {
            return;
        }
    }
}

/// The run of equal results so far, for the interval until the next probe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Streak {
    /// Consecutive failures (0 after a success).
    failures: u32,
    /// Consecutive successes since the last failure; `None` before any failure.
    recovering: Option<u32>,
}

/// The fast interval is this fraction of the interval.
const FAST_DIVISOR: u32 = 4;

impl Streak {
    fn record(&mut self, ok: bool) {
        if ok {
            self.failures = 0;
            if let Some(n) = &mut self.recovering {
                *n = n.saturating_add(1);
            }
        } else {
            self.failures = self.failures.saturating_add(1);
            self.recovering = Some(0);
        }
    }

    /// The interval, or a quarter of it while a change of verdict is being confirmed.
    fn interval(self, check: &HealthCheck) -> Duration {
        let confirming_fault = self.failures > 0 && self.failures < check.unhealthy_threshold;
        let confirming_recovery =
            self.failures == 0 && self.recovering.is_some_and(|n| n < check.healthy_threshold);
        let interval = check.interval.get();
        if confirming_fault || confirming_recovery {
            interval / FAST_DIVISOR
        } else {
            interval
        }
    }
}

/// `base` plus up to `fraction` of it at random.
fn jitter(base: Duration, fraction: f64) -> Duration {
    if fraction <= 0.0 {
        return base;
    }
    base + base.mul_f64(rand::rng().random_range(0.0..fraction.min(1.0)))
}

/// What a probe task probes with: the pool's check, and whether the pool speaks HTTP/2 to its
/// endpoints (then HTTP checks go over h2c too, as the traffic does).
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSpec {
    pub check: HealthCheck,
    pub http2: bool,
}

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// The most of an HTTP/2 probe's response body that is read (a gRPC health answer is a few
/// bytes; an HTTP one is not looked at, only its status).
const MAX_PROBE_BODY: usize = 64 * 1024;

/// `HealthCheckResponse.ServingStatus.SERVING`.
const SERVING: i32 = 1;

/// One probe; `Err` says what failed, in words fit for a status field.
pub async fn probe(addr: SocketAddr, spec: &ProbeSpec) -> Result<(), String> {
    let check = &spec.check;
    let timeout = check.timeout.get();
    let work = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("probe connect failed: {e}"))?;
        match check.kind {
            HealthCheckType::Http if spec.http2 => {
                let request = http_request(addr, check)?;
                let status = send_h2(stream, request).await?.status().as_u16();
                expect_status(check, status)
            }
            HealthCheckType::Http => {
                let request = http_request(addr, check)?;
                let status = send_h1(stream, request).await?;
                expect_status(check, status)
            }
            HealthCheckType::Grpc => grpc_check(stream, addr, &check.grpc_service).await,
            HealthCheckType::Tcp | HealthCheckType::None => Ok(()),
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(format!("probe timed out after {}", check.timeout)),
    }
}

fn http_request(
    addr: SocketAddr,
    check: &HealthCheck,
) -> Result<http::Request<Full<Bytes>>, String> {
    http::Request::get(check.path.as_str())
        .header(http::header::HOST, addr.to_string())
        .header(http::header::USER_AGENT, "rollcall-probe")
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("probe request invalid: {e}"))
}

fn expect_status(check: &HealthCheck, status: u16) -> Result<(), String> {
    if check.expected_statuses.contains(status) {
        Ok(())
    } else {
        Err(format!(
            "probe answered {status}, expected {}",
            check.expected_statuses
        ))
    }
}

/// One request on a fresh HTTP/1.1 connection, closed after it.
async fn send_h1(
    stream: TcpStream,
    mut request: http::Request<Full<Bytes>>,
) -> Result<u16, String> {
    request.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("probe handshake failed: {e}"))?;
    let conn = tokio::spawn(conn);
    let response = tx.send_request(request).await;
    conn.abort();
    Ok(response
        .map_err(|e| format!("probe request failed: {e}"))?
        .status()
        .as_u16())
}

/// One request on a fresh h2c connection, its whole response read (trailers included).
async fn send_h2(
    stream: TcpStream,
    request: http::Request<Full<Bytes>>,
) -> Result<http::Response<http_body_util::Collected<Bytes>>, String> {
    let (mut tx, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|e| format!("probe handshake failed: {e}"))?;
    let conn = tokio::spawn(conn);
    let result = async {
        let response = tx
            .send_request(request)
            .await
            .map_err(|e| format!("probe request failed: {e}"))?;
        let (parts, body) = response.into_parts();
        // A health answer is small; an endpoint streaming more is not read into memory.
        let body = Limited::new(body, MAX_PROBE_BODY)
            .collect()
            .await
            .map_err(|e| format!("probe response failed: {e}"))?;
        Ok(http::Response::from_parts(parts, body))
    }
    .await;
    conn.abort();
    result
}

/// `grpc.health.v1.Health/Check` for `service`: healthy when the call succeeds and says SERVING.
async fn grpc_check(stream: TcpStream, addr: SocketAddr, service: &str) -> Result<(), String> {
    let message = HealthCheckRequest {
        service: service.to_owned(),
    }
    .encode_to_vec();
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0);
    framed.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    framed.extend_from_slice(&message);
    let request = http::Request::post("/grpc.health.v1.Health/Check")
        .header(http::header::HOST, addr.to_string())
        .header(http::header::USER_AGENT, "rollcall-probe")
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(Full::new(Bytes::from(framed)))
        .map_err(|e| format!("probe request invalid: {e}"))?;
    let response = send_h2(stream, request).await?;
    if !response.status().is_success() {
        return Err(format!(
            "grpc health check answered HTTP {}",
            response.status()
        ));
    }
    let (parts, body) = response.into_parts();
    let status = grpc::status(&parts.headers).or_else(|| body.trailers().and_then(grpc::status));
    match status {
        Some(Code::Ok) => {}
        Some(Code::Unimplemented) => {
            return Err("grpc health check: UNIMPLEMENTED (no grpc.health.v1 service)".into());
        }
        Some(Code::NotFound) => {
            return Err(format!("grpc health check: service {service:?} is unknown"));
        }
        Some(code) => return Err(format!("grpc health check failed with grpc-status {code}")),
        None => return Err("grpc health check ended without a grpc-status".into()),
    }
    let bytes = body.to_bytes();
    let payload = bytes
        .get(5..)
        .filter(|_| bytes.first() == Some(&0))
        .ok_or_else(|| "grpc health check answered no (uncompressed) message".to_owned())?;
    let answer = HealthCheckResponse::decode(payload)
        .map_err(|e| format!("grpc health check answer is not a HealthCheckResponse: {e}"))?;
    if answer.status == SERVING {
        Ok(())
    } else {
        Err(format!(
            "grpc health check: not serving (status {})",
            answer.status
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rollcall_api::policy::{DurationString, HealthCheck};

    use super::Streak;

    fn check() -> HealthCheck {
        HealthCheck {
            interval: DurationString::secs(2),
            healthy_threshold: 2,
            unhealthy_threshold: 3,
            ..HealthCheck::default()
        }
    }

    fn after(results: &[bool]) -> Duration {
        let mut s = Streak::default();
        for &ok in results {
            s.record(ok);
        }
        s.interval(&check())
    }

    #[test]
    fn a_stable_endpoint_up_or_down_is_probed_at_the_interval() {
        let full = Duration::from_secs(2);
        assert_eq!(after(&[]), full);
        assert_eq!(after(&[true, true, true]), full);
        assert_eq!(after(&[false, false, false]), full, "down: confirmed");
        assert_eq!(after(&[false, false, false, false, false]), full);
        assert_eq!(after(&[false, true, true]), full, "back: confirmed");
    }

    #[test]
    fn a_verdict_in_the_making_is_probed_four_times_as_often() {
        let fast = Duration::from_millis(500);
        assert_eq!(after(&[true, false]), fast, "first failure");
        assert_eq!(after(&[false, false]), fast, "second of three");
        assert_eq!(
            after(&[false, false, false, true]),
            fast,
            "first success after"
        );
        assert_eq!(
            after(&[false, true, false]),
            fast,
            "a flap restarts the count"
        );
    }
}
