//! Reconciliation of one `BackendPool`, in two paths. The roster path (`reconcile`, driven by
//! pool, EndpointSlice and Service changes with no debounce) computes the roster from the cached
//! slices and Service and publishes it to the hub (a new version only when it changed), then
//! marks the pool's status dirty. The status path (`status`, driven by reports and by the
//! roster path) aggregates the sidecar reports into a status and writes it when the coalescer
//! allows. Report churn can therefore never delay a roster. Both assume nothing about why they
//! ran.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use rollcall_api::roster::{PoolRef, PoolState};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::crd::PoolObject;
use crate::metrics::Metrics;
use crate::roster::{self, RosterHub, SliceIndex};
use crate::status::{Coalescer, Pacer, ReportStore, events};
use crate::{Error, Result};

pub mod status_writer;

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "rollcall-controller";

/// Tunables of the reconcile loop.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// At most one status write per pool per this interval.
    pub status_interval: Duration,
    /// At most this many status writes a second over all pools (0: unbounded), after a burst
    /// of `status_write_burst`.
    pub status_writes_per_second: u32,
    pub status_write_burst: u32,
    /// A sidecar silent for longer no longer counts as reporting.
    pub report_ttl: Duration,
    /// Reconcile every pool at least this often.
    pub resync: Duration,
    /// After taking the lead, how long a pool's status waits to hear again from the sidecars
    /// its last status counted as reporting. A new leader knows no reports: writing at once
    /// would drop every true ejection and record false re-admission Events.
    pub restart_grace: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            status_interval: Duration::from_secs(1),
            status_writes_per_second: 50,
            status_write_burst: 100,
            report_ttl: Duration::from_secs(90),
            resync: Duration::from_secs(300),
            restart_grace: Duration::from_secs(25),
        }
    }
}

/// Everything reconcile needs, passed in (never global), so tests build their own.
pub struct Context {
    pub client: Client,
    /// The EndpointSlice cache: each Service's slices, parsed, so a reconcile reads only its own.
    pub slice_index: Arc<Mutex<SliceIndex>>,
    pub services: Store<Service>,
    pub hub: Arc<RosterHub>,
    pub reports: Arc<ReportStore>,
    /// Fleet health's views, for the status.
    pub fleet: Arc<crate::fleet::Fleet>,
    pub metrics: Metrics,
    pub coalescer: Mutex<Coalescer>,
    /// Bounds the status writes of all pools together.
    pub pacer: Mutex<Pacer>,
    pub settings: Settings,
    /// Turns true once the EndpointSlice and Service caches hold a full list.
    pub caches_synced: watch::Receiver<bool>,
    /// Wall clock, injectable for tests.
    pub now: fn() -> Timestamp,
    /// Records Events on ejections, re-admissions and panic mode; `None` records nothing.
    pub recorder: Option<Recorder>,
    /// When this replica started reconciling (took the lead).
    pub started: Instant,
    /// Events each pool may still record.
    pub event_budget: Mutex<events::EventBudget>,
    /// Per pool, every endpoint most sidecars ejected when this replica last recorded its
    /// Events: the next Events are computed against it, never against the capped list.
    pub recorded_majority: Mutex<std::collections::HashMap<PoolRef, crate::status::Majority>>,
}

/// Whether to hold a status write until the sidecars that reported before a restart have
/// reported again: the previous status counted `before` reporting sidecars, `now` have
/// reported to this replica, `elapsed` since it took the lead.
pub fn hold_for_reports(before: u32, now: usize, elapsed: Duration, grace: Duration) -> bool {
    before > 0 && now < before as usize && elapsed < grace
}

pub fn pool_ref(pool: &impl ResourceExt) -> PoolRef {
    PoolRef::new(pool.namespace().unwrap_or_default(), pool.name_any())
}

#[tracing::instrument(skip_all, fields(pool = %pool_ref(&*object)))]
pub async fn reconcile(object: Arc<PoolObject>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_seconds.start_timer();
    // Never compute from half-filled caches: a Service not listed yet would read as missing.
    if ctx.caches_synced.clone().wait_for(|s| *s).await.is_err() {
        return Err(Error::CachesNotReady);
    }
    let key = pool_ref(&*object);
    // An unusable spec keeps the roster the sidecars have; the status path says why.
    let Ok(pool) = object.parse() else {
        ctx.reports.touch(key);
        return Ok(Action::requeue(ctx.settings.resync));
    };
    let ns = pool
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let svc_name = &pool.spec.service.name;
    let service = ctx.services.get(&ObjectRef::new(svc_name).within(&ns));
    // The cached slices are shared, not copied: a pool of 10,000 endpoints is 100 slices.
    let slices = ctx.slice_index.lock().slices_of(&ns, svc_name);
    let computed = roster::compute(&pool, slices.iter().map(|s| &**s), service.as_deref());
    let now_ms = u64::try_from((ctx.now)().as_millisecond()).unwrap_or_default();
    // The roster moves into the hub; only its size (or the problem) stays for the log line.
    let (state, outcome) = match computed {
        Ok(roster) => {
            let endpoints = roster.endpoints.len();
            (PoolState::Roster(roster), Ok(endpoints))
        }
        Err(problem) => {
            let state = PoolState::Unavailable {
                reason: problem.reason,
                message: problem.message.clone(),
            };
            (state, Err(problem))
        }
    };
    if let Some(version) = ctx.hub.publish(&key, state, now_ms) {
        ctx.metrics.roster_versions.inc();
        match outcome {
            Ok(endpoints) => tracing::info!(version, endpoints, "roster published"),
            Err(p) => {
                tracing::info!(version, reason = %p.reason, message = %p.message, "roster unavailable")
            }
        }
    }
    ctx.reports.touch(key);
    Ok(Action::requeue(ctx.settings.resync))
}

/// Log, count and retry later; a failing pool never blocks the others.
pub fn error_policy(pool: Arc<PoolObject>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(pool = %pool_ref(&*pool), %error, "reconcile failed");
    ctx.metrics.reconciles.with_label_values(&["error"]).inc();
    Action::requeue(Duration::from_secs(15))
}

#[cfg(test)]
mod tests;
