//! Wiring: reflectors for `BackendPool`s and Services, and the slice cache
//! (`roster::SliceIndex`) for EndpointSlices labelled with their Service, feed one kube-runtime
//! `Controller` for rosters (no debounce: a slice change is published as soon as it is seen).
//! Slice and Service changes map to the pools that name that Service; a deleted pool is
//! announced to its watchers (also when its Delete event was missed during a watch outage).
//! Statuses have their own loop (`reconcile::status_writer::run`), fed by reports and published
//! rosters, so report churn never delays a roster.
//! Reconciles wait for the slice and Service caches; once the pool cache has synced too, the
//! hub may say a pool does not exist and the controller reports ready.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::crd::PoolObject;
use crate::reconcile::{self, Context, Settings, pool_ref};
use crate::roster::{SERVICE_NAME_LABEL, SliceIndex};
use crate::server::State;
use crate::status::Coalescer;
use crate::unix_ms;

/// Whether `store` has synced, without being one of several concurrent `wait_until_ready`
/// callers: kube-runtime's readiness future wakes only its most recent waiter (the Controller
/// waits on the pool store too), so poll it in short rounds instead.
async fn ready_soon<K: kube::runtime::reflector::Lookup + Clone + 'static>(store: &Store<K>) -> bool
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(100), store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_elapsed) => continue,
        }
    }
}

/// Pools in `store` that use the Service `namespace/name`.
fn pools_of(
    store: &Store<PoolObject>,
    namespace: Option<String>,
    name: Option<&String>,
) -> Vec<ObjectRef<PoolObject>> {
    store
        .state()
        .iter()
        .filter(|p| p.namespace() == namespace && p.service_name() == name.map(String::as_str))
        .map(|p| ObjectRef::from_obj(&**p))
        .collect()
}

/// Run the controller until `shutdown` resolves. `ready` turns true once the caches synced.
pub async fn run(
    client: Client,
    state: State,
    settings: Settings,
    ready: Arc<AtomicBool>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (pool_reader, pool_writer) = reflector::store::<PoolObject>();
    let (svc_reader, svc_writer) = reflector::store::<Service>();

    let hub = state.hub.clone();
    let deleted_reports = state.reports.clone();
    // Caches keep no managedFields: they are most of an object's size and never read here.
    let pools = reflector::reflector(
        pool_writer,
        watcher(
            Api::<PoolObject>::all(client.clone()),
            watcher::Config::default(),
        )
        .modify(|p| p.managed_fields_mut().clear()),
    )
    .default_backoff()
    .inspect(move |event| {
        if let Ok(watcher::Event::Delete(pool)) = event {
            hub.remove(&pool_ref(pool), unix_ms());
            // The status loop finds it gone and forgets what it kept for it.
            deleted_reports.touch(pool_ref(pool));
        }
    })
    .applied_objects();
    // Slices are cached by the index alone, parsed (`roster::cached`): no reflector store of
    // the objects.
    let slice_index = Arc::new(Mutex::new(SliceIndex::default()));
    let slices_synced = slice_index.lock().synced();
    let indexer = slice_index.clone();
    let slices = watcher(
        Api::<EndpointSlice>::all(client.clone()),
        watcher::Config::default().labels(SERVICE_NAME_LABEL),
    )
    .default_backoff()
    .inspect(move |event| {
        if let Ok(event) = event {
            indexer.lock().apply(event);
        }
    })
    .touched_objects();
    let services = reflector::reflector(
        svc_writer,
        watcher(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        )
        .modify(|s| s.managed_fields_mut().clear()),
    )
    .default_backoff()
    .touched_objects();

    let (synced_tx, synced_rx) = watch::channel(false);
    let sync = {
        let (pools, services) = (pool_reader.clone(), svc_reader.clone());
        let mut slices_synced = slices_synced;
        let hub = state.hub.clone();
        let reports = state.reports.clone();
        async move {
            if slices_synced.wait_for(|s| *s).await.is_err() || !ready_soon(&services).await {
                return;
            }
            let _ = synced_tx.send(true);
            if !ready_soon(&pools).await {
                return;
            }
            hub.mark_synced(unix_ms(), pools.state().iter().map(|p| pool_ref(&**p)));
            ready.store(true, Ordering::Release);
            tracing::info!("caches synced; serving rosters");
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                // A pool deleted while the watch was down leaves no Delete event behind.
                for gone in hub.live().into_iter().filter(|p| {
                    pools
                        .get(&ObjectRef::new(&p.name).within(&p.namespace))
                        .is_none()
                }) {
                    hub.remove(&gone, unix_ms());
                    reports.touch(gone);
                }
                hub.prune();
            }
        }
    };
    let sync = tokio::spawn(sync);

    let reporter = Reporter {
        controller: reconcile::FIELD_MANAGER.into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Context {
        recorder: Some(Recorder::new(client.clone(), reporter)),
        client,
        slice_index,
        services: svc_reader,
        hub: state.hub.clone(),
        reports: state.reports.clone(),
        fleet: state.fleet.clone(),
        metrics: state.metrics.clone(),
        coalescer: Mutex::new(Coalescer::new(settings.status_interval)),
        pacer: Mutex::new(crate::status::Pacer::new(
            settings.status_writes_per_second,
            settings.status_write_burst,
        )),
        settings,
        caches_synced: synced_rx,
        now: k8s_openapi::jiff::Timestamp::now,
        started: tokio::time::Instant::now(),
        event_budget: Mutex::new(crate::status::events::EventBudget::new(
            20,
            Duration::from_secs(60),
        )),
        recorded_majority: Mutex::default(),
    });
    let (by_slice, by_service) = (pool_reader.clone(), pool_reader.clone());
    let metrics = state.metrics.clone();
    // Status has its own loop, so report churn never delays a roster.
    let statuses = tokio::spawn(reconcile::status_writer::run(
        ctx.clone(),
        pool_reader.clone(),
        Duration::from_secs(10),
    ));
    Controller::for_stream(pools, pool_reader)
        .watches_stream(slices, move |s: EndpointSlice| {
            pools_of(&by_slice, s.namespace(), s.labels().get(SERVICE_NAME_LABEL))
        })
        .watches_stream(services, move |s: Service| {
            pools_of(&by_service, s.namespace(), Some(&s.name_any()))
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| {
            let label = if result.is_ok() { "ok" } else { "error" };
            if let Err(e) = &result {
                tracing::debug!(error = %e, "reconcile did not run");
            }
            // Errors from reconcile itself are counted in `error_policy`.
            if label == "ok" {
                metrics.reconciles.with_label_values(&["ok"]).inc();
            }
            std::future::ready(())
        })
        .await;
    statuses.abort();
    sync.abort();
}

#[cfg(test)]
mod tests;
