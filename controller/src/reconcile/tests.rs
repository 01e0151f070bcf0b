//! Reconcile against kube's mock API service: the exact status patch, and no call at all when
//! nothing changed.

use std::time::Duration;

use http::{Request, Response};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::client::Body;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use rollcall_api::roster::UnavailableReason;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle};

use super::*;
use crate::crd::{BackendPool, BackendPoolStatus, PoolObject};
use crate::fixtures::{self, READY};

type ApiHandle = Handle<Request<Body>, Response<Body>>;

const T0: i64 = 1_700_000_000;

fn fixed_now() -> Timestamp {
    Timestamp::from_second(T0).unwrap()
}

fn store<K>(objects: Vec<K>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let mut writer: Writer<K> = Writer::default();
    writer.apply_watcher_event(&watcher::Event::Init);
    for o in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(o));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    writer.as_reader()
}

fn context(services: Vec<Service>, slices: Vec<EndpointSlice>) -> (Arc<Context>, ApiHandle) {
    let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let mut index = crate::roster::SliceIndex::default();
    for slice in &slices {
        index.apply(&watcher::Event::Apply(slice.clone()));
    }
    let ctx = Context {
        fleet: std::sync::Arc::default(),
        client: Client::new(svc, "default"),
        slice_index: Arc::new(Mutex::new(index)),
        services: store(services),
        hub: Arc::new(RosterHub::new()),
        reports: Arc::new(ReportStore::new()),
        metrics: Metrics::new().unwrap(),
        coalescer: Mutex::new(Coalescer::new(Duration::from_secs(1))),
        pacer: Mutex::new(crate::status::Pacer::new(0, 0)),
        settings: Settings::default(),
        caches_synced: tokio::sync::watch::channel(true).1,
        now: fixed_now,
        recorder: None,
        started: tokio::time::Instant::now(),
        event_budget: Mutex::new(crate::status::events::EventBudget::new(
            20,
            Duration::from_secs(60),
        )),
        recorded_majority: Mutex::default(),
    };
    (Arc::new(ctx), handle)
}

/// Both paths, as the controller runs them: the roster, then the status.
async fn reconcile_both(pool: &BackendPool, ctx: &Arc<Context>) -> status_writer::Next {
    let object = PoolObject::from(pool);
    let action = reconcile(Arc::new(object.clone()), ctx.clone())
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    status_writer::update(ctx, &object).await.unwrap()
}

fn web_pool() -> BackendPool {
    fixtures::pool("web", "web", IntOrString::String("http".into()))
}

fn web_world() -> (Vec<Service>, Vec<EndpointSlice>) {
    let svc = fixtures::service("web", &[("http", 80)]);
    let slice = fixtures::slice(
        "web-1",
        "web",
        "IPv4",
        ("http", 8080),
        &[("10.0.0.1", READY), ("10.0.0.2", READY)],
    );
    (vec![svc], vec![slice])
}

/// Expect one status patch and answer it; returns the JSON body sent.
async fn expect_status_patch(handle: &mut ApiHandle, pool: &BackendPool) -> Value {
    let (req, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .expect("no API call within 5s")
        .expect("service dropped");
    assert_eq!(req.method(), http::Method::PATCH);
    assert_eq!(
        req.uri().to_string(),
        "/apis/rollcall.dev/v1alpha1/namespaces/shop/backendpools/web/status?&force=true&fieldManager=rollcall-controller"
    );
    assert_eq!(
        req.headers().get("content-type").unwrap(),
        "application/apply-patch+yaml"
    );
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    let mut answer = pool.clone();
    answer.status = serde_json::from_value(body["status"].clone()).unwrap();
    send.send_response(
        Response::builder()
            .body(Body::from(serde_json::to_vec(&answer).unwrap()))
            .unwrap(),
    );
    body
}

#[tokio::test]
async fn writes_the_exact_status_with_server_side_apply() {
    let (services, slices) = web_world();
    let (ctx, mut handle) = context(services, slices);
    let pool = web_pool();
    let verifier = {
        let pool = pool.clone();
        tokio::spawn(async move { expect_status_patch(&mut handle, &pool).await })
    };
    assert_eq!(reconcile_both(&pool, &ctx).await, status_writer::Next::Done);
    let body = verifier.await.unwrap();
    let version = ctx
        .hub
        .current(&PoolRef::new("shop", "web"))
        .unwrap()
        .update
        .version;
    assert_eq!(version, 1_700_000_000_000);
    let when = "2023-11-14T22:13:20Z";
    assert_eq!(
        body,
        json!({
            "apiVersion": "rollcall.dev/v1alpha1",
            "kind": "BackendPool",
            "status": {
                "observedGeneration": 1,
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "AwaitingReports",
                     "message": format!("no sidecar has reported health yet (0 connected); 2 of 2 endpoints ready in their EndpointSlices; roster version {version}"),
                     "observedGeneration": 1, "lastTransitionTime": when},
                    {"type": "Degraded", "status": "False", "reason": "NoEjections",
                     "message": "no endpoint is ejected by most sidecars",
                     "observedGeneration": 1, "lastTransitionTime": when},
                    {"type": "Panic", "status": "False", "reason": "NotInPanic",
                     "message": "no sidecar routes in panic mode",
                     "observedGeneration": 1, "lastTransitionTime": when},
                ],
                "rosterVersion": version,
                "endpoints": {"total": 2, "healthy": 2, "ejected": 0, "probation": 0, "draining": 0},
                "sidecars": {"connected": 0, "reporting": 0},
                "ejections": [],
            }
        })
    );
}

