use super::*;
use serde_json::{Value, json};

const CHECKED_IN: &str = include_str!("../../../crds/backendpool.yaml");

#[test]
fn checked_in_crd_matches_the_types() {
    let generated = yaml().unwrap();
    assert!(
        generated == CHECKED_IN,
        "crds/backendpool.yaml is stale: run `cargo run -p rollcall-controller -- crd > crds/backendpool.yaml`"
    );
}

#[test]
fn every_rule_finds_its_field() {
    let mut crd = BackendPool::crd();
    assert_eq!(rules::apply(&mut crd), rules::EDITS.len());
}

fn schema() -> Value {
    let crd = serde_json::to_value(definition()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Kubernetes' structural schema rules, the parts a derive can get wrong: every node has a
/// type (or is int-or-string / preserve-unknown-fields), no `$ref`, no `additionalProperties`
/// beside `properties`, and `anyOf`/`oneOf`/`allOf` branches carry no types or properties.
fn assert_structural(node: &Value, path: &str) {
    let obj = node
        .as_object()
        .unwrap_or_else(|| panic!("{path}: not an object"));
    assert!(!obj.contains_key("$ref"), "{path}: $ref");
    let typed = obj.contains_key("type")
        || obj.get("x-kubernetes-int-or-string") == Some(&json!(true))
        || obj.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    assert!(typed, "{path}: no type");
    assert!(
        !(obj.contains_key("properties") && obj.contains_key("additionalProperties")),
        "{path}: properties and additionalProperties"
    );
    for key in ["anyOf", "oneOf", "allOf"] {
        for branch in obj.get(key).and_then(Value::as_array).into_iter().flatten() {
            for banned in ["type", "properties", "items", "default", "description"] {
                assert!(
                    branch.get(banned).is_none(),
                    "{path}.{key}: {banned} in a branch"
                );
            }
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            assert_structural(v, &format!("{path}.{k}"));
        }
    }
    if let Some(items) = obj.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
    if let Some(Value::Object(_)) = obj.get("additionalProperties") {
        assert_structural(&obj["additionalProperties"], &format!("{path}{{}}"));
    }
}

#[test]
fn schema_is_structural() {
    assert_structural(&schema(), "");
}

#[test]
fn names_status_and_printer_columns() {
    let crd = definition();
    assert_eq!(crd.spec.group, "rollcall.dev");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names, Some(vec!["bp".to_string()]));
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert!(v.subresources.as_ref().unwrap().status.is_some());
    let cols: Vec<_> = v
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(cols, ["Service", "Healthy", "Ejected", "Panic", "Age"]);
}

#[test]
fn minimal_spec_is_a_complete_pool() {
    let pool: BackendPoolSpec =
        serde_json::from_value(json!({"service": {"name": "checkout", "port": 80}})).unwrap();
    assert_eq!(pool.policy, PoolPolicy::default());
    assert_eq!(pool.service.port, IntOrString::Int(80));
    let named: BackendPoolSpec =
        serde_json::from_value(json!({"service": {"name": "checkout", "port": "http"}})).unwrap();
    assert_eq!(named.service.port, IntOrString::String("http".into()));
}

#[test]
fn policy_fields_sit_beside_service_in_the_spec() {
    let s = schema();
    let spec = &s["properties"]["spec"];
    assert_eq!(spec["required"], json!(["service"]));
    for field in [
        "protocol",
        "healthCheck",
        "outlierDetection",
        "retries",
        "panicThreshold",
    ] {
        assert!(
            spec["properties"][field].is_object(),
            "spec.{field} missing"
        );
    }
    let port = &spec["properties"]["service"]["properties"]["port"];
    assert_eq!(port["x-kubernetes-int-or-string"], json!(true));
}

#[test]
fn status_serializes_without_nulls() {
    let status = BackendPoolStatus::default();
    assert_eq!(
        serde_json::to_value(status).unwrap(),
        json!({"conditions": [], "ejections": []})
    );
}
