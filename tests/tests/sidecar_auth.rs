//! Sidecars authenticate, through the local API server's real TokenRequest, TokenReview and
//! SubjectAccessReview: a caller without a valid projected token (none, garbage, the wrong
//! audience, its Pod deleted) is UNAUTHENTICATED with a message that says what to send; a pod
//! watches its own namespace's pools, and another namespace's only where RBAC lets its
//! ServiceAccount `get` the BackendPool; otherwise PERMISSION_DENIED. A pod's reports are its
//! own whatever it claims, one session per pod, about endpoints in its roster only, with
//! reasons from the closed set and bounded strings. The real sidecar presents the token from
//! its projected file and reads the file again at each reconnect.

use std::time::Duration;

use rollcall_api::proto::v1 as pb;
use rollcall_api::proto::v1::roster_client::RosterClient;
use rollcall_e2e::{PATIENCE, demo_api, ejection, run_dir, wait_log};
use rollcall_testkit::TestBackend;
use rollcall_testkit::system::identity::{self, AUDIENCE, PodIdentity};
use rollcall_testkit::system::{Controller, LocalApi, Sidecar, pool_resource};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};

struct World {
    api: LocalApi,
    controller: Controller,
    backends: Vec<TestBackend>,
}

/// The API server with `shop/web` (three backends) and `shop/web-canary` on the same Service,
/// and one controller that authenticates sidecars.
async fn world(test: &str) -> World {
    let dir = run_dir(test);
    let pools = ["web", "web-canary"].map(|name| {
        json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
               "metadata": {"name": name, "namespace": "shop"},
               "spec": {"service": {"name": "web", "port": "http"}}})
        .to_string()
    });
    let more = [
        pools[0].clone(),
        pools[1].clone(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "front"}}).to_string(),
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "rollcall-system"}})
        .to_string(),
    ];
    let (api, backends) = demo_api(&dir, "sidecar-auth-test", &more).await.unwrap();
    // Grants are re-checked every second here (a minute by default), so a withdrawal shows.
    let mut controller = Controller::start(
        &api.kubeconfig,
        "rollcall-controller-0",
        &dir,
        &["--grant-recheck=1s".to_string()],
    )
    .await
    .unwrap();
    controller.wait_ready(PATIENCE).await.unwrap();
    World {
        api,
        controller,
        backends,
    }
}

async fn client(world: &World) -> RosterClient<Channel> {
    RosterClient::new(
        Channel::from_shared(world.controller.url())
            .unwrap()
            .connect()
            .await
            .unwrap(),
    )
}

