//! Active probes: one task per endpoint, so a black-holed endpoint delays no other. Each probe
//! has a real timeout; intervals carry random jitter so a fleet of sidecars does not probe in
//! lock-step; the first probe goes out at once (after a little jitter) so `Unknown` resolves
//! fast. While a verdict is in the making (failures not yet `unhealthyThreshold` in a row, or
//! successes after a failure not yet `healthyThreshold`) the next probe goes out after a quarter
//! of the interval, as HAProxy's `fastinter` does: a fault is confirmed, and a recovery proven,
//! in a fraction of the time; a stable endpoint, up or down, is probed at the interval.
//! TCP probes connect and close; HTTP probes open a fresh connection and `GET` the path,
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
    let mut streak = Streak::default();
    loop {
        let check = settings.borrow_and_update().clone();
        if check.kind == HealthCheckType::None {
            // Probes are off: wait for a reload that turns them on.
            if settings.changed().await.is_err() {
                return;
            }
            first = true;
            streak = Streak::default();
            continue;
        }
        let wait = if first {
            jitter(Duration::from_millis(100), check.jitter.fraction().max(0.5))
        } else {
            jitter(streak.interval(&check), check.jitter.fraction())
        };
        first = false;
        tokio::time::sleep(wait).await;
        let (ok, detail) = match probe(addr, &check).await {
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
