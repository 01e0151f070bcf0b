//! Create, get, update and delete with the registry's rules and messages: conflicts on a stale
//! resourceVersion, AlreadyExists, NotFound, `generation`, immutable system metadata,
//! `generateName`, finalizers and delete preconditions (Namespaces are in `namespaces.rs`).

mod common;

use common::*;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

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
async fn a_stale_resource_version_is_409_conflict_with_upstreams_message() {
    let fx = fixture_with_pools().await;
    let cm = fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    let pool = fx.create_pool("shop", "web", spec(json!(80))).await;
    // Someone else writes first.
    fx.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"data": {"x": "1"}}),
    )
    .await
    .expect(200);
    let pool_path = format!("{}/web", pools_path("shop"));
    fx.patch(
        &pool_path,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"x": "1"}}}),
    )
    .await
    .expect(200);
    let stale_rv = pool["metadata"]["resourceVersion"].clone();
    let cases = [
        (
            format!("{CMS}/a"),
            cm.clone(),
            None,
            "configmaps \"a\"",
            json!({"name": "a", "kind": "configmaps"}),
        ),
        (
            pool_path.clone(),
            pool.clone(),
            None,
            "backendpools.rollcall.dev \"web\"",
            json!({"name": "web", "group": "rollcall.dev", "kind": "backendpools"}),
        ),
        (
            pool_path.clone(),
            json!({"metadata": {"resourceVersion": stale_rv}}),
            Some("application/merge-patch+json"),
            "backendpools.rollcall.dev \"web\"",
            json!({"name": "web", "group": "rollcall.dev", "kind": "backendpools"}),
        ),
    ];
    for (path, body, patch, what, details) in cases {
        let reply = match patch {
            None => fx.put(&path, &body).await,
            Some(ct) => fx.patch(&path, ct, &body).await,
        };
        assert_eq!(
            (reply.code, reply.body["reason"].as_str()),
            (409, Some("Conflict")),
            "{path}"
        );
        assert_eq!(
            reply.message(),
            format!(
                "Operation cannot be fulfilled on {what}: the object has been modified; please apply your changes to the latest version and try again"
            )
        );
        assert_eq!(reply.body["details"], details);
    }
}

#[tokio::test]
async fn creating_a_taken_name_is_409_already_exists() {
    let fx = fixture_with_pools().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    fx.create_pool("shop", "web", spec(json!(80))).await;
    for (path, body, message) in [
        (
            CMS.to_string(),
            configmap("a", json!({})),
            "configmaps \"a\" already exists",
        ),
        (
            pools_path("shop"),
            pool("web", spec(json!(80))),
            "backendpools.rollcall.dev \"web\" already exists",
        ),
        (
            "/api/v1/namespaces".to_string(),
            json!({"metadata": {"name": "shop"}}),
            "namespaces \"shop\" already exists",
        ),
    ] {
        let reply = fx.post(&path, &body).await;
        assert_eq!(
            (reply.code, reply.body["reason"].as_str(), reply.message()),
            (409, Some("AlreadyExists"), message)
        );
    }
}

#[tokio::test]
async fn a_missing_object_is_404_naming_its_resource() {
    let fx = fixture_with_pools().await;
    let pool_path = format!("{}/nope", pools_path("shop"));
    let merge = "application/merge-patch+json";
    let cases = [
        (
            fx.get(&format!("{CMS}/nope")).await,
            "configmaps \"nope\" not found",
        ),
        (
            fx.put(&format!("{CMS}/nope"), &configmap("nope", json!({})))
                .await,
            "configmaps \"nope\" not found",
        ),
        (
            fx.patch(&format!("{CMS}/nope"), merge, &json!({})).await,
            "configmaps \"nope\" not found",
        ),
        (
            fx.delete(&format!("{CMS}/nope"), None).await,
            "configmaps \"nope\" not found",
        ),
        (
            fx.get(&pool_path).await,
            "backendpools.rollcall.dev \"nope\" not found",
        ),
        (
            fx.patch(&format!("{pool_path}/status"), merge, &json!({}))
                .await,
            "backendpools.rollcall.dev \"nope\" not found",
        ),
        (
            fx.get("/api/v1/namespaces/nope").await,
            "namespaces \"nope\" not found",
        ),
    ];
    for (reply, message) in cases {
        assert_eq!(
            (reply.code, reply.body["reason"].as_str(), reply.message()),
            (404, Some("NotFound"), message)
        );
    }
    let unknown = fx
        .get("/apis/rollcall.dev/v1alpha1/namespaces/shop/nopes")
        .await;
    assert_eq!(
        (unknown.code, unknown.message()),
        (404, "the server could not find the requested resource")
    );
}

#[tokio::test]
async fn generation_counts_spec_changes_and_the_start_of_a_deletion_only() {
    let fx = fixture_with_pools().await;
    let path = format!("{}/web", pools_path("shop"));
    let merge = "application/merge-patch+json";
    let created = fx.create_pool("shop", "web", spec(json!(80))).await;
    assert_eq!(created["metadata"]["generation"], 1);
    let steps = [
        (
            path.clone(),
            json!({"metadata": {"labels": {"team": "a"}, "finalizers": ["rollcall.dev/x"]}}),
            1,
        ),
        (
            format!("{path}/status"),
            json!({"status": {"observedGeneration": 1}}),
            1,
        ),
        (path.clone(), json!({"spec": {"service": {"port": 81}}}), 2),
        (path.clone(), json!({"spec": {"service": {"port": 81}}}), 2),
    ];
    for (target, patch, generation) in steps {
        let after = fx.patch(&target, merge, &patch).await.expect(200);
        assert_eq!(after["metadata"]["generation"], generation, "{patch}");
    }
    // Marking the object for deletion bumps it once (registry `markAsDeleting`).
    let deleting = fx.delete(&path, None).await.expect(200);
    assert_eq!(deleting["metadata"]["generation"], 3);
    let again = fx.delete(&path, None).await.expect(200);
    assert_eq!(again["metadata"]["generation"], 3);
    // Built-in kinds with a spec count the same way.
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
    let deployments = "/apis/apps/v1/namespaces/shop/deployments";
    assert_eq!(
        fx.post(deployments, &deploy).await.expect(201)["metadata"]["generation"],
        1
    );
    let scaled = fx
        .patch(
            &format!("{deployments}/d"),
            merge,
            &json!({"spec": {"replicas": 3}}),
        )
        .await
        .expect(200);
    assert_eq!(scaled["metadata"]["generation"], 2);
}

