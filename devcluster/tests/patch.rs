//! The three patch formats through the API, as `handlers/patch.go` applies them: JSON patch
//! (a failed `test` is 422), merge patch, strategic merge patch on built-in kinds (lists merged
//! by their merge key, `$patch: delete`), and the 415 a custom resource answers to a
//! strategic merge patch; unknown patch types are 415 as well.

mod common;

use common::*;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "rollcall-sidecar:1"}]}}}})
}

fn containers(deploy: &Value) -> Vec<(String, String)> {
    deploy["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["image"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn json_patch_operations_apply_in_order() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({"x": "1", "y": "2"})))
        .await
        .expect(201);
    let patched = fx
        .patch(
            &format!("{CMS}/a"),
            JSON_PATCH,
            &json!([
                {"op": "test", "path": "/data/x", "value": "1"},
                {"op": "replace", "path": "/data/x", "value": "10"},
                {"op": "remove", "path": "/data/y"},
                {"op": "add", "path": "/metadata/labels", "value": {"app": "web"}},
                {"op": "copy", "from": "/data/x", "path": "/data/z"},
            ]),
        )
        .await
        .expect(200);
    assert_eq!(patched["data"], json!({"x": "10", "z": "10"}));
    assert_eq!(patched["metadata"]["labels"], json!({"app": "web"}));
}

#[tokio::test]
async fn a_failing_json_patch_is_refused_and_changes_nothing() {
    let fx = start().await;
    let before = fx
        .post(CMS, &configmap("a", json!({"x": "1"})))
        .await
        .expect(201);
    let cases = [
        (
            json!([{"op": "test", "path": "/data/x", "value": "2"}]),
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        ),
        (
            json!([{"op": "remove", "path": "/data/nothing"}]),
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        ),
        (
            json!({"op": "add"}),
            400,
            "BadRequest",
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
    ];
    for (patch, code, reason, message) in cases {
        let reply = fx.patch(&format!("{CMS}/a"), JSON_PATCH, &patch).await;
        assert_eq!(
            (reply.code, reply.body["reason"].as_str(), reply.message()),
            (code, Some(reason), message),
            "{patch}"
        );
    }
    let after = fx.get(&format!("{CMS}/a")).await.expect(200);
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn merge_patch_deletes_with_null_and_replaces_lists() {
    let fx = start().await;
    fx.post(DEPLOYMENTS, &deployment()).await.expect(201);
    let patched = fx
        .patch(
            &format!("{DEPLOYMENTS}/web"),
            MERGE,
            &json!({
                "metadata": {"labels": {"app": null, "tier": "front"}},
                "spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x:1"}]}}},
            }),
        )
        .await
        .expect(200);
    assert_eq!(patched["metadata"]["labels"], json!({"tier": "front"}));
    assert_eq!(
        containers(&patched),
        [("only".to_string(), "x:1".to_string())]
    );
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let fx = start().await;
    fx.post(DEPLOYMENTS, &deployment()).await.expect(201);
    let path = format!("{DEPLOYMENTS}/web");
    let patched = fx
        .patch(
            &path,
            STRATEGIC,
            &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]}]}}}}),
        )
        .await
        .expect(200);
    assert_eq!(
        containers(&patched),
        [
            ("app".to_string(), "app:2".to_string()),
            ("sidecar".to_string(), "rollcall-sidecar:1".to_string())
        ]
    );
    // env merges by name too: the new variable joins the old one.
    let mut env: Vec<&str> = patched["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    env.sort_unstable();
    assert_eq!(env, ["A", "B"]);
    let removed = fx
        .patch(
            &path,
            STRATEGIC,
            &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "$patch": "delete"}]}}}}),
        )
        .await
        .expect(200);
    assert_eq!(
        containers(&removed),
        [("app".to_string(), "app:2".to_string())]
    );
}

#[tokio::test]
async fn strategic_merge_patch_of_a_custom_resource_is_415() {
    let fx = start().await;
    fx.install_crd().await;
    fx.create_pool(
        "default",
        "web",
        json!({"service": {"name": "web", "port": 80}}),
    )
    .await;
    let path = format!("{}/web", pools_path("default"));
    let reply = fx
        .patch(
            &path,
            STRATEGIC,
            &json!({"spec": {"service": {"port": 81}}}),
        )
        .await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    assert_eq!(
        reply.message(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    // The other two formats work on it.
    fx.patch(&path, MERGE, &json!({"spec": {"service": {"port": 81}}}))
        .await
        .expect(200);
    let patched = fx
        .patch(
            &path,
            JSON_PATCH,
            &json!([{"op": "replace", "path": "/spec/service/port", "value": "http"}]),
        )
        .await
        .expect(200);
    assert_eq!(patched["spec"]["service"]["port"], "http");
}

#[tokio::test]
async fn an_unknown_patch_type_is_415_listing_the_accepted_ones() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    let reply = fx
        .patch(
            &format!("{CMS}/a"),
            "application/json",
            &json!({"data": {"x": "1"}}),
        )
        .await;
    assert_eq!(reply.code, 415);
    assert_eq!(
        reply.message(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, \
         application/strategic-merge-patch+json, application/apply-patch+yaml"
    );
}
