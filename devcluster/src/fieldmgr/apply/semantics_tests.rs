//! Server-side apply semantics by list and map type, no-op applies, and request errors.

use serde_json::{Value, json};

use super::super::testutil::{LATER, NOW, app, deployment, fields, owns, web};
use super::*;

fn ssa(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    apply(
        live,
        config,
        manager,
        force,
        None,
        "apps/v1",
        NOW,
        deployment(),
    )
}

#[test]
fn noop_apply_keeps_object_and_time() {
    let config = web(2, json!([app("nginx:1", json!([]))]));
    let live = ssa(None, &config, "kubectl", false).unwrap();
    let again = apply(
        Some(&live),
        &config,
        "kubectl",
        false,
        None,
        "apps/v1",
        LATER,
        deployment(),
    )
    .unwrap();
    assert_eq!(again, live);
}

#[test]
fn atomic_set_and_map_semantics() {
    let mut config = web(
        1,
        json!([{"name": "app", "image": "x", "args": ["a", "b"]}]),
    );
    config["metadata"]["finalizers"] = json!(["x/one"]);
    config["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a", "disk": "ssd"});
    let live = ssa(None, &config, "one", false).unwrap();
    let mut other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "finalizers": ["x/two"]},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "args": ["c"]}], "nodeSelector": {"zone": "b"}}}}});
    let err = ssa(Some(&live), &other, "two", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        // Upstream lists a node's members before its children.
        "Apply failed with 2 conflicts: conflicts with \"one\":\n- .spec.template.spec.nodeSelector\n- .spec.template.spec.containers[name=\"app\"].args"
    );
    other["metadata"]["labels"] = json!({"team": "b"});
    let out = ssa(Some(&live), &other, "two", true).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["x/one", "x/two"]));
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "team": "b"})
    );
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["args"],
        json!(["c"])
    );
    assert_eq!(
        out["spec"]["template"]["spec"]["nodeSelector"],
        json!({"zone": "b"})
    );
    assert!(!owns(&out, "two", "Apply", &["metadata", "finalizers"]));
    let finalizers = fields(&out, "two", "Apply")["f:metadata"]["f:finalizers"].clone();
    assert_eq!(finalizers, json!({"v:\"x/two\"": {}}));
}

#[test]
fn request_errors_match_upstream() {
    let config = web(1, json!([app("x", json!([]))]));
    let cases: Vec<(Value, &str, u16, &str)> = vec![
        (
            config.clone(),
            "",
            422,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ),
        (
            json!(["x"]),
            "m",
            400,
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            json!({"apiVersion": "apps/v2", "kind": "Deployment"}),
            "m",
            400,
            "invalid object type: apps/v2, Kind=Deployment",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "managedFields": []}}),
            "m",
            400,
            "metadata.managedFields must be nil",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}, "spec": {"foo": 1}}),
            "m",
            500,
            "failed to create typed patch object (ns/web; apps/v1, Kind=Deployment): .spec.foo: field not declared in schema",
        ),
        (
            web(1, json!([{"name": "a"}, {"name": "a"}])),
            "m",
            500,
            "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): .spec.template.spec.containers: duplicate entries for key [name=\"a\"]",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": "two"}}),
            "m",
            500,
            "failed to create typed patch object (/; apps/v1, Kind=Deployment): .spec.replicas: expected numeric (int or float), got string",
        ),
    ];
    for (config, manager, code, message) in cases {
        let err = ssa(None, &config, manager, false).unwrap_err();
        assert_eq!(
            (err.status_code(), err.to_string().as_str()),
            (code, message)
        );
    }
}

#[test]
fn status_json_and_field_sets() {
    let live = ssa(None, &web(1, json!([app("x", json!([]))])), "a", false).unwrap();
    let err = ssa(
        Some(&live),
        &web(2, json!([app("x", json!([]))])),
        "b",
        false,
    )
    .unwrap_err();
    let status = err.to_status();
    assert_eq!(status["code"], 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".spec.replicas"}])
    );
    let long = "m".repeat(129);
    let err = validate_field_manager(&long, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );
    let set = super::super::fields_of(&live, deployment());
    assert!(set.has(&super::super::Path::fields(&["spec", "replicas"]).0));
    assert_eq!(FieldSet::from_value(&set.to_value()).unwrap(), set);
    assert!(!fields(&live, "a", "Apply").is_null());
}
