//! Server-side apply against the real Deployment schema and the BackendPool CRD.

use serde_json::{Value, json};

use super::super::testutil::{LATER, NOW, app, deployment, fields, managers, owns, web};
use super::super::update::record_update;
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
fn create_records_upstream_fields_v1() {
    let config = web(
        2,
        json!([app("nginx:1", json!([{"name": "A", "value": "1"}]))]),
    );
    let created = ssa(None, &config, "kubectl", false).unwrap();
    assert_eq!(
        managers(&created),
        [("kubectl".into(), "Apply".into(), String::new())]
    );
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "apps/v1");
    assert_eq!(entry["time"], NOW);
    assert_eq!(entry["fieldsType"], "FieldsV1");
    let container = json!({
        ".": {}, "f:image": {}, "f:name": {},
        "f:env": {"k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}},
        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
    });
    assert_eq!(
        entry["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": container}}
            }}
        })
    );
    assert_eq!(created["spec"]["replicas"], 2);
    assert!(
        created.get("status").is_some(),
        "built-in kinds start from an object with status {{}}"
    );
}

#[test]
fn two_managers_merge_containers_env_and_ports_by_key() {
    let a = web(
        2,
        json!([app("nginx:1", json!([{"name": "A", "value": "1"}]))]),
    );
    let live = ssa(None, &a, "team-a", false).unwrap();
    let b = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "B", "value": "2"}], "ports": [{"containerPort": 9090, "protocol": "UDP"}]},
            {"name": "sidecar", "image": "envoy"}
        ]}}}
    });
    let live = ssa(Some(&live), &b, "team-b", false).unwrap();
    let containers = &live["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], "nginx:1");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(
        containers[0]["ports"],
        json!([{"containerPort": 80}, {"containerPort": 9090, "protocol": "UDP"}])
    );
    assert_eq!(containers[1]["name"], "sidecar");
    let k = "k:{\"name\":\"app\"}";
    assert!(owns(
        &live,
        "team-b",
        "Apply",
        &[
            "spec",
            "template",
            "spec",
            "containers",
            k,
            "env",
            "k:{\"name\":\"B\"}",
            "value"
        ]
    ));
    assert!(!owns(
        &live,
        "team-b",
        "Apply",
        &["spec", "template", "spec", "containers", k, "image"]
    ));
    assert!(owns(
        &live,
        "team-a",
        "Apply",
        &["spec", "template", "spec", "containers", k, "image"]
    ));
    // Both own the shared container item itself.
    assert!(owns(
        &live,
        "team-a",
        "Apply",
        &["spec", "template", "spec", "containers", k]
    ));
    assert!(owns(
        &live,
        "team-b",
        "Apply",
        &["spec", "template", "spec", "containers", k]
    ));
}

#[test]
fn conflicts_force_and_shared_ownership() {
    let live = ssa(
        None,
        &web(2, json!([app("nginx:1", json!([]))])),
        "team-a",
        false,
    )
    .unwrap();
    let cases: &[(i64, &str, bool, Option<&str>)] = &[
        (2, "nginx:1", false, None),
        (
            3,
            "nginx:1",
            false,
            Some("Apply failed with 1 conflict: conflict with \"team-a\": .spec.replicas"),
        ),
        (
            3,
            "nginx:2",
            false,
            Some(
                "Apply failed with 2 conflicts: conflicts with \"team-a\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"app\"].image",
            ),
        ),
        (3, "nginx:2", true, None),
    ];
    for (replicas, image, force, want) in cases {
        let result = ssa(
            Some(&live),
            &web(*replicas, json!([app(image, json!([]))])),
            "team-b",
            *force,
        );
        match (result, want) {
            (Ok(object), None) => {
                assert!(owns(&object, "team-b", "Apply", &["spec", "replicas"]));
                // Same value: shared; forced: taken from team-a.
                assert_eq!(
                    owns(&object, "team-a", "Apply", &["spec", "replicas"]),
                    !*force
                );
                assert_eq!(object["spec"]["replicas"], *replicas);
            }
            (Err(err), Some(message)) => {
                assert_eq!(err.status_code(), 409);
                assert_eq!(err.reason(), "Conflict");
                assert_eq!(err.to_string(), *message);
                assert_eq!(err.causes()[0].reason, "FieldManagerConflict");
                assert_eq!(err.causes()[0].message, "conflict with \"team-a\"");
                assert_eq!(err.causes()[0].field, ".spec.replicas");
            }
            (other, want) => panic!("replicas {replicas}: got {other:?}, want {want:?}"),
        }
    }
}

#[test]
fn reapply_removes_dropped_fields_unless_another_manager_owns_them() {
    let env = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]);
    let live = ssa(None, &web(2, json!([app("nginx:1", env)])), "team-a", false).unwrap();
    let mut without_b = web(
        2,
        json!([app("nginx:1", json!([{"name": "A", "value": "1"}]))]),
    );
    without_b["metadata"]["labels"] = json!({});
    let pruned = ssa(Some(&live), &without_b, "team-a", false).unwrap();
    let container = &pruned["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["env"], json!([{"name": "A", "value": "1"}]));
    assert_eq!(
        pruned["metadata"].get("labels"),
        None,
        "an emptied label map is dropped"
    );

    // With team-b also applying env B, team-a dropping it removes only team-a's ownership.
    let b = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]}]}}}});
    let shared = ssa(Some(&live), &b, "team-b", false).unwrap();
    let kept = ssa(Some(&shared), &without_b, "team-a", false).unwrap();
    let container = &kept["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    let env_b = [
        "spec",
        "template",
        "spec",
        "containers",
        "k:{\"name\":\"app\"}",
        "env",
        "k:{\"name\":\"B\"}",
    ];
    assert!(!owns(&kept, "team-a", "Apply", &env_b));
    assert!(owns(&kept, "team-b", "Apply", &env_b));
}

