//! Server-side apply through the API, as structured-merge-diff and the API server's field
//! manager run it: one managedFields entry per manager, fields dropped from a manager's next
//! apply removed, conflicts (409, upstream's message and causes) unless forced, shared
//! ownership of equal values, the request options checked, and writes that change nothing
//! keeping their resourceVersion.

mod common;

use common::*;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn config(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": data})
}

/// `manager/operation` → the `f:data` keys it owns.
fn owners(object: &Value) -> Vec<(String, Vec<String>)> {
    object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|entry| {
            let mut keys: Vec<String> = entry["fieldsV1"]["f:data"]
                .as_object()
                .map(|d| {
                    d.keys()
                        .map(|k| k.trim_start_matches("f:").to_string())
                        .collect()
                })
                .unwrap_or_default();
            keys.sort();
            (
                format!(
                    "{}/{}",
                    entry["manager"].as_str().unwrap(),
                    entry["operation"].as_str().unwrap()
                ),
                keys,
            )
        })
        .collect()
}

fn owned(pairs: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    pairs
        .iter()
        .map(|(m, keys)| (m.to_string(), keys.iter().map(|k| k.to_string()).collect()))
        .collect()
}

#[tokio::test]
async fn each_manager_gets_its_own_managed_fields_entry() {
    let fx = start().await;
    let path = format!("{CMS}/a");
    let created = fx
        .apply(&path, "alpha", false, &config(json!({"x": "1"})))
        .await
        .expect(201);
    assert_eq!(owners(&created), owned(&[("alpha/Apply", &["x"])]));
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(
        (entry["apiVersion"].as_str(), entry["fieldsType"].as_str()),
        (Some("v1"), Some("FieldsV1"))
    );
    assert!(entry["time"].is_string());
    let both = fx
        .apply(&path, "beta", false, &config(json!({"y": "2"})))
        .await
        .expect(200);
    assert_eq!(both["data"], json!({"x": "1", "y": "2"}));
    assert_eq!(
        owners(&both),
        owned(&[("alpha/Apply", &["x"]), ("beta/Apply", &["y"])])
    );
    // A plain update is recorded as an Update entry of its manager.
    let patched = fx
        .patch(
            &format!("{path}?fieldManager=editor"),
            "application/merge-patch+json",
            &json!({"data": {"z": "3"}}),
        )
        .await
        .expect(200);
    assert_eq!(
        owners(&patched),
        owned(&[
            ("alpha/Apply", &["x"]),
            ("beta/Apply", &["y"]),
            ("editor/Update", &["z"])
        ])
    );
}

#[tokio::test]
async fn a_field_left_out_of_the_next_apply_is_removed() {
    let fx = start().await;
    let path = format!("{CMS}/a");
    fx.apply(&path, "alpha", false, &config(json!({"x": "1", "y": "2"})))
        .await
        .expect(201);
    let after = fx
        .apply(&path, "alpha", false, &config(json!({"x": "1"})))
        .await
        .expect(200);
    assert_eq!(after["data"], json!({"x": "1"}));
    assert_eq!(owners(&after), owned(&[("alpha/Apply", &["x"])]));
}

#[tokio::test]
async fn a_conflicting_apply_is_409_unless_forced() {
    let fx = start().await;
    let path = format!("{CMS}/a");
    fx.apply(&path, "alpha", false, &config(json!({"x": "1", "y": "1"})))
        .await
        .expect(201);
    let reply = fx
        .apply(&path, "beta", false, &config(json!({"x": "2"})))
        .await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    assert_eq!(
        reply.message(),
        "Apply failed with 1 conflict: conflict with \"alpha\": .data.x"
    );
    assert_eq!(
        reply.body["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"alpha\"", "field": ".data.x"}])
    );
    let two = fx
        .apply(&path, "beta", false, &config(json!({"x": "2", "y": "2"})))
        .await;
    assert_eq!(
        two.message(),
        "Apply failed with 2 conflicts: conflicts with \"alpha\":\n- .data.x\n- .data.y"
    );
    // Forced, the applier takes the field over; the old owner keeps the rest.
    let forced = fx
        .apply(&path, "beta", true, &config(json!({"x": "2"})))
        .await
        .expect(200);
    assert_eq!(forced["data"], json!({"x": "2", "y": "1"}));
    assert_eq!(
        owners(&forced),
        owned(&[("alpha/Apply", &["y"]), ("beta/Apply", &["x"])])
    );
}

