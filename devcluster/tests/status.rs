//! The status subresource of the project's BackendPool CRD, as apiextensions-apiserver's
//! strategies split an object: writes to the main resource never change `status`, writes to
//! `/status` change nothing but `status` (spec and metadata stay), and server-side apply
//! records each side under its own managedFields entry (`subresource: status`).

mod common;

use common::*;
use serde_json::{Value, json};

const MERGE: &str = "application/merge-patch+json";

async fn fixture() -> (Fixture, String) {
    let fx = start().await;
    fx.install_crd().await;
    fx.namespace("shop").await;
    (fx, format!("{}/web", pools_path("shop")))
}

fn status(healthy: i64) -> Value {
    json!({"endpoints": {"total": 10, "healthy": healthy, "ejected": 0, "probation": 0, "draining": 0}})
}

#[tokio::test]
async fn writes_to_the_main_resource_cannot_change_status() {
    let (fx, path) = fixture().await;
    let mut body = pool("web", json!({"service": {"name": "web", "port": 80}}));
    body["status"] = status(9);
    let created = fx.post(&pools_path("shop"), &body).await.expect(201);
    assert!(
        created.get("status").is_none(),
        "a create sets no status: {created}"
    );
    fx.patch(
        &format!("{path}/status"),
        MERGE,
        &json!({"status": status(3)}),
    )
    .await
    .expect(200);
    let current = fx.get(&path).await.expect(200);
    let rv = current["metadata"]["resourceVersion"].clone();
    // A PUT and a merge patch of the main resource that only touch status change nothing.
    let mut put = current.clone();
    put["status"] = status(7);
    let after_put = fx.put(&path, &put).await.expect(200);
    assert_eq!(after_put["status"]["endpoints"], status(3)["endpoints"]);
    assert_eq!(after_put["metadata"]["resourceVersion"], rv);
    let after_patch = fx
        .patch(
            &path,
            MERGE,
            &json!({"status": status(8), "spec": {"service": {"port": 81}}}),
        )
        .await
        .expect(200);
    assert_eq!(after_patch["status"]["endpoints"], status(3)["endpoints"]);
    assert_eq!(after_patch["spec"]["service"]["port"], 81);
}

#[tokio::test]
async fn writes_to_status_cannot_change_spec_or_metadata() {
    let (fx, path) = fixture().await;
    fx.create_pool(
        "shop",
        "web",
        json!({"service": {"name": "web", "port": 80}}),
    )
    .await;
    let current = fx.get(&path).await.expect(200);
    let mut put = current.clone();
    put["spec"]["service"]["port"] = json!(99);
    put["metadata"]["labels"] = json!({"sneaky": "yes"});
    put["metadata"]["finalizers"] = json!(["rollcall.dev/x"]);
    put["status"] = status(2);
    let after = fx.put(&format!("{path}/status"), &put).await.expect(200);
    assert_eq!(after["status"]["endpoints"], status(2)["endpoints"]);
    assert_eq!(after["spec"]["service"]["port"], 80);
    assert!(
        after["metadata"].get("labels").is_none() && after["metadata"].get("finalizers").is_none(),
        "{after}"
    );
    assert_eq!(after["metadata"]["generation"], 1);
    let patched = fx
        .patch(
            &format!("{path}/status"),
            MERGE,
            &json!({"spec": {"service": {"port": 98}}, "status": status(4)}),
        )
        .await
        .expect(200);
    assert_eq!(
        (
            patched["spec"]["service"]["port"].clone(),
            patched["status"]["endpoints"].clone()
        ),
        (json!(80), status(4)["endpoints"].clone())
    );
    // A stale status write is a conflict like any other.
    let reply = fx.put(&format!("{path}/status"), &put).await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
}

#[tokio::test]
async fn server_side_apply_keeps_spec_and_status_owners_apart() {
    let (fx, path) = fixture().await;
    let mut config = pool("web", json!({"service": {"name": "web", "port": 80}}));
    config["status"] = status(5);
    let created = fx
        .apply(&path, "rollcall", false, &config)
        .await
        .expect(201);
    assert!(
        created.get("status").is_none(),
        "apply to the main resource sets no status"
    );
    let on_status = fx
        .apply(&format!("{path}/status"), "rollcall", false, &{
            let mut c = pool("web", json!({"service": {"name": "web", "port": 9999}}));
            c["status"] = status(5);
            c
        })
        .await
        .expect(200);
    assert_eq!(on_status["status"]["endpoints"], status(5)["endpoints"]);
    assert_eq!(
        on_status["spec"]["service"]["port"], 80,
        "apply to /status changes no spec"
    );
    let entries = on_status["metadata"]["managedFields"].as_array().unwrap();
    let summary: Vec<(String, String, Vec<String>)> = entries
        .iter()
        .map(|e| {
            let mut top: Vec<String> = e["fieldsV1"].as_object().unwrap().keys().cloned().collect();
            top.sort();
            (
                e["manager"].as_str().unwrap().into(),
                e["subresource"].as_str().unwrap_or("").into(),
                top,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "rollcall".to_string(),
                String::new(),
                vec!["f:spec".to_string()]
            ),
            (
                "rollcall".to_string(),
                "status".to_string(),
                vec!["f:status".to_string()]
            ),
        ]
    );
    // Another status applier conflicts with the first on a field it owns.
    let mut rival = pool("web", json!({"service": {"name": "web", "port": 80}}));
    rival["status"] = status(6);
    let reply = fx
        .apply(&format!("{path}/status"), "other", false, &rival)
        .await;
    assert_eq!(reply.code, 409);
    assert_eq!(
        reply.message(),
        "Apply failed with 1 conflict: conflict with \"rollcall\" with subresource \"status\": .status.endpoints.healthy"
    );
}

#[tokio::test]
async fn status_subresource_verbs_are_get_update_and_patch_only() {
    let (fx, path) = fixture().await;
    fx.create_pool(
        "shop",
        "web",
        json!({"service": {"name": "web", "port": 80}}),
    )
    .await;
    assert_eq!(
        fx.get(&format!("{path}/status")).await.expect(200)["kind"],
        "BackendPool"
    );
    let reply = fx.delete(&format!("{path}/status"), None).await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
}