#[tokio::test]
async fn unchanged_status_is_not_written_again() {
    let (services, slices) = web_world();
    let (ctx, mut handle) = context(services, slices);
    let mut pool = web_pool();
    let verifier = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let body = expect_status_patch(&mut handle, &pool).await;
            (body, handle)
        })
    };
    reconcile_both(&pool, &ctx).await;
    let (body, _handle) = verifier.await.unwrap();
    // The object now carries what was written: reconciling again makes no API call (the
    // mock would never answer one, and the timeout would fire).
    pool.status =
        serde_json::from_value::<Option<BackendPoolStatus>>(body["status"].clone()).unwrap();
    let again = tokio::time::timeout(Duration::from_secs(1), reconcile_both(&pool, &ctx));
    assert_eq!(
        again.await.expect("no API call expected"),
        status_writer::Next::Done
    );
}

#[tokio::test]
async fn a_status_someone_else_edited_is_repaired() {
    let (services, slices) = web_world();
    let (ctx, mut handle) = context(services, slices);
    let mut pool = web_pool();
    let verifier = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let body = expect_status_patch(&mut handle, &pool).await;
            (body, handle)
        })
    };
    reconcile_both(&pool, &ctx).await;
    let (body, mut handle) = verifier.await.unwrap();
    let written: BackendPoolStatus = serde_json::from_value(body["status"].clone()).unwrap();
    // Someone zeroes the counts by hand: the next reconcile writes the truth back.
    let mut edited = written.clone();
    edited.endpoints = Some(crate::crd::EndpointCounts::default());
    pool.status = Some(edited);
    let verifier = {
        let pool = pool.clone();
        tokio::spawn(async move { expect_status_patch(&mut handle, &pool).await })
    };
    reconcile_both(&pool, &ctx).await;
    let repaired = verifier.await.unwrap();
    assert_eq!(repaired["status"]["endpoints"]["total"], 2);
}

#[tokio::test]
async fn a_change_within_the_interval_waits_instead_of_writing() {
    let (services, slices) = web_world();
    let (ctx, mut handle) = context(services, slices);
    let pool = web_pool();
    let verifier = {
        let pool = pool.clone();
        tokio::spawn(async move { (expect_status_patch(&mut handle, &pool).await, handle) })
    };
    reconcile_both(&pool, &ctx).await;
    let (_, _handle) = verifier.await.unwrap();
    let mut changed = pool;
    changed.metadata.generation = Some(2);
    let next = tokio::time::timeout(Duration::from_secs(1), reconcile_both(&changed, &ctx))
        .await
        .expect("no API call expected");
    assert!(matches!(next, status_writer::Next::RetryAt(_)), "{next:?}");
}