fn watch_request(who: &PodIdentity, pools: &[(&str, &str)]) -> pb::WatchRequest {
    pb::WatchRequest {
        fleet_health: false,
        sidecar: Some(pb::SidecarIdentity {
            pod: who.pod.clone(),
            namespace: who.namespace.clone(),
            instance: "i-1".into(),
        }),
        pools: pools
            .iter()
            .map(|(namespace, name)| pb::PoolRef {
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
            .collect(),
        accepts_deltas: false,
        held: Vec::new(),
    }
}

fn bearer<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}

async fn watch(
    world: &World,
    who: &PodIdentity,
    token: Option<&str>,
    pools: &[(&str, &str)],
) -> Result<Streaming<pb::RosterUpdate>, Status> {
    client(world)
        .await
        .watch(bearer(watch_request(who, pools), token))
        .await
        .map(tonic::Response::into_inner)
}

async fn next(stream: &mut Streaming<pb::RosterUpdate>) -> pb::RosterUpdate {
    tokio::time::timeout(PATIENCE, stream.message())
        .await
        .expect("no update in time")
        .expect("the stream failed")
        .expect("the stream ended")
}

fn refused(result: Result<Streaming<pb::RosterUpdate>, Status>, code: Code) -> String {
    match result {
        Ok(_) => panic!("the watch was accepted; expected {code:?}"),
        Err(status) => {
            assert_eq!(status.code(), code, "{status:?}");
            status.message().to_string()
        }
    }
}

async fn pod(world: &World, namespace: &str, service_account: &str, name: &str) -> PodIdentity {
    identity::create_pod(&world.api.client, namespace, service_account, name)
        .await
        .unwrap()
}

async fn token(world: &World, who: &PodIdentity, audience: &str) -> String {
    identity::token(&world.api.client, who, audience, Duration::from_secs(3600))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_without_a_valid_token_is_unauthenticated() {
    let world = world("auth-unauthenticated").await;
    let front = pod(&world, "shop", "front", "front-1").await;
    let pools = [("shop", "web")];

    let none = refused(
        watch(&world, &front, None, &pools).await,
        Code::Unauthenticated,
    );
    assert!(none.contains("authorization: Bearer"), "{none}");
    let garbage = refused(
        watch(&world, &front, Some("not-a-token"), &pools).await,
        Code::Unauthenticated,
    );
    assert!(garbage.contains("refused"), "{garbage}");
    let kubernetes_audience = token(&world, &front, "https://kubernetes.default.svc").await;
    let audience = refused(
        watch(&world, &front, Some(&kubernetes_audience), &pools).await,
        Code::Unauthenticated,
    );
    assert!(audience.contains("refused"), "{audience}");

    // A valid token works; one whose Pod was deleted does not (tokens are bound to their Pod).
    let valid_pod = pod(&world, "shop", "front", "front-2").await;
    let valid = token(&world, &valid_pod, AUDIENCE).await;
    let mut stream = watch(&world, &valid_pod, Some(&valid), &pools)
        .await
        .unwrap();
    assert!(matches!(
        next(&mut stream).await.state,
        Some(pb::roster_update::State::Roster(_))
    ));
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(world.api.client.clone(), "shop");
    let deleted_pod = pod(&world, "shop", "front", "front-3").await;
    let orphan = token(&world, &deleted_pod, AUDIENCE).await;
    pods.delete("front-3", &Default::default()).await.unwrap();
    let deleted = refused(
        watch(&world, &deleted_pod, Some(&orphan), &pools).await,
        Code::Unauthenticated,
    );
    assert!(deleted.contains("refused"), "{deleted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_watches_its_own_namespace_and_others_only_where_rbac_allows() {
    let world = world("auth-rbac").await;
    let own = pod(&world, "shop", "front", "front-1").await;
    let own_token = token(&world, &own, AUDIENCE).await;
    let mut stream = watch(&world, &own, Some(&own_token), &[("shop", "web")])
        .await
        .unwrap();
    match next(&mut stream).await.state {
        Some(pb::roster_update::State::Roster(r)) => assert_eq!(r.endpoints.len(), 3),
        other => panic!("expected the roster, got {other:?}"),
    }

    // A pod of namespace `front` may not watch `shop`'s pools...
    let outsider = pod(&world, "front", "client", "client-1").await;
    let outsider_token = token(&world, &outsider, AUDIENCE).await;
    let denied = refused(
        watch(&world, &outsider, Some(&outsider_token), &[("shop", "web")]).await,
        Code::PermissionDenied,
    );
    assert!(
        denied.contains("ServiceAccount front/client") && denied.contains("shop/web"),
        "{denied}"
    );

    // ... until `shop` grants its ServiceAccount `get` on one of them, and only that one.
    let grant = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-web-pool, namespace: shop}
rules:
  - apiGroups: [rollcall.dev]
    resources: [backendpools]
    resourceNames: [web-canary]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: front-client-reads-web-pool, namespace: shop}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-web-pool}
subjects:
  - {kind: ServiceAccount, name: client, namespace: front}
"#;
    world.api.apply(grant, "sidecar-auth-test").await.unwrap();
    // `web` was just denied (and that answer is cached briefly); ask about `web-canary`,
    // which RBAC now grants, together with a pool it does not.
    let pools = [("shop", "web-canary"), ("shop", "checkout")];
    let mut stream = watch(&world, &outsider, Some(&outsider_token), &pools)
        .await
        .unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..2 {
        let update = next(&mut stream).await;
        let name = update.pool.clone().unwrap().name;
        seen.insert(name, update.state);
    }
    assert!(
        matches!(
            seen.get("web-canary"),
            Some(Some(pb::roster_update::State::Roster(_)))
        ),
        "{seen:?}"
    );
    match seen.get("checkout") {
        Some(Some(pb::roster_update::State::Unavailable(u))) => {
            assert_eq!(u.reason(), pb::unavailable::Reason::NotPermitted);
            assert!(u.message.contains("RBAC"), "{}", u.message);
        }
        other => panic!("expected checkout to be NOT_PERMITTED, got {other:?}"),
    }

    // `shop` withdraws the grant: the open stream ends, saying why, within twice the re-check
    // interval, and a new one is refused.
    let client = rollcall_testkit::system::client_for(&world.api.kubeconfig)
        .await
        .unwrap();
    let bindings: kube::Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        kube::Api::namespaced(client, "shop");
    bindings
        .delete("front-client-reads-web-pool", &Default::default())
        .await
        .unwrap();
    let ended = tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => {}
                Ok(None) => panic!("the stream ended without a status"),
                Err(status) => return status,
            }
        }
    })
    .await
    .expect("the stream outlived the withdrawn grant");
    assert_eq!(ended.code(), Code::PermissionDenied, "{ended:?}");
    assert!(
        ended.message().contains("withdrawn") && ended.message().contains("shop/web-canary"),
        "{ended:?}"
    );
    let metrics = rollcall_testkit::client::get(world.controller.metrics, "/metrics")
        .await
        .unwrap()
        .text();
    assert!(
        metrics.contains(r#"rollcall_controller_streams_ended_total{reason="access_withdrawn"} 1"#),
        "{metrics}"
    );
}

