//! Callers without a valid token cannot exhaust the controller, on the real binaries and the
//! local API server's TokenReview: a flood of Watch streams that carry no token and declare
//! messages of 3.9 MiB is answered UNAUTHENTICATED before any body is read, while a real
//! sidecar connected from the same address keeps its stream and keeps routing; a burst of
//! forged tokens costs a bounded number of TokenReviews, and the refusals are counted.

use std::time::Duration;

use rollcall_e2e::{PATIENCE, demo_api, run_dir};
use rollcall_testkit::hostile::{self, rss_kib};
use rollcall_testkit::system::identity::{self, TokenFile};
use rollcall_testkit::system::{Controller, LocalApi, Sidecar};
use rollcall_testkit::{TestBackend, client};
use serde_json::json;

struct World {
    api: LocalApi,
    controller: Controller,
    backends: Vec<TestBackend>,
    sidecar: Sidecar,
    _token: TokenFile,
}

/// The API server with pool `shop/web` (three backends), an authenticating controller, and
/// one real sidecar with a projected token, routing.
async fn world(test: &str) -> World {
    let dir = run_dir(test);
    let pool = json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
                      "metadata": {"name": "web", "namespace": "shop"},
                      "spec": {"service": {"name": "web", "port": "http"}}})
    .to_string();
    let (api, backends) = demo_api(&dir, "hostile-test", &[pool]).await.unwrap();
    let mut controller = Controller::start(&api.kubeconfig, "rollcall-controller-0", &dir, &[])
        .await
        .unwrap();
    controller.wait_ready(PATIENCE).await.unwrap();
    let who = identity::create_pod(&api.client, "shop", "client", "client-a")
        .await
        .unwrap();
    let path = dir.join("client-a.token");
    let token = TokenFile::project(&api.client, &who, &path, Duration::from_secs(3600))
        .await
        .unwrap();
    let sidecar = Sidecar::controlled(&controller.url(), "shop/web", &who.pod, Some(&path), &dir)
        .await
        .unwrap();
    let world = World {
        api,
        controller,
        backends,
        sidecar,
        _token: token,
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while routable(&world).await != world.backends.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sidecar never got its roster; its log:\n{}",
            world.sidecar.process.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    world
}

async fn routable(world: &World) -> usize {
    world
        .sidecar
        .pool("shop/web")
        .await
        .map_or(0, |p| p.endpoints.len())
}

/// `name{labels}` from the controller's `/metrics` (0 when absent).
async fn metric(world: &World, series: &str) -> f64 {
    let reply = client::get(world.controller.metrics, "/metrics")
        .await
        .expect("the controller's /metrics answers");
    reply
        .text()
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Requests through the sidecar: how many of `n` succeeded.
async fn through_sidecar(world: &World, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if let Ok(reply) = client::get(world.sidecar.listen, "/").await
            && reply.status.is_success()
        {
            ok += 1;
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_without_tokens_is_refused_unread_and_a_real_sidecar_loses_nothing() {
    let world = world("hostile-flood").await;
    let pid = world.controller.process.pid().unwrap();
    let before = rss_kib(pid);
    // The probe of the security review (32 streams on one connection), then 4 x 64.
    let declared = 3_900 * 1024;
    let one = hostile::flood(
        world.controller.grpc,
        1,
        32,
        None,
        declared,
        Duration::from_secs(10),
    )
    .await;
    let many = hostile::flood(
        world.controller.grpc,
        4,
        64,
        None,
        declared,
        Duration::from_secs(10),
    )
    .await;
    let after = rss_kib(pid);
    eprintln!(
        "flood: streams={} answers={:?} rss_before_kib={before} rss_after_kib={after} \
         growth_kib={}",
        one.total() + many.total(),
        many.by_status,
        after.saturating_sub(before)
    );
    // Every stream answered UNAUTHENTICATED (16) or refused by the limit of streams per
    // connection (h2 REFUSED_STREAM, when the client opens them before it has the server's
    // settings); none left hanging on its body.
    for tally in [&one, &many] {
        assert_eq!(tally.count(hostile::UNANSWERED), 0, "{:?}", tally.by_status);
        assert_eq!(
            tally.count(16) + tally.count(hostile::REFUSED),
            tally.total(),
            "{:?}",
            tally.by_status
        );
    }
    assert_eq!(one.total() + many.total(), 288);
    let refused_unread = (one.count(16) + many.count(16)) as f64;
    let counted = metric(
        &world,
        "rollcall_controller_authentications_total{result=\"no_token\"}",
    )
    .await;
    assert!(
        counted >= refused_unread,
        "{counted} counted, {refused_unread} refused"
    );
    // No TokenReview was spent on a call without a token.
    assert_eq!(
        metric(
            &world,
            "rollcall_controller_token_reviews_total{result=\"refused\"}"
        )
        .await,
        0.0
    );
    // The real sidecar kept its stream and routes everything.
    assert_eq!(
        metric(&world, "rollcall_controller_connected_sidecars").await,
        1.0
    );
    assert_eq!(through_sidecar(&world, 30).await, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tokens_cost_a_bounded_number_of_reviews_and_a_verified_sidecar_still_passes() {
    let world = world("hostile-tokens").await;
    let started = tokio::time::Instant::now();
    let tally = hostile::garbage_tokens(world.controller.grpc, 500, Duration::from_secs(10)).await;
    let elapsed = started.elapsed().as_secs_f64();
    let reviews = metric(
        &world,
        "rollcall_controller_token_reviews_total{result=\"refused\"}",
    )
    .await;
    eprintln!(
        "forged tokens: sent=500 in {elapsed:.2}s answers={:?} token_reviews={reviews}",
        tally.by_status
    );
    assert_eq!(tally.total(), 500);
    // Every one refused: UNAUTHENTICATED (16) after a review, RESOURCE_EXHAUSTED (8) once the
    // source has used up its reviews, or refused unanswered on a connection the controller
    // was closing for that; none accepted, none left hanging.
    assert_eq!(tally.count(hostile::UNANSWERED), 0, "{:?}", tally.by_status);
    assert_eq!(
        tally.count(16) + tally.count(8) + tally.count(hostile::REFUSED),
        500,
        "{:?}",
        tally.by_status
    );
    assert!(tally.count(8) > 0, "the source was never throttled");
    // A burst of 20, then 2 a second (`server::gate`), with one second of slack.
    let bound = 20.0 + 2.0 * (elapsed + 1.0);
    assert!(
        reviews <= bound,
        "{reviews} reviews for forged tokens in {elapsed:.2}s"
    );
    assert_eq!(
        metric(
            &world,
            "rollcall_controller_authentications_total{result=\"throttled\"}"
        )
        .await,
        tally.count(8) as f64
    );
    // The sidecar behind the same address was verified before: still connected, routing, and
    // a roster change still reaches it.
    assert_eq!(
        metric(&world, "rollcall_controller_connected_sidecars").await,
        1.0
    );
    assert_eq!(through_sidecar(&world, 20).await, 20);
    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(world.api.client.clone(), "shop");
    slices.delete("web-b1", &Default::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while routable(&world).await != world.backends.len() - 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the roster change never reached the sidecar"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