#[test]
fn dropped_field_owned_by_an_updater_stays() {
    let live = ssa(
        None,
        &web(2, json!([app("nginx:1", json!([]))])),
        "team-a",
        false,
    )
    .unwrap();
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    let scaled = record_update(
        Some(&live),
        &scaled,
        "kubectl",
        None,
        "apps/v1",
        LATER,
        deployment(),
    );
    assert!(owns(&scaled, "kubectl", "Update", &["spec", "replicas"]));
    assert!(!owns(&scaled, "team-a", "Apply", &["spec", "replicas"]));
    let mut config = web(2, json!([app("nginx:1", json!([]))]));
    config["spec"].as_object_mut().unwrap().remove("replicas");
    let after = ssa(Some(&scaled), &config, "team-a", false).unwrap();
    assert_eq!(after["spec"]["replicas"], 5);
}

#[test]
fn client_side_apply_then_server_side_apply() {
    // kubectl apply (client-side) creates with an Update entry and the last-applied annotation.
    let mut created = web(2, json!([app("nginx:1", json!([]))]));
    let mut last = created.clone();
    last["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    created["metadata"]["annotations"] = json!({LAST_APPLIED: last.to_string()});
    created["metadata"]["uid"] = json!("u1");
    let live = record_update(
        None,
        &created,
        "kubectl-client-side-apply",
        None,
        "apps/v1",
        NOW,
        deployment(),
    );
    assert_eq!(
        managers(&live),
        [(
            "kubectl-client-side-apply".into(),
            "Update".into(),
            String::new()
        )]
    );
    assert_eq!(
        fields(&live, "kubectl-client-side-apply", "Update")["f:metadata"],
        json!({"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}, "f:labels": {".": {}, "f:app": {}}})
    );

    let config = web(3, json!([app("nginx:1", json!([]))]));
    let err = ssa(Some(&live), &config, "ci", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    // kubectl itself takes over what its last client-side apply set, and rewrites the annotation.
    let upgraded = ssa(Some(&live), &config, "kubectl", false).unwrap();
    assert!(owns(&upgraded, "kubectl", "Apply", &["spec", "replicas"]));
    assert!(!owns(
        &upgraded,
        "kubectl-client-side-apply",
        "Update",
        &["spec", "replicas"]
    ));
    let annotation = upgraded["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .unwrap();
    let rewritten: Value = serde_json::from_str(annotation).unwrap();
    assert_eq!(rewritten["spec"]["replicas"], 3);
    assert!(annotation.ends_with('\n'));
}

#[test]
fn first_apply_to_untracked_object_records_existing_fields() {
    let mut live = web(2, json!([app("nginx:1", json!([]))]));
    live["metadata"]["uid"] = json!("u1");
    let config = web(2, json!([app("nginx:2", json!([]))]));
    let err = ssa(Some(&live), &config, "kubectl", false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1: .spec.template.spec.containers[name=\"app\"].image"
    );
    let out = ssa(Some(&live), &config, "kubectl", true).unwrap();
    assert_eq!(
        managers(&out),
        [
            ("kubectl".into(), "Apply".into(), String::new()),
            ("before-first-apply".into(), "Update".into(), String::new())
        ]
    );
    assert!(owns(
        &out,
        "before-first-apply",
        "Update",
        &["spec", "replicas"]
    ));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
}

#[test]
fn status_subresource_entries_are_separate() {
    let live = ssa(
        None,
        &web(2, json!([app("nginx:1", json!([]))])),
        "kubectl",
        false,
    )
    .unwrap();
    let mut status = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 9}, "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True"}]}});
    reset_fields_for(&mut status);
    let out = apply(
        Some(&live),
        &status,
        "deployment-controller",
        true,
        Some("status"),
        "apps/v1",
        LATER,
        deployment(),
    )
    .unwrap();
    let mut out = out;
    super::super::update::reset_fields(&mut out, Some(&live), Some("status"), true);
    assert_eq!(
        managers(&out),
        [
            ("kubectl".into(), "Apply".into(), String::new()),
            (
                "deployment-controller".into(),
                "Apply".into(),
                "status".into()
            )
        ]
    );
    assert_eq!(
        out["spec"]["replicas"], 2,
        "a status write leaves spec alone"
    );
    assert_eq!(out["status"]["conditions"][0]["type"], "Available");
    assert_eq!(
        fields(&out, "deployment-controller", "Apply"),
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Available\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:replicas": {}}})
    );
}

fn reset_fields_for(config: &mut Value) {
    super::super::update::reset_fields(config, None, Some("status"), true);
}
