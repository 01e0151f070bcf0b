//! The status path of a pool: the roster the hub serves plus every fresh sidecar report become
//! its status (pure aggregation in `crate::status`), held after a restart until the sidecars
//! have reported again, computed at most about once a second per pool however many reports
//! arrive, written by server-side apply when the coalescer allows (at most about
//! once a second, never unchanged, repaired when someone else edited it) and the pacer has a
//! slot (a bound over all pools), and followed by the
//! Events the change deserves. `run` drives it from the pools marked dirty by reports and by
//! the roster path, with retries at the instants the coalescer names. Every write and Event has
//! a timeout, and a pool whose write failed is retried with jittered back-off
//! (`status::retry`), so one pool the API server will not take never holds up the others.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource, ResourceExt};
use rollcall_api::roster::{PoolRef, PoolState};
use serde_json::json;
use tokio::time::Instant;

use super::{Context, FIELD_MANAGER, hold_for_reports, pool_ref};
use crate::crd::{BackendPool, BackendPoolStatus, InvalidSpec, PoolObject};
use crate::roster::Problem;
use crate::status::{self, Decision, Served, events};
use crate::{Error, Result};

/// How long one status write may take (waiting for the client's rate limit included); past it
/// the pool is retried with back-off and the others are not held up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one try at recording an Event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);

/// What to do after one status update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Done,
    /// Look again at this instant (a coalesced write, or a restart hold).
    RetryAt(Instant),
}

/// Bring the status of one pool up to date.
#[tracing::instrument(skip_all, fields(pool = %pool_ref(object)))]
pub async fn update(ctx: &Context, object: &PoolObject) -> Result<Next> {
    let key = pool_ref(object);
    let pool = match object.parse() {
        Ok(pool) => pool,
        Err(invalid) => return invalid_spec(object, &invalid, ctx).await,
    };
    // No roster yet: the roster path publishes one and marks the pool dirty again.
    let Some(published) = ctx.hub.current(&key) else {
        return Ok(Next::Done);
    };
    let version = published.update.version;
    let problem;
    let served = match &published.update.state {
        PoolState::Roster(roster) => Served::Roster { version, roster },
        PoolState::Unavailable { reason, message } => {
            problem = Problem {
                reason: *reason,
                message: message.clone(),
            };
            Served::Problem(&problem)
        }
    };
    let fresh_after = Instant::now()
        .checked_sub(ctx.settings.report_ttl)
        .unwrap_or_else(Instant::now);
    let connected = ctx.hub.watchers(&key) as u32;
    let now = (ctx.now)();
    let (summary, reporting) = ctx.reports.with_pool(&key, fresh_after, |reports| {
        let summary = status::summarize(status::Input {
            generation: pool.metadata.generation,
            served,
            reports,
            connected,
            previous: pool.status.as_ref(),
            now,
        });
        (summary, reports.reporting() as usize)
    });
    let status::Aggregated {
        status: mut desired,
        majority,
    } = summary;
    desired.fleet_health = ctx.fleet.view(&key).map(|view| crate::fleet::status(&view));
    let at = Instant::now();
    let reported_before = pool
        .status
        .as_ref()
        .and_then(|s| s.sidecars.as_ref())
        .map_or(0, |s| s.reporting);
    let elapsed = at.saturating_duration_since(ctx.started);
    if hold_for_reports(
        reported_before,
        reporting,
        elapsed,
        ctx.settings.restart_grace,
    ) {
        tracing::debug!(
            reported_before,
            reported = reporting,
            "holding the status until the sidecars report again"
        );
        let wait = ctx.settings.restart_grace.saturating_sub(elapsed);
        return Ok(Next::RetryAt(at + wait.min(Duration::from_secs(1))));
    }
    match decide(ctx, &key, pool.status.as_ref(), &desired, at) {
        Decision::Unchanged => Ok(Next::Done),
        Decision::WaitUntil(when) => Ok(Next::RetryAt(when)),
        Decision::Write => {
            write_status(ctx, &pool, &key, desired, Some(majority), at).await?;
            Ok(Next::Done)
        }
    }
}

/// Whether to write `desired` now. The coalescer remembers what this replica wrote; when the
/// live status differs although the coalescer thinks it unchanged, someone else edited it, and
/// it is repaired. A write the pool may make waits for its slot under the overall bound.
fn decide(
    ctx: &Context,
    key: &PoolRef,
    live: Option<&BackendPoolStatus>,
    desired: &BackendPoolStatus,
    at: Instant,
) -> Decision {
    let decision = if live == Some(desired) {
        Decision::Unchanged
    } else {
        let mut coalescer = ctx.coalescer.lock();
        match coalescer.decide(key, desired, at) {
            Decision::Unchanged => {
                tracing::info!("the status was changed by someone else; repairing it");
                coalescer.forget(key);
                Decision::Write
            }
            other => other,
        }
    };
    let mut pacer = ctx.pacer.lock();
    match decision {
        Decision::Write => {
            let waiting = pacer.is_waiting(key);
            match pacer.admit(key, at) {
                Ok(()) => Decision::Write,
                Err(slot) => {
                    if !waiting {
                        ctx.metrics.status_writes_paced.inc();
                        tracing::debug!(
                            wait_ms = slot.saturating_duration_since(at).as_millis() as u64,
                            "status write waits for a slot under the overall bound"
                        );
                    }
                    Decision::WaitUntil(slot)
                }
            }
        }
        Decision::Unchanged => {
            pacer.forget(key);
            Decision::Unchanged
        }
        wait => wait,
    }
}

