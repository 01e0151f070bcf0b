//! Ownership recorded for non-apply writes.

use serde_json::{Value, json};

use super::super::testutil::{LATER, NOW, backendpool, deployment};
use super::*;

fn deploy(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1", "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": image}]}}}
    })
}

fn update(old: Option<&Value>, new: &Value, manager: &str, now: &str) -> Value {
    record_update(old, new, manager, None, "apps/v1", now, deployment())
}

fn entry<'v>(object: &'v Value, manager: &str) -> &'v Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["manager"] == manager))
        .unwrap_or(&Value::Null)
}

#[test]
fn create_records_added_containers_with_dot_markers() {
    let created = update(None, &deploy(1, "nginx"), "kubectl-create", NOW);
    let e = entry(&created, "kubectl-create");
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["time"], NOW);
    assert_eq!(
        e["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}
        })
    );
}

#[test]
fn changed_fields_move_and_removed_fields_leave_every_set() {
    let created = update(None, &deploy(1, "nginx"), "creator", NOW);
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(4);
    scaled["metadata"]["labels"] = json!({});
    let scaled = update(Some(&created), &scaled, "scaler", LATER);
    assert_eq!(
        entry(&scaled, "scaler")["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    let creator = FieldSet::from_value(&entry(&scaled, "creator")["fieldsV1"]).unwrap();
    assert!(!creator.has(&Path::fields(&["spec", "replicas"]).0));
    assert!(!creator.has(&Path::fields(&["metadata", "labels", "app"]).0));
    assert!(creator.has(&Path::fields(&["spec", "selector"]).0));
    // Entries sort by operation, then time.
    let order: Vec<&str> = scaled["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["creator", "scaler"]);
}

#[test]
fn noop_update_keeps_time_and_entries() {
    let created = update(None, &deploy(1, "nginx"), "creator", NOW);
    let again = update(Some(&created), &created, "creator", LATER);
    assert_eq!(
        again["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );
    let other = update(Some(&created), &created, "someone-else", LATER);
    assert_eq!(entry(&other, "someone-else"), &Value::Null);
}

#[test]
fn request_managed_fields_and_untracked_objects() {
    let created = update(None, &deploy(1, "nginx"), "creator", NOW);
    // `managedFields: []` (or `[{}]`) in an update strips them and stops tracking, as upstream.
    for empty in [json!([]), json!([{}])] {
        let mut reset = created.clone();
        reset["metadata"]["managedFields"] = empty;
        reset["spec"]["replicas"] = json!(2);
        let reset = update(Some(&created), &reset, "resetter", LATER);
        assert_eq!(reset["metadata"].get("managedFields"), None);
    }
    // An existing object without managedFields stays untracked.
    let untracked = deploy(1, "nginx");
    let mut changed = untracked.clone();
    changed["spec"]["replicas"] = json!(3);
    let out = update(Some(&untracked), &changed, "x", LATER);
    assert_eq!(out["metadata"].get("managedFields"), None);
    // A subresource write ignores managedFields sent in the request.
    let mut status = created.clone();
    status["status"] = json!({"replicas": 1});
    status["metadata"]["managedFields"] = json!([]);
    let out = record_update(
        Some(&created),
        &status,
        "ctl",
        Some("status"),
        "apps/v1",
        LATER,
        deployment(),
    );
    let e = entry(&out, "ctl");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
    assert!(!entry(&out, "creator").is_null());
}

#[test]
fn update_managers_are_capped_at_ten() {
    let mut live = update(None, &deploy(0, "nginx"), "creator", "2025-01-01T00:00:00Z");
    for i in 1..=11 {
        let mut next = live.clone();
        next["spec"]["replicas"] = json!(i);
        next["metadata"]["labels"][format!("l{i}")] = json!("x");
        live = update(
            Some(&live),
            &next,
            &format!("m{i}"),
            &format!("2025-01-01T00:00:{i:02}Z"),
        );
    }
    let names: Vec<&str> = live["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 10);
    assert_eq!(names[0], "ancient-changes");
    assert!(!names.contains(&"creator") && !names.contains(&"m1"));
}

#[test]
fn reset_fields_limits_writes_to_their_endpoint() {
    let old = json!({"spec": {"a": 1}, "status": {"s": 1}, "metadata": {"name": "x", "labels": {"k": "v"}}});
    let mut main = json!({"spec": {"a": 2}, "status": {"s": 2}, "metadata": {"name": "x"}});
    reset_fields(&mut main, Some(&old), None, true);
    assert_eq!(
        main,
        json!({"spec": {"a": 2}, "status": {"s": 1}, "metadata": {"name": "x"}})
    );
    let mut status = json!({"spec": {"a": 2}, "status": {"s": 2}, "metadata": {"name": "x"}});
    reset_fields(&mut status, Some(&old), Some("status"), true);
    assert_eq!(
        status,
        json!({"spec": {"a": 1}, "status": {"s": 2}, "metadata": {"name": "x", "labels": {"k": "v"}}})
    );
    let mut config = json!({"apiVersion": "v1", "kind": "K", "spec": {"a": 2}, "status": {"s": 2}, "metadata": {"name": "x", "labels": {}}});
    reset_fields(&mut config, None, Some("status"), true);
    assert_eq!(
        config,
        json!({"apiVersion": "v1", "kind": "K", "status": {"s": 2}, "metadata": {"name": "x"}})
    );
    let mut plain = json!({"spec": {}, "status": {}});
    reset_fields(&mut plain, None, None, false);
    assert_eq!(plain, json!({"spec": {}, "status": {}}));
}

#[test]
fn custom_resource_create_marks_spec_itself() {
    let cr = json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool", "metadata": {"name": "p"},
        "spec": {"service": {"name": "web", "port": 80}}});
    let out = record_update(
        None,
        &cr,
        "kubectl-create",
        None,
        "rollcall.dev/v1alpha1",
        NOW,
        backendpool(),
    );
    assert_eq!(
        entry(&out, "kubectl-create")["fieldsV1"],
        json!({"f:spec": {".": {}, "f:service": {".": {}, "f:name": {}, "f:port": {}}}})
    );
}