#[tokio::test]
async fn a_conflict_with_an_update_names_its_api_version() {
    let fx = start().await;
    let path = format!("{CMS}/a");
    fx.post(
        &format!("{CMS}?fieldManager=editor"),
        &config(json!({"x": "1"})),
    )
    .await
    .expect(201);
    let reply = fx
        .apply(&path, "alpha", false, &config(json!({"x": "2"})))
        .await;
    // The manager identifier carries no time (`BuildManagerIdentifier`), so none is printed.
    assert_eq!(
        reply.message(),
        "Apply failed with 1 conflict: conflict with \"editor\" using v1: .data.x"
    );
}

#[tokio::test]
async fn equal_values_are_owned_together_and_outlive_one_owner() {
    let fx = start().await;
    let path = format!("{CMS}/a");
    fx.apply(&path, "alpha", false, &config(json!({"x": "1"})))
        .await
        .expect(201);
    let shared = fx
        .apply(&path, "beta", false, &config(json!({"x": "1"})))
        .await
        .expect(200);
    assert!(
        shared["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["time"].is_string())
    );
    assert_eq!(
        owners(&shared),
        owned(&[("alpha/Apply", &["x"]), ("beta/Apply", &["x"])])
    );
    // alpha lets go; beta still holds the value, so it stays.
    let after = fx
        .apply(&path, "alpha", false, &config(json!({})))
        .await
        .expect(200);
    assert_eq!(after["data"], json!({"x": "1"}));
    assert_eq!(
        owners(&after),
        owned(&[("alpha/Apply", &[]), ("beta/Apply", &["x"])])
    );
}

#[tokio::test]
async fn writes_that_change_nothing_keep_the_resource_version() {
    let fx = start().await;
    let path = format!("{CMS}/a");
    let applied = fx
        .apply(&path, "alpha", false, &config(json!({"x": "1"})))
        .await
        .expect(201);
    let rv = applied["metadata"]["resourceVersion"].clone();
    let again = fx
        .apply(&path, "alpha", false, &config(json!({"x": "1"})))
        .await
        .expect(200);
    assert_eq!(
        again["metadata"]["resourceVersion"], rv,
        "a second identical apply"
    );
    let put = fx
        .put(&format!("{path}?fieldManager=alpha"), &again)
        .await
        .expect(200);
    assert_eq!(
        put["metadata"]["resourceVersion"], rv,
        "an update to the same object"
    );
    let merged = fx
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"data": {"x": "1"}}),
        )
        .await
        .expect(200);
    assert_eq!(
        merged["metadata"]["resourceVersion"], rv,
        "a merge patch to the same value"
    );
    assert_eq!(fx.current_rv().await.to_string(), rv.as_str().unwrap());
}

#[tokio::test]
async fn write_options_are_validated_like_upstreams() {
    let fx = start().await;
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    let body = config(json!({"x": "1"}));
    let long = "m".repeat(129);
    let cases = [
        (
            fx.patch(&format!("{CMS}/a"), "application/apply-patch+yaml", &body)
                .await,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ),
        (
            fx.patch(
                &format!("{CMS}/b?force=true"),
                "application/merge-patch+json",
                &json!({}),
            )
            .await,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
        ),
        (
            fx.post(
                &format!("{CMS}?fieldManager={long}"),
                &configmap("c", json!({})),
            )
            .await,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes",
        ),
        (
            fx.post(&format!("{CMS}?dryRun=Some"), &configmap("c", json!({})))
                .await,
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\"",
        ),
        (
            fx.put(
                &format!("{CMS}/b?fieldValidation=Loose"),
                &configmap("b", json!({})),
            )
            .await,
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loose\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
        ),
    ];
    for (reply, message) in cases {
        assert_eq!(
            (reply.code, reply.body["reason"].as_str(), reply.message()),
            (422, Some("Invalid"), message)
        );
    }
    // dryRun=All answers as if written, and stores nothing.
    let dry = fx
        .post(&format!("{CMS}?dryRun=All"), &configmap("c", json!({})))
        .await
        .expect(201);
    assert_eq!(dry["metadata"]["name"], "c");
    assert_eq!(fx.get(&format!("{CMS}/c")).await.code, 404);
}