#[tokio::test]
async fn uid_and_creation_timestamp_cannot_be_changed() {
    let fx = start().await;
    let cm = fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    let mut moved = cm.clone();
    moved["metadata"]["creationTimestamp"] = json!("2001-01-01T00:00:00Z");
    moved["data"] = json!({"x": "1"});
    let updated = fx.put(&format!("{CMS}/a"), &moved).await.expect(200);
    assert_eq!(
        updated["metadata"]["creationTimestamp"],
        cm["metadata"]["creationTimestamp"]
    );
    assert_eq!(updated["data"]["x"], "1");
    let mut other = updated.clone();
    other["metadata"]["uid"] = json!("0b5a1c9e-0000-4000-8000-000000000000");
    let reply = fx.put(&format!("{CMS}/a"), &other).await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let uid = cm["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        reply.message(),
        format!(
            "Operation cannot be fulfilled on configmaps \"a\": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/a, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 0b5a1c9e-0000-4000-8000-000000000000, UID in object meta: {uid}"
        )
    );
}

#[tokio::test]
async fn generate_name_appends_five_random_characters() {
    let fx = start().await;
    let body = json!({"metadata": {"generateName": "web-"}, "data": {}});
    let a = fx.post(CMS, &body).await.expect(201);
    let b = fx.post(CMS, &body).await.expect(201);
    let pattern = regex::Regex::new("^web-[bcdfghjklmnpqrstvwxz2456789]{5}$").unwrap();
    for cm in [&a, &b] {
        let name = cm["metadata"]["name"].as_str().unwrap();
        assert!(pattern.is_match(name), "{name}");
        assert_eq!(cm["metadata"]["generateName"], "web-");
    }
    assert_ne!(a["metadata"]["name"], b["metadata"]["name"]);
    let none = fx.post(CMS, &json!({"metadata": {}})).await;
    assert_eq!(
        (none.code, none.message()),
        (
            422,
            "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
        )
    );
}

#[tokio::test]
async fn finalizers_keep_a_deleted_object_until_the_last_one_is_removed() {
    let fx = fixture_with_pools().await;
    let path = format!("{}/web", pools_path("shop"));
    let mut body = pool("web", spec(json!(80)));
    body["metadata"]["finalizers"] = json!(["a.rollcall.dev/one", "a.rollcall.dev/two"]);
    fx.post(&pools_path("shop"), &body).await.expect(201);
    let mut watch = fx
        .watch(
            &pools_path("shop"),
            &format!("resourceVersion={}", fx.current_rv().await),
        )
        .await;
    let deleting = fx.delete(&path, None).await.expect(200);
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(deleting["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(summary(&watch.next().await.unwrap()), "MODIFIED web");
    assert!(fx.get(&path).await.expect(200)["metadata"]["deletionTimestamp"].is_string());
    let json_patch = "application/json-patch+json";
    fx.patch(
        &path,
        json_patch,
        &json!([{"op": "remove", "path": "/metadata/finalizers/0"}]),
    )
    .await
    .expect(200);
    let one_left = watch.next().await.unwrap();
    assert_eq!(
        one_left["object"]["metadata"]["finalizers"],
        json!(["a.rollcall.dev/two"])
    );
    fx.patch(
        &path,
        json_patch,
        &json!([{"op": "remove", "path": "/metadata/finalizers"}]),
    )
    .await
    .expect(200);
    assert_eq!(summary(&watch.next().await.unwrap()), "DELETED web");
    assert_eq!(fx.get(&path).await.code, 404);
}

#[tokio::test]
async fn delete_preconditions_refuse_another_uid_or_version() {
    let fx = start().await;
    let cm = fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    let (uid, rv) = (
        cm["metadata"]["uid"].as_str().unwrap(),
        cm["metadata"]["resourceVersion"].as_str().unwrap(),
    );
    let prefix = "Operation cannot be fulfilled on configmaps \"a\": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/a, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed:";
    for (preconditions, detail) in [
        (
            json!({"uid": "other"}),
            format!("UID in precondition: other, UID in object meta: {uid}"),
        ),
        (
            json!({"resourceVersion": "1"}),
            format!("ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}"),
        ),
    ] {
        let reply = fx
            .delete(
                &format!("{CMS}/a"),
                Some(&json!({"preconditions": preconditions})),
            )
            .await;
        assert_eq!(
            (reply.code, reply.message()),
            (409, format!("{prefix} {detail}").as_str())
        );
    }
    let done = fx
        .delete(
            &format!("{CMS}/a"),
            Some(&json!({"preconditions": {"uid": uid, "resourceVersion": rv}})),
        )
        .await
        .expect(200);
    assert_eq!(
        (done["kind"].as_str(), done["status"].as_str()),
        (Some("Status"), Some("Success"))
    );
    assert_eq!(
        done["details"],
        json!({"name": "a", "kind": "configmaps", "uid": uid})
    );
}