/// One report stream, fed by a channel.
struct Reporter {
    send: mpsc::Sender<pb::HealthReport>,
    done: tokio::task::JoinHandle<Result<pb::ReportSummary, Status>>,
}

async fn report(world: &World, token: &str) -> Reporter {
    let (send, receive) = mpsc::channel(16);
    let mut client = client(world).await;
    let request = bearer(ReceiverStream::new(receive), Some(token));
    let done = tokio::spawn(async move {
        client
            .report(request)
            .await
            .map(tonic::Response::into_inner)
    });
    Reporter { send, done }
}

fn health(ip: &str, port: u32, reason: &str, last_error: &str) -> pb::EndpointHealth {
    pb::EndpointHealth {
        probe: 0,
        ip: ip.into(),
        port,
        state: pb::EndpointState::Ejected.into(),
        reason: reason.into(),
        since_unix_ms: 1,
        times_ejected: 1,
        last_error: last_error.into(),
        ejection_suppressed: false,
    }
}

async fn wait_status(world: &World, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let pools: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(world.api.client.clone(), "shop", &pool_resource());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let status = pools
            .get("web")
            .await
            .ok()
            .and_then(|p| p.data.get("status").cloned())
            .unwrap_or(Value::Null);
        if done(&status) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} within {PATIENCE:?}; status {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_reports_are_its_own_bounded_and_about_its_roster_only() {
    let world = world("auth-reports").await;
    let liar = pod(&world, "shop", "front", "front-1").await;
    let liar_token = token(&world, &liar, AUDIENCE).await;
    let mut watching = watch(&world, &liar, Some(&liar_token), &[("shop", "web")])
        .await
        .unwrap();
    let version = next(&mut watching).await.version;
    let target = world.backends[0].addr();
    let pool = |endpoints| pb::PoolHealth {
        pool: Some(pb::PoolRef {
            namespace: "shop".into(),
            name: "web".into(),
        }),
        roster_version: version,
        panic: false,
        endpoints,
        ..Default::default()
    };
    let first = report(&world, &liar_token).await;
    first
        .send
        .send(pb::HealthReport {
            sidecar: None,
            pools: vec![pool(vec![
                health(
                    &target.ip().to_string(),
                    u32::from(target.port()),
                    "<img src=x onerror=alert(1)>",
                    &"x\u{7}".repeat(10_000),
                ),
                // Not in the roster: a made-up endpoint.
                health("10.9.9.9", 1, "ConsecutiveGatewayErrors", ""),
            ])],
        })
        .await
        .unwrap();
    let status = wait_status(&world, "the ejection", |s| {
        ejection(s, &target.to_string()).is_some()
    })
    .await;
    let entry = ejection(&status, &target.to_string()).unwrap();
    assert_eq!(entry["reason"], "Other", "{entry}");
    // Bounded, cleaned, and marked as the sidecar's words, quoted.
    let last_error = entry["lastError"].as_str().unwrap_or("");
    let quoted = last_error
        .strip_prefix("reported by a sidecar: ")
        .unwrap_or_else(|| panic!("not marked as reported: {last_error:?}"));
    assert!(
        quoted.starts_with('"')
            && quoted.ends_with('"')
            && quoted.chars().count() <= 256 + 2
            && !quoted.contains('\u{7}'),
        "{last_error:?}"
    );
    assert!(ejection(&status, "10.9.9.9:1").is_none(), "{status}");

    // The same pod claims to be another one on a second stream: it is still front-1, its
    // older stream is replaced, and it counts once.
    let second = report(&world, &liar_token).await;
    second
        .send
        .send(pb::HealthReport {
            sidecar: Some(pb::SidecarIdentity {
                pod: "someone-else".into(),
                namespace: "shop".into(),
                instance: "i-2".into(),
            }),
            pools: vec![pool(vec![health(
                &target.ip().to_string(),
                u32::from(target.port()),
                "ConsecutiveGatewayErrors",
                "",
            )])],
        })
        .await
        .unwrap();
    let replaced = tokio::time::timeout(PATIENCE, first.done)
        .await
        .expect("the older report stream did not end")
        .unwrap()
        .expect_err("the older report stream ended cleanly");
    assert_eq!(replaced.code(), Code::Aborted, "{replaced:?}");
    let status = wait_status(&world, "the new reason", |s| {
        ejection(s, &target.to_string()).is_some_and(|e| e["reason"] == "ConsecutiveGatewayErrors")
    })
    .await;
    let entry = ejection(&status, &target.to_string()).unwrap();
    assert_eq!(
        (entry["ejectedBy"].as_u64(), entry["of"].as_u64()),
        (Some(1), Some(1)),
        "{entry}"
    );

    // A report about a pool this pod does not watch is ignored.
    let other = pb::PoolHealth {
        pool: Some(pb::PoolRef {
            namespace: "shop".into(),
            name: "web-canary".into(),
        }),
        ..pool(vec![])
    };
    second
        .send
        .send(pb::HealthReport {
            sidecar: None,
            pools: vec![other],
        })
        .await
        .unwrap();
    drop(second.send);
    let summary = tokio::time::timeout(PATIENCE, second.done)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((summary.accepted, summary.ignored), (1, 1), "{summary:?}");

    // The pod reports the ejection again on the legacy RPC, then stops watching the pool: at
    // its next message, a heartbeat, what it said of the pool stops counting (it used to stay
    // fresh on heartbeats for as long as the report stream lived).
    let third = report(&world, &liar_token).await;
    third
        .send
        .send(pb::HealthReport {
            sidecar: None,
            pools: vec![pool(vec![health(
                &target.ip().to_string(),
                u32::from(target.port()),
                "ConsecutiveGatewayErrors",
                "",
            )])],
        })
        .await
        .unwrap();
    wait_status(&world, "the ejection reported again", |s| {
        ejection(s, &target.to_string()).is_some()
    })
    .await;
    drop(watching);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        third
            .send
            .send(pb::HealthReport {
                sidecar: None,
                pools: Vec::new(),
            })
            .await
            .unwrap();
        let status = wait_status(&world, "a status", |_| true).await;
        if ejection(&status, &target.to_string()).is_none() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a pool the pod no longer watches kept its report: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn endpoints(sidecar: &Sidecar) -> usize {
    sidecar
        .pool("shop/web")
        .await
        .map_or(0, |pool| pool.endpoints.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_presents_its_projected_token_and_reads_it_again_at_each_reconnect() {
    let world = world("sidecar-token-file").await;
    let dir = run_dir("sidecar-token-file-sidecars");
    let url = world.controller.url();

    // No token at all: refused by the controller, which says what to mount.
    let anonymous = Sidecar::controlled(&url, "shop/web", "anonymous", None, &dir)
        .await
        .unwrap();
    wait_log(&anonymous.process, "no ServiceAccount token").await;
    // A token file that is not there: the sidecar says so itself.
    let missing = dir.join("missing.token");
    let unmounted = Sidecar::controlled(&url, "shop/web", "unmounted", Some(&missing), &dir)
        .await
        .unwrap();
    wait_log(
        &unmounted.process,
        "cannot read the ServiceAccount token file",
    )
    .await;

    // A pod whose token file holds garbage at first is refused; once the kubelet (here the
    // test) writes the real token, the next reconnect presents it and the roster arrives.
    let who = pod(&world, "shop", "client", "client-rotating").await;
    let path = dir.join("client-rotating.token");
    identity::write_atomically(&path, "not-a-token").unwrap();
    let rotating = Sidecar::controlled(&url, "shop/web", &who.pod, Some(&path), &dir)
        .await
        .unwrap();
    wait_log(&rotating.process, "Unauthenticated").await;
    assert_eq!(endpoints(&rotating).await, 0);
    let _projected =
        identity::TokenFile::project(&world.api.client, &who, &path, Duration::from_secs(3600))
            .await
            .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while endpoints(&rotating).await != world.backends.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sidecar never got the roster with its new token; its log:\n{}",
            rotating.process.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Neither refused sidecar got a roster meanwhile.
    assert_eq!(endpoints(&anonymous).await, 0);
    assert_eq!(endpoints(&unmounted).await, 0);
}
