//! Reconciliation of one `BackendPool`: compute its roster from the cached EndpointSlices and
//! Service, publish it to the hub (a new version only when it changed), aggregate the sidecar
//! reports into a status and write it with server-side apply when the coalescer allows. It
//! assumes nothing about why it ran: a pool, slice, Service or report change all lead here.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use parking_lot::Mutex;
use rollcall_api::roster::{PoolRef, PoolState};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::crd::{BackendPool, BackendPoolStatus, InvalidSpec, PoolObject};
use crate::metrics::Metrics;
use crate::roster::{self, RosterHub, SliceIndex};
use crate::status::{self, Coalescer, Decision, ReportStore, Served, events};
use crate::{Error, Result};

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "rollcall-controller";

/// Tunables of the reconcile loop.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// At most one status write per pool per this interval.
    pub status_interval: Duration,
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
            report_ttl: Duration::from_secs(90),
            resync: Duration::from_secs(300),
            restart_grace: Duration::from_secs(25),
        }
    }
}

/// Everything reconcile needs, passed in (never global), so tests build their own.
pub struct Context {
    pub client: Client,
    pub slices: Store<EndpointSlice>,
    /// Each Service's slices, so a reconcile reads only its own.
    pub slice_index: Arc<Mutex<SliceIndex>>,
    pub services: Store<Service>,
    pub hub: Arc<RosterHub>,
    pub reports: Arc<ReportStore>,
    pub metrics: Metrics,
    pub coalescer: Mutex<Coalescer>,
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
    let pool = match object.parse() {
        Ok(pool) => pool,
        Err(invalid) => return invalid_spec(&object, &invalid, &ctx).await,
    };
    let key = pool_ref(&pool);
    let ns = pool
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let svc_name = &pool.spec.service.name;
    let service = ctx.services.get(&ObjectRef::new(svc_name).within(&ns));
    let refs = ctx.slice_index.lock().slices_of(&ns, svc_name);
    let slices: Vec<EndpointSlice> = refs
        .iter()
        .filter_map(|r| ctx.slices.get(r))
        .map(|s| (*s).clone())
        .collect();
    let computed = roster::compute(&pool, &slices, service.as_deref());
    let now = (ctx.now)();
    let now_ms = u64::try_from(now.as_millisecond()).unwrap_or_default();
    let state = match &computed {
        Ok(r) => PoolState::Roster(r.clone()),
        Err(p) => PoolState::Unavailable {
            reason: p.reason,
            message: p.message.clone(),
        },
    };
    if let Some(version) = ctx.hub.publish(&key, state, now_ms) {
        ctx.metrics.roster_versions.inc();
        match &computed {
            Ok(r) => tracing::info!(version, endpoints = r.endpoints.len(), "roster published"),
            Err(p) => {
                tracing::info!(version, reason = %p.reason, message = %p.message, "roster unavailable")
            }
        }
    }
    let version = ctx.hub.current(&key).map_or(0, |p| p.update.version);
    let fresh_after = Instant::now()
        .checked_sub(ctx.settings.report_ttl)
        .unwrap_or_else(Instant::now);
    let reports = ctx.reports.for_pool(&key, fresh_after);
    let served = match &computed {
        Ok(roster) => Served::Roster { version, roster },
        Err(problem) => Served::Problem(problem),
    };
    let desired = status::aggregate(status::Input {
        generation: pool.metadata.generation,
        served,
        reports: &reports,
        connected: ctx.hub.watchers(&key) as u32,
        previous: pool.status.as_ref(),
        now,
    });
    let at = Instant::now();
    let reported_before = pool
        .status
        .as_ref()
        .and_then(|s| s.sidecars.as_ref())
        .map_or(0, |s| s.reporting);
    let elapsed = at.saturating_duration_since(ctx.started);
    if hold_for_reports(
        reported_before,
        reports.len(),
        elapsed,
        ctx.settings.restart_grace,
    ) {
        tracing::debug!(
            reported_before,
            reported = reports.len(),
            "holding the status until the sidecars report again"
        );
        let wait = ctx.settings.restart_grace.saturating_sub(elapsed);
        return Ok(Action::requeue(wait.min(Duration::from_secs(1))));
    }
    let decision = decide(ctx.as_ref(), &key, pool.status.as_ref(), &desired, at);
    // Reports go stale without an event; look again when the freshest could have.
    let resync = if reports.is_empty() {
        ctx.settings.resync
    } else {
        ctx.settings.resync.min(ctx.settings.report_ttl)
    };
    match decision {
        Decision::Unchanged => Ok(Action::requeue(resync)),
        Decision::WaitUntil(when) => Ok(Action::requeue(when.saturating_duration_since(at))),
        Decision::Write => {
            write_status(&ctx, &pool, &key, desired, at).await?;
            Ok(Action::requeue(resync))
        }
    }
}

