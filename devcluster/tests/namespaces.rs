//! Namespaces as the NamespaceLifecycle admission plugin and the namespace controller keep
//! them: creating in a missing namespace is 404, in a terminating one 403 (naming the object
//! as the request did), and deleting a namespace deletes its contents, waits for what
//! finalizers hold, and then goes itself.

mod common;

use common::*;
use serde_json::{Value, json};
async fn fixture_with_pools() -> Fixture {
    let fx = start().await;
    fx.install_crd().await;
    fx.namespace("shop").await;
    fx
}

fn spec(port: Value) -> Value {
    json!({"service": {"name": "web", "port": port}})
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents_and_then_itself() {
    let fx = fixture_with_pools().await;
    fx.post(
        "/api/v1/namespaces/shop/configmaps",
        &configmap("a", json!({})),
    )
    .await
    .expect(201);
    let mut held = pool("held", spec(json!(80)));
    held["metadata"]["finalizers"] = json!(["rollcall.dev/cleanup"]);
    fx.post(&pools_path("shop"), &held).await.expect(201);
    let mut namespaces = fx
        .watch(
            "/api/v1/namespaces",
            &format!("resourceVersion={}", fx.current_rv().await),
        )
        .await;
    let answer = fx.delete("/api/v1/namespaces/shop", None).await.expect(200);
    assert_eq!(answer["status"]["phase"], "Terminating");
    assert_eq!(summary(&namespaces.next().await.unwrap()), "MODIFIED shop");
    // Its contents went; the pool a finalizer holds waits, and so does the namespace.
    assert_eq!(
        fx.get("/api/v1/namespaces/shop/configmaps/a").await.code,
        404
    );
    assert_eq!(
        fx.get("/api/v1/namespaces/shop/serviceaccounts/default")
            .await
            .code,
        404
    );
    let pool_path = format!("{}/held", pools_path("shop"));
    assert!(fx.get(&pool_path).await.expect(200)["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        fx.get("/api/v1/namespaces/shop").await.expect(200)["status"]["phase"],
        "Terminating"
    );
    // Creating is refused meanwhile (403), with the object named as the request named it.
    let refused = fx
        .post(
            "/api/v1/namespaces/shop/configmaps",
            &json!({"metadata": {"generateName": "late-"}}),
        )
        .await;
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message(),
        "configmaps \"late-\" is forbidden: unable to create new content in namespace shop because it is being terminated"
    );
    assert_eq!(
        refused.body["details"]["causes"][0],
        json!({"reason": "NamespaceTerminating", "field": "metadata.namespace", "message": "namespace shop is being terminated"})
    );
    let refused = fx
        .post(&pools_path("shop"), &pool("web", spec(json!(80))))
        .await;
    assert_eq!(
        refused.message(),
        "backendpools.rollcall.dev \"web\" is forbidden: unable to create new content in namespace shop because it is being terminated"
    );
    // The last finalizer goes: the pool, then the namespace.
    fx.patch(
        &pool_path,
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    )
    .await
    .expect(200);
    assert_eq!(summary(&namespaces.next().await.unwrap()), "DELETED shop");
    assert_eq!(fx.get("/api/v1/namespaces/shop").await.code, 404);
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_404() {
    let fx = fixture_with_pools().await;
    for (path, body) in [
        (
            "/api/v1/namespaces/nowhere/configmaps".to_string(),
            configmap("a", json!({})),
        ),
        (pools_path("nowhere"), pool("web", spec(json!(80)))),
    ] {
        let reply = fx.post(&path, &body).await;
        assert_eq!(
            (reply.code, reply.message()),
            (404, "namespaces \"nowhere\" not found"),
            "{path}"
        );
        assert_eq!(
            reply.body["details"],
            json!({"name": "nowhere", "kind": "namespaces"})
        );
    }
}
