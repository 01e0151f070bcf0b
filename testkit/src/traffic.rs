//! Steady client traffic through a sidecar (the demo's, and the end-to-end tests' load): a few
//! workers, each with its own keep-alive connection, paced to a total rate, GET only. No
//! retries: a request that is not 2xx or errors is a failure, exactly what a user of the
//! service would see.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::client::Conn;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio::time::{MissedTickBehavior, timeout};

const WORKERS: u32 = 4;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How many failures are kept with the moment they happened, for a test's message.
const LOGGED_FAILURES: usize = 32;

/// Totals since the start.
#[derive(Default)]
pub struct Counts {
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    /// Failures by kind: a status (`503`), `connect error`, `timeout`, `reset/closed`.
    pub failures: Mutex<BTreeMap<String, u64>>,
    /// The first failures, each with when the request was sent (seconds since the Unix epoch,
    /// the clock the processes' logs use) and how long it took, so a test that fails can be
    /// read against those logs.
    pub log: Mutex<Vec<FailedRequest>>,
}

/// One failed request, for reading against the processes' logs.
#[derive(Clone, Debug)]
pub struct FailedRequest {
    pub kind: String,
    pub sent: std::time::SystemTime,
    pub took: Duration,
}

impl std::fmt::Display for FailedRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let since_epoch = self
            .sent
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        write!(
            f,
            "{} sent at {}.{:03} (epoch s) after {} ms",
            self.kind,
            since_epoch.as_secs(),
            since_epoch.subsec_millis(),
            self.took.as_millis()
        )
    }
}

/// Running traffic; stops when dropped.
pub struct Traffic {
    pub counts: Arc<Counts>,
    _workers: JoinSet<()>,
}

impl Traffic {
    /// Starts `rate` requests per second in total against `target`.
    pub fn start(target: SocketAddr, rate: u32) -> Self {
        let counts = Arc::new(Counts::default());
        let mut workers = JoinSet::new();
        let period = Duration::from_secs_f64(f64::from(WORKERS) / f64::from(rate.max(1)));
        for _ in 0..WORKERS {
            workers.spawn(worker(target, period, counts.clone()));
        }
        Self {
            counts,
            _workers: workers,
        }
    }

    /// The failures so far, by kind.
    pub fn failures(&self) -> BTreeMap<String, u64> {
        self.counts.failures.lock().clone()
    }

    /// The first failures, with when each request was sent.
    pub fn failure_log(&self) -> Vec<FailedRequest> {
        self.counts.log.lock().clone()
    }

    pub fn totals(&self) -> (u64, u64) {
        (
            self.counts.ok.load(Relaxed),
            self.counts.failed.load(Relaxed),
        )
    }
}

async fn worker(target: SocketAddr, period: Duration, counts: Arc<Counts>) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut conn: Option<Conn> = None;
    loop {
        ticks.tick().await;
        let sent = std::time::SystemTime::now();
        let started = tokio::time::Instant::now();
        let outcome = one_request(target, &mut conn).await;
        match outcome {
            Ok(()) => {
                counts.ok.fetch_add(1, Relaxed);
            }
            Err(kind) => {
                counts.failed.fetch_add(1, Relaxed);
                *counts.failures.lock().entry(kind.clone()).or_default() += 1;
                let mut log = counts.log.lock();
                if log.len() < LOGGED_FAILURES {
                    log.push(FailedRequest {
                        kind,
                        sent,
                        took: started.elapsed(),
                    });
                }
            }
        }
    }
}

/// One request, reusing the worker's connection; any error drops it so the next request
/// opens a new one.
async fn one_request(target: SocketAddr, conn: &mut Option<Conn>) -> Result<(), String> {
    if conn.as_ref().is_none_or(Conn::is_closed) {
        let fresh = timeout(REQUEST_TIMEOUT, Conn::http1(target))
            .await
            .map_err(|_| "connect timeout".to_owned())?
            .map_err(|_| "connect error".to_owned())?;
        *conn = Some(fresh);
    }
    let Some(c) = conn.as_mut() else {
        return Err("no connection".into());
    };
    let result = timeout(REQUEST_TIMEOUT, c.get("/")).await;
    match result {
        Ok(Ok(reply)) if reply.status.is_success() => Ok(()),
        Ok(Ok(reply)) => Err(reply.status.as_u16().to_string()),
        Ok(Err(_)) => {
            *conn = None;
            Err("reset/closed".into())
        }
        Err(_) => {
            *conn = None;
            Err("timeout".into())
        }
    }
}