/// Whether to write `desired` now. The coalescer remembers what this replica wrote; when the
/// live status differs although the coalescer thinks it unchanged, someone else edited it, and
/// it is repaired.
fn decide(
    ctx: &Context,
    key: &PoolRef,
    live: Option<&BackendPoolStatus>,
    desired: &BackendPoolStatus,
    at: Instant,
) -> Decision {
    if live == Some(desired) {
        return Decision::Unchanged;
    }
    let mut coalescer = ctx.coalescer.lock();
    match coalescer.decide(key, desired, at) {
        Decision::Unchanged => {
            tracing::info!("the status was changed by someone else; repairing it");
            coalescer.forget(key);
            Decision::Write
        }
        other => other,
    }
}

/// Write `desired` with server-side apply, then record the Events the change deserves.
async fn write_status(
    ctx: &Context,
    pool: &BackendPool,
    key: &PoolRef,
    desired: BackendPoolStatus,
    at: Instant,
) -> Result<()> {
    let ns = pool.namespace().unwrap_or_default();
    // The answer is read leniently: a pool whose spec is unreadable still gets its status.
    let api: Api<PoolObject> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = json!({
        "apiVersion": BackendPool::api_version(&()),
        "kind": BackendPool::kind(&()),
        "status": desired,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api
        .patch_status(&pool.name_any(), &params, &Patch::Apply(&patch))
        .await
    {
        Ok(_) => {
            ctx.metrics.status_writes.with_label_values(&["ok"]).inc();
            record_events(ctx, pool, &desired).await;
            ctx.coalescer.lock().wrote(key, desired, at);
            Ok(())
        }
        Err(e) => {
            let result = match &e {
                kube::Error::Api(s) if s.code == 409 => "conflict",
                _ => "error",
            };
            ctx.metrics.status_writes.with_label_values(&[result]).inc();
            ctx.coalescer.lock().forget(key);
            Err(Error::Kube(e))
        }
    }
}

/// A pool whose spec does not parse or validate: say so in its status and an Event, keep the
/// roster the sidecars already have, and look again only when the pool changes.
async fn invalid_spec(object: &PoolObject, invalid: &InvalidSpec, ctx: &Context) -> Result<Action> {
    let key = pool_ref(object);
    tracing::warn!(pool = %key, problem = %invalid, "the pool's spec cannot be used");
    ctx.metrics.reconciles.with_label_values(&["invalid"]).inc();
    let previous = object.status();
    let desired = status::invalid_spec(
        previous.as_ref(),
        object.metadata.generation,
        &invalid.0,
        (ctx.now)(),
    );
    let at = Instant::now();
    // The status write and Events need a typed pool; the spec is the part that is broken.
    let pool = BackendPool {
        metadata: object.metadata.clone(),
        spec: crate::crd::BackendPoolSpec {
            service: crate::crd::ServiceRef {
                name: object.service_name().unwrap_or_default().to_string(),
                port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0),
            },
            policy: Default::default(),
        },
        status: previous,
    };
    match decide(ctx, &key, object.status().as_ref(), &desired, at) {
        Decision::Write => {}
        Decision::Unchanged => return Ok(Action::requeue(ctx.settings.resync)),
        Decision::WaitUntil(when) => {
            return Ok(Action::requeue(when.saturating_duration_since(at)));
        }
    }
    write_status(ctx, &pool, &key, desired, at).await?;
    Ok(Action::requeue(ctx.settings.resync))
}

/// Record the Events the written status deserves; a failure is logged, never fatal.
async fn record_events(ctx: &Context, pool: &BackendPool, written: &BackendPoolStatus) {
    let Some(recorder) = &ctx.recorder else {
        return;
    };
    let reference = pool.object_ref(&());
    let key = pool_ref(pool);
    for t in events::transitions(pool.status.as_ref(), written) {
        if !ctx.event_budget.lock().take(&key, Instant::now()) {
            ctx.metrics.events_dropped.inc();
            tracing::debug!(reason = t.reason, "event budget spent; not recorded");
            continue;
        }
        let secondary = t.pod.as_ref().map(|pod| ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.clone()),
            namespace: pool.namespace(),
            ..Default::default()
        });
        let event = Event {
            type_: if t.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: t.reason.into(),
            note: Some(t.note),
            action: "Observe".into(),
            secondary,
        };
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::warn!(%error, reason = t.reason, "cannot record event");
        }
    }
}

/// Log, count and retry later; a failing pool never blocks the others.
pub fn error_policy(pool: Arc<PoolObject>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(pool = %pool_ref(&*pool), %error, "reconcile failed");
    ctx.metrics.reconciles.with_label_values(&["error"]).inc();
    Action::requeue(Duration::from_secs(15))
}

#[cfg(test)]
mod tests;