#[tokio::test]
async fn past_the_overall_bound_another_pools_write_waits_for_its_slot() {
    let (services, slices) = web_world();
    let (ctx, mut handle) = context(services, slices);
    *ctx.pacer.lock() = crate::status::Pacer::new(1, 1);
    let pool = web_pool();
    let verifier = {
        let pool = pool.clone();
        tokio::spawn(async move { (expect_status_patch(&mut handle, &pool).await, handle) })
    };
    assert_eq!(reconcile_both(&pool, &ctx).await, status_writer::Next::Done);
    let (_, _handle) = verifier.await.unwrap();
    // A second pool wants its first write in the same instant: the one write a second is
    // spent, so it is told when its slot comes, and makes no API call meanwhile.
    let canary = fixtures::pool("web-canary", "web", IntOrString::String("http".into()));
    let asked = tokio::time::Instant::now();
    let next = tokio::time::timeout(Duration::from_secs(1), reconcile_both(&canary, &ctx))
        .await
        .expect("no API call expected");
    let status_writer::Next::RetryAt(at) = next else {
        panic!("{next:?}");
    };
    // One second after the first write, which came before `asked`.
    let wait = at.saturating_duration_since(asked);
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(1),
        "{wait:?}"
    );
    assert_eq!(ctx.metrics.status_writes_paced.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_reports_costs_one_status_pass_per_interval_not_one_per_report() {
    let (services, slices) = web_world();
    let (ctx, mut handle) = context(services, slices);
    let pool = web_pool();
    let object = PoolObject::from(&pool);
    reconcile(Arc::new(object.clone()), ctx.clone())
        .await
        .unwrap();
    // Every status write answered (the store here never shows one, so a later pass repairs).
    let answering = {
        let pool = pool.clone();
        tokio::spawn(async move {
            loop {
                expect_status_patch(&mut handle, &pool).await;
            }
        })
    };
    let statuses = tokio::spawn(status_writer::run(
        ctx.clone(),
        store(vec![object]),
        Duration::from_secs(3600),
    ));
    // A hundred reports in a second, each marking the pool dirty, as a fleet acknowledging a
    // new roster does.
    let key = pool_ref(&pool);
    for _ in 0..100 {
        ctx.reports.touch(key.clone());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // One pass at once, one a second later with everything that came meanwhile: not a hundred.
    assert_eq!(ctx.metrics.status_passes.get(), 2);
    statuses.abort();
    answering.abort();
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pool_is_forgotten_by_the_status_loop() {
    let (services, slices) = web_world();
    let (ctx, _handle) = context(services, slices);
    let key = pool_ref(&web_pool());
    // A pass just ran for the pool, and its write waits for a slot under the overall bound
    // (another pool took the only one); then it was deleted (the store no longer holds it).
    assert_eq!(
        ctx.coalescer.lock().begin_pass(&key, Instant::now()),
        Ok(())
    );
    *ctx.pacer.lock() = crate::status::Pacer::new(1, 1);
    let other = PoolRef::new("shop", "other");
    assert_eq!(ctx.pacer.lock().admit(&other, Instant::now()), Ok(()));
    assert!(ctx.pacer.lock().admit(&key, Instant::now()).is_err());
    assert!(ctx.pacer.lock().is_waiting(&key));
    let statuses = tokio::spawn(status_writer::run(
        ctx.clone(),
        store(Vec::<PoolObject>::new()),
        Duration::from_secs(3600),
    ));
    ctx.reports.touch(key.clone());
    // Let the loop take the mark (virtual time: it runs whenever this task waits).
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        ctx.coalescer.lock().begin_pass(&key, Instant::now()),
        Ok(()),
        "its pass time was kept"
    );
    assert!(
        !ctx.pacer.lock().is_waiting(&key),
        "its reserved write slot was kept"
    );
    assert_eq!(ctx.metrics.status_passes.get(), 0);
    statuses.abort();
}

#[test]
fn a_new_leader_holds_status_until_the_sidecars_report_again_or_the_grace_ends() {
    let grace = Duration::from_secs(25);
    let early = Duration::from_secs(3);
    assert!(hold_for_reports(2, 0, early, grace));
    assert!(hold_for_reports(2, 1, early, grace));
    assert!(!hold_for_reports(2, 2, early, grace), "everyone is back");
    assert!(!hold_for_reports(2, 3, early, grace));
    assert!(
        !hold_for_reports(0, 0, early, grace),
        "nobody reported before"
    );
    assert!(!hold_for_reports(2, 0, grace, grace), "the grace is over");
}

#[tokio::test]
async fn after_a_restart_a_status_with_reporting_sidecars_is_not_rewritten_from_nothing() {
    let (services, slices) = web_world();
    let (ctx, _handle) = context(services, slices);
    let mut pool = web_pool();
    pool.status = Some(BackendPoolStatus {
        sidecars: Some(crate::crd::SidecarCounts {
            connected: 2,
            reporting: 2,
        }),
        ..Default::default()
    });
    // No report arrived yet: no status write (the mock would never answer one).
    let next = tokio::time::timeout(Duration::from_secs(1), reconcile_both(&pool, &ctx))
        .await
        .expect("no API call expected");
    assert!(
        matches!(next, status_writer::Next::RetryAt(at) if at <= tokio::time::Instant::now() + Duration::from_secs(1)),
        "{next:?}"
    );
}

#[tokio::test]
async fn missing_service_is_a_condition_and_an_unavailable_roster() {
    let (ctx, mut handle) = context(vec![], vec![]);
    let pool = web_pool();
    let verifier = {
        let pool = pool.clone();
        tokio::spawn(async move { expect_status_patch(&mut handle, &pool).await })
    };
    reconcile_both(&pool, &ctx).await;
    let body = verifier.await.unwrap();
    let ready = &body["status"]["conditions"][0];
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ServiceNotFound");
    assert_eq!(ready["message"], "Service shop/web does not exist");
    assert!(body["status"].get("endpoints").is_none());
    let current = ctx.hub.current(&PoolRef::new("shop", "web")).unwrap();
    assert!(matches!(
        current.update.state,
        PoolState::Unavailable {
            reason: UnavailableReason::ServiceNotFound,
            ..
        }
    ));
}
