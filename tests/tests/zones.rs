//! Zone-aware routing with the zone the controller reads for each sidecar: the sidecar's token
//! names the Node its Pod runs on (TokenReview passes it on), the controller reads that Node's
//! `topology.kubernetes.io/zone` label and tells the sidecar in its Watch response, and a pool
//! with `loadBalancer.zoneAware` then keeps that sidecar's requests in its zone. A sidecar on a
//! Node without the label is told nothing and routes across every zone; one given `--zone`
//! keeps its own.

use std::time::Duration;

use rollcall_e2e::{PATIENCE, demo_api, run_dir, wait_log};
use rollcall_testkit::system::identity::{self, TokenFile};
use rollcall_testkit::system::{Controller, LocalApi, Sidecar};
use rollcall_testkit::{TestBackend, client};
use serde_json::json;

const POOL: &str = r#"{"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
  "metadata": {"name": "web", "namespace": "shop"},
  "spec": {"service": {"name": "web", "port": "http"}, "healthCheck": {"type": "None"},
           "loadBalancer": {"algorithm": "RoundRobin", "zoneAware": {"enabled": true}}}}"#;

/// A sidecar for pod `pod` on `node`, with a projected token bound to the pod and `args`.
async fn sidecar_on(
    api: &LocalApi,
    controller: &Controller,
    (pod, node): (&str, &str),
    args: &[String],
    dir: &std::path::Path,
) -> (Sidecar, TokenFile) {
    let who = identity::create_pod_on(&api.client, "shop", "client", pod, Some(node))
        .await
        .unwrap();
    let path = dir.join(format!("{pod}.token"));
    let token = TokenFile::project(&api.client, &who, &path, Duration::from_secs(3600))
        .await
        .unwrap();
    let sidecar =
        Sidecar::controlled_with(&controller.url(), "shop/web", pod, Some(&path), args, dir)
            .await
            .unwrap();
    (sidecar, token)
}

/// Wait until `sidecar` routes to all `n` endpoints of `shop/web`.
async fn wait_roster(sidecar: &Sidecar, n: usize) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while sidecar
        .pool("shop/web")
        .await
        .map_or(0, |p| p.endpoints.len())
        != n
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no roster; the sidecar's log:\n{}",
            sidecar.process.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Send `n` GETs through `sidecar` and return how many each backend served.
async fn spread(sidecar: &Sidecar, backends: &[TestBackend], n: usize) -> Vec<u64> {
    for backend in backends {
        backend.reset_counters();
    }
    for _ in 0..n {
        let reply = client::get(sidecar.listen, "/").await.unwrap();
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    backends.iter().map(TestBackend::requests).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_routes_within_the_zone_the_controller_reads_from_its_node() {
    let dir = run_dir("zones");
    // The demo's slices put backend 1, 2 and 3 in zone-a, zone-b and zone-c.
    let nodes = [
        POOL.to_string(),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b",
               "labels": {"topology.kubernetes.io/zone": "zone-b"}}})
        .to_string(),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-unlabelled"}})
            .to_string(),
    ];
    let (api, backends) = demo_api(&dir, "zones-test", &nodes).await.unwrap();
    let mut controller = Controller::start(&api.kubeconfig, "rollcall-controller-0", &dir, &[])
        .await
        .unwrap();
    controller.wait_ready(PATIENCE).await.unwrap();

    let (in_b, _token_b) = sidecar_on(&api, &controller, ("client-b", "node-b"), &[], &dir).await;
    let (anywhere, _token_u) = sidecar_on(
        &api,
        &controller,
        ("client-u", "node-unlabelled"),
        &[],
        &dir,
    )
    .await;
    // A zone set on the sidecar wins over the controller's word.
    let configured = ["--zone".to_string(), "zone-c".to_string()];
    let (in_c, _token_c) =
        sidecar_on(&api, &controller, ("client-c", "node-b"), &configured, &dir).await;
    wait_log(&in_b.process, "zone from the controller").await;
    assert!(
        in_b.process.log_tail(200).contains("zone-b"),
        "{}",
        in_b.process.log_tail(30)
    );
    wait_roster(&in_b, 3).await;
    wait_roster(&anywhere, 3).await;
    wait_roster(&in_c, 3).await;
    wait_log(&in_c.process, "the configured one stays").await;
    assert_eq!(spread(&in_c, &backends, 10).await, [0, 0, 10]);

    // The sidecar on node-b keeps every request in zone-b.
    assert_eq!(spread(&in_b, &backends, 30).await, [0, 30, 0]);
    // The one on the unlabelled node has no zone and round-robins across all three.
    let counts = spread(&anywhere, &backends, 30).await;
    assert!(counts.iter().all(|&c| c >= 5), "{counts:?}");
    assert!(
        !anywhere
            .process
            .log_tail(200)
            .contains("zone from the controller"),
        "{}",
        anywhere.process.log_tail(30)
    );
    // The controller said why it had no zone for that node.
    wait_log(&controller.process, "no topology.kubernetes.io/zone label").await;

    // Zone b's only backend gone: the sidecar spills over to the other zones.
    backends[1].kill().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        for backend in &backends {
            backend.reset_counters();
        }
        let mut ok = 0;
        for _ in 0..20 {
            if client::get(in_b.listen, "/")
                .await
                .is_ok_and(|r| r.status == 200)
            {
                ok += 1;
            }
        }
        if ok == 20 && backends[0].requests() > 0 && backends[2].requests() > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no spill-over after zone-b's backend died; its log:\n{}",
            in_b.process.log_tail(30)
        );
    }
}
