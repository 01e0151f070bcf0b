//! Server-side apply of custom resources: the project's BackendPool CRD, as a kube-rs
//! controller applies its status.

use serde_json::{Value, json};

use super::super::testutil::{NOW, backendpool, fields, managers};
use super::*;

fn pool_status(status: Value) -> Value {
    json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool", "metadata": {"name": "pool", "namespace": "default"}, "status": status})
}

#[test]
fn kube_rs_status_apply_replaces_smaller_status() {
    let spec = json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
        "metadata": {"name": "pool", "namespace": "default"}, "spec": {"service": {"name": "web", "port": 80}}});
    let crd = |live: Option<&Value>, config: &Value, manager: &str, sub: Option<&str>| {
        apply(
            live,
            config,
            manager,
            true,
            sub,
            "rollcall.dev/v1alpha1",
            NOW,
            backendpool(),
        )
        .unwrap()
    };
    let live = crd(None, &spec, "kubectl", None);
    assert_eq!(
        fields(&live, "kubectl", "Apply")["f:spec"],
        json!({"f:service": {"f:name": {}, "f:port": {}}})
    );
    let full = pool_status(json!({
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ok", "message": "", "lastTransitionTime": NOW},
                       {"type": "Degraded", "status": "False", "reason": "Ok", "message": "", "lastTransitionTime": NOW}],
        "ejections": [{"address": "10.0.0.1:80", "ejectedBy": 1, "of": 2, "reason": "5xx", "since": NOW}],
        "endpoints": {"healthy": 2, "ejected": 1}
    }));
    let live = crd(Some(&live), &full, "rollcall-controller", Some("status"));
    assert_eq!(
        live["status"]["ejections"].as_array().map(Vec::len),
        Some(1)
    );
    let smaller = pool_status(json!({
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ok", "message": "", "lastTransitionTime": NOW}],
        "endpoints": {"healthy": 3}
    }));
    let live = crd(Some(&live), &smaller, "rollcall-controller", Some("status"));
    assert_eq!(
        live["status"]["conditions"].as_array().map(Vec::len),
        Some(1),
        "atomic list replaced"
    );
    assert_eq!(
        live["status"].get("ejections"),
        None,
        "dropped field removed"
    );
    assert_eq!(live["status"]["endpoints"], json!({"healthy": 3}));
    assert_eq!(live["spec"]["service"]["name"], "web");
    assert_eq!(
        fields(&live, "rollcall-controller", "Apply"),
        json!({"f:status": {"f:conditions": {}, "f:endpoints": {"f:healthy": {}}}})
    );
    assert_eq!(
        managers(&live)[0],
        ("kubectl".into(), "Apply".into(), String::new())
    );
    assert_eq!(
        managers(&live)[1],
        (
            "rollcall-controller".into(),
            "Apply".into(),
            "status".into()
        )
    );
}

#[test]
fn crd_list_type_map_merges_by_key() {
    let mut schema = super::super::testutil::backendpool()
        .node()
        .cloned()
        .unwrap();
    schema["properties"]["status"]["properties"]["conditions"]["x-kubernetes-list-type"] =
        json!("map");
    schema["properties"]["status"]["properties"]["conditions"]["x-kubernetes-list-map-keys"] =
        json!(["type"]);
    let schema = Schema::new(Some(super::super::testutil::definitions()), &schema);
    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "r", "message": "", "lastTransitionTime": NOW});
    let a = pool_status(json!({"conditions": [cond("Ready", "True")]}));
    let b = pool_status(json!({"conditions": [cond("Panic", "False")]}));
    let live = apply(
        None,
        &a,
        "a",
        false,
        None,
        "rollcall.dev/v1alpha1",
        NOW,
        schema,
    )
    .unwrap();
    let live = apply(
        Some(&live),
        &b,
        "b",
        false,
        None,
        "rollcall.dev/v1alpha1",
        NOW,
        schema,
    )
    .unwrap();
    assert_eq!(
        live["status"]["conditions"],
        json!([cond("Ready", "True"), cond("Panic", "False")])
    );
    let conflict = apply(
        Some(&live),
        &pool_status(json!({"conditions": [cond("Ready", "False")]})),
        "b",
        false,
        None,
        "rollcall.dev/v1alpha1",
        NOW,
        schema,
    );
    assert_eq!(
        conflict.unwrap_err().to_string(),
        "Apply failed with 1 conflict: conflict with \"a\": .status.conditions[type=\"Ready\"].status"
    );
    // Without the annotations the same list is atomic, so b replaces a's conditions.
    let atomic = apply(
        None,
        &a,
        "a",
        false,
        None,
        "rollcall.dev/v1alpha1",
        NOW,
        backendpool(),
    )
    .unwrap();
    let err = apply(
        Some(&atomic),
        &b,
        "b",
        false,
        None,
        "rollcall.dev/v1alpha1",
        NOW,
        backendpool(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"a\": .status.conditions"
    );
}