/// Write `desired` with server-side apply, then record the Events the change deserves
/// (`majority`: every endpoint most sidecars eject now; `None` leaves ejections out).
async fn write_status(
    ctx: &Context,
    pool: &BackendPool,
    key: &PoolRef,
    desired: BackendPoolStatus,
    majority: Option<status::Majority>,
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
    let written = tokio::time::timeout(
        WRITE_TIMEOUT,
        api.patch_status(&pool.name_any(), &params, &Patch::Apply(&patch)),
    )
    .await;
    let Ok(written) = written else {
        ctx.metrics
            .status_writes
            .with_label_values(&["timeout"])
            .inc();
        ctx.coalescer.lock().forget(key);
        return Err(Error::StatusWriteTimeout(WRITE_TIMEOUT));
    };
    match written {
        Ok(_) => {
            ctx.metrics.status_writes.with_label_values(&["ok"]).inc();
            record_events(ctx, pool, &desired, majority).await;
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
async fn invalid_spec(object: &PoolObject, invalid: &InvalidSpec, ctx: &Context) -> Result<Next> {
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
        Decision::Unchanged => return Ok(Next::Done),
        Decision::WaitUntil(when) => return Ok(Next::RetryAt(when)),
    }
    // The spec says nothing about who ejects what: no ejection Events from this write.
    write_status(ctx, &pool, &key, desired, None, at).await?;
    Ok(Next::Done)
}

/// Record the Events the written status deserves; a failure is logged, never fatal. The
/// majority ejections are remembered for the next change, whether or not a recorder is set.
async fn record_events(
    ctx: &Context,
    pool: &BackendPool,
    written: &BackendPoolStatus,
    majority: Option<status::Majority>,
) {
    let key = pool_ref(pool);
    let transitions = {
        let mut recorded = ctx.recorded_majority.lock();
        let before = recorded.get(&key);
        // Without a new tally (an unusable spec keeps the ejections listed), nothing changes.
        let after = match (&majority, before) {
            (Some(now), _) => now.clone(),
            (None, Some(before)) => before.clone(),
            (None, None) => events::listed_majority(written),
        };
        let transitions = events::transitions(pool.status.as_ref(), before, written, &after);
        if let Some(majority) = majority {
            recorded.insert(key.clone(), majority);
        }
        transitions
    };
    let Some(recorder) = &ctx.recorder else {
        return;
    };
    let reference = pool.object_ref(&());
    for t in transitions {
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
        // An API server blip must not lose the Event: a few tries, as client-go's recorder
        // makes, then give up (Events are informative; the status carries the truth).
        let mut tries = 0;
        loop {
            let error =
                match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&event, &reference))
                    .await
                {
                    Ok(Ok(())) => break,
                    Ok(Err(error)) => error.to_string(),
                    Err(_) => format!("no answer within {EVENT_TIMEOUT:?}"),
                };
            tries += 1;
            if tries == 3 {
                tracing::warn!(%error, reason = t.reason, "cannot record event");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200 * tries)).await;
        }
    }
}

/// Keep every pool's status up to date until the process ends: pools marked dirty (a report,
/// a published roster), retries at the instants updates asked for, and a periodic pass so
/// reports that go stale are noticed without an event.
pub async fn run(ctx: std::sync::Arc<Context>, pools: Store<PoolObject>, every: Duration) {
    if ctx.caches_synced.clone().wait_for(|s| *s).await.is_err() {
        return;
    }
    let mut retries: BTreeMap<PoolRef, Instant> = BTreeMap::new();
    // Failed writes in a row, per pool, for the back-off.
    let mut failures: BTreeMap<PoolRef, u32> = BTreeMap::new();
    let mut sweep = tokio::time::interval(every);
    loop {
        let next_retry = retries.values().min().copied();
        tokio::select! {
            () = ctx.reports.changed() => {}
            _ = sweep.tick() => {
                for pool in pools.state() {
                    ctx.reports.touch(pool_ref(&*pool));
                }
            }
            () = async {
                match next_retry {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                let now = Instant::now();
                let due: Vec<PoolRef> = retries.iter().filter(|(_, at)| **at <= now).map(|(p, _)| p.clone()).collect();
                for pool in due {
                    retries.remove(&pool);
                    ctx.reports.touch(pool);
                }
            }
        }
        for key in ctx.reports.take_dirty() {
            let Some(object) = pools.get(&ObjectRef::new(&key.name).within(&key.namespace)) else {
                ctx.coalescer.lock().remove(&key);
                ctx.recorded_majority.lock().remove(&key);
                ctx.pacer.lock().forget(&key);
                retries.remove(&key);
                failures.remove(&key);
                continue;
            };
            // One pass per pool per interval, however many reports marked it dirty meanwhile.
            let begun = ctx.coalescer.lock().begin_pass(&key, Instant::now());
            if let Err(at) = begun {
                let entry = retries.entry(key).or_insert(at);
                *entry = (*entry).min(at);
                continue;
            }
            ctx.metrics.status_passes.inc();
            match update(&ctx, &object).await {
                Ok(Next::Done) => {
                    failures.remove(&key);
                }
                Ok(Next::RetryAt(at)) => {
                    failures.remove(&key);
                    let entry = retries.entry(key).or_insert(at);
                    *entry = (*entry).min(at);
                }
                Err(error) => {
                    let failed = failures.entry(key.clone()).or_default();
                    *failed = failed.saturating_add(1);
                    let wait = status::retry::after(*failed, status::retry::random());
                    tracing::warn!(pool = %key, %error, failures = *failed, retry_in = ?wait,
                        "status update failed; retrying");
                    ctx.metrics.reconciles.with_label_values(&["error"]).inc();
                    retries.insert(key, Instant::now() + wait);
                }
            }
        }
    }
}
