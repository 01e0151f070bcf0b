//! Test fixtures: the built-in definitions (devcluster's `schemas/kubernetes.json`) and the
//! project's BackendPool CRD (`crds/backendpool.yaml`), read from where they live.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::schema::Schema;

static DEFINITIONS: LazyLock<Map<String, Value>> = LazyLock::new(|| {
    let doc: Value = serde_json::from_str(include_str!("../../schemas/kubernetes.json"))
        .expect("kubernetes.json");
    doc["schemas"].as_object().cloned().expect("schemas")
});

static BACKENDPOOL: LazyLock<Value> = LazyLock::new(|| {
    let crd: Value =
        serde_saphyr::from_str(include_str!("../../../crds/backendpool.yaml")).expect("crd");
    super::crd::custom_resource_schema(
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        true,
    )
});

pub fn builtin(name: &str) -> Schema<'static> {
    Schema::definition(&DEFINITIONS, name).unwrap_or_else(|| panic!("no definition {name}"))
}

pub fn deployment() -> Schema<'static> {
    builtin("io.k8s.api.apps.v1.Deployment")
}

pub fn backendpool() -> Schema<'static> {
    Schema::new(Some(&DEFINITIONS), &BACKENDPOOL)
}

pub fn definitions() -> &'static Map<String, Value> {
    &DEFINITIONS
}

pub const NOW: &str = "2025-01-01T00:00:00Z";
pub const LATER: &str = "2025-01-01T00:01:00Z";

/// `(manager, operation, subresource)` of each managedFields entry, in order.
pub fn managers(object: &Value) -> Vec<(String, String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                    (s("manager"), s("operation"), s("subresource"))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn fields(object: &Value, manager: &str, operation: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|e| e["manager"] == manager && e["operation"] == operation)
        })
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

pub fn web(replicas: i64, containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}
        }
    })
}

pub fn app(image: &str, env: Value) -> Value {
    json!({"name": "app", "image": image, "ports": [{"containerPort": 80}], "env": env})
}

pub fn owns(object: &Value, manager: &str, operation: &str, path: &[&str]) -> bool {
    let set = super::fieldset::FieldSet::from_value(&fields(object, manager, operation))
        .unwrap_or_default();
    let path: Vec<_> = path
        .iter()
        .map(|p| match p.strip_prefix("k:") {
            Some(key) => super::path::PathElement::from_key(&format!("k:{key}"))
                .unwrap()
                .unwrap(),
            None => super::path::PathElement::Field((*p).to_string()),
        })
        .collect();
    set.has(&path)
}
