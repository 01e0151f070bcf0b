//! Active probes: one task per endpoint, so a black-holed endpoint delays no other. Each probe
//! has a real timeout; intervals carry random jitter so a fleet of sidecars does not probe in
//! lock-step; the first probe goes out at once (after a little jitter) so `Unknown` resolves
//! fast. TCP probes connect and close; HTTP probes open a fresh connection and `GET` the path,
//! expecting a status in range. The task knows nothing of pools: it reads the current check from
//! a watch channel and hands each result to `report`, which says whether anyone still listens.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use rand::Rng;
use rollcall_api::policy::{HealthCheck, HealthCheckType};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Probe `addr` with the check `settings` holds now, until `report` returns `false` or the
/// settings go away. `report(ok, detail)` gets every result.
pub async fn run(
    addr: SocketAddr,
    mut settings: watch::Receiver<HealthCheck>,
    mut report: impl FnMut(bool, String) -> bool,
) {
    let mut first = true;
    loop {
        let check = settings.borrow_and_update().clone();
        if check.kind == HealthCheckType::None {
            // Probes are off: wait for a reload that turns them on.
            if settings.changed().await.is_err() {
                return;
            }
            first = true;
            continue;
        }
        let wait = if first {
            jitter(Duration::from_millis(100), check.jitter.fraction().max(0.5))
        } else {
            jitter(check.interval.get(), check.jitter.fraction())
        };
        first = false;
        tokio::time::sleep(wait).await;
        let (ok, detail) = match probe(addr, &check).await {
            Ok(()) => (true, String::new()),
            Err(detail) => (false, detail),
        };
        if !report(ok, detail) {
            return;
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

/// One probe; `Err` says what failed, in words fit for a status field.
pub async fn probe(addr: SocketAddr, check: &HealthCheck) -> Result<(), String> {
    let timeout = check.timeout.get();
    let work = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("probe connect failed: {e}"))?;
        if check.kind != HealthCheckType::Http {
            return Ok(());
        }
        let (mut tx, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(|e| format!("probe handshake failed: {e}"))?;
        let conn = tokio::spawn(conn);
        let request = http::Request::get(check.path.as_str())
            .header(http::header::HOST, addr.to_string())
            .header(http::header::USER_AGENT, "rollcall-probe")
            .header(http::header::CONNECTION, "close")
            .body(Empty::new())
            .map_err(|e| format!("probe request invalid: {e}"))?;
        let response = tx.send_request(request).await;
        conn.abort();
        let status = response
            .map_err(|e| format!("probe request failed: {e}"))?
            .status()
            .as_u16();
        if check.expected_statuses.contains(status) {
            Ok(())
        } else {
            Err(format!(
                "probe answered {status}, expected {}",
                check.expected_statuses
            ))
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(format!("probe timed out after {}", check.timeout)),
    }
}
