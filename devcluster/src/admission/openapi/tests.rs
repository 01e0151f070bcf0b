//! Update ratcheting of OpenAPI errors, checked against apiextensions-apiserver
//! `pkg/apiserver/validation/ratcheting.go`, apiserver `pkg/cel/common/equality.go` and
//! `maplist.go`, and list-type ratcheting in `pkg/registry/customresource/strategy.go`.

use serde_json::{Value, json};

use super::super::validate;

fn errors(schema: &Value, new: &Value, old: &Value) -> Vec<String> {
    validate(schema, new, Some(old))
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn root(spec_properties: Value) -> Value {
    json!({"type": "object", "properties": {
        "kind": {"type": "string", "enum": ["Good"]},
        "spec": {"type": "object", "properties": spec_properties},
    }})
}

#[test]
fn unchanged_values_keep_their_errors_quiet() {
    let schema = root(json!({"a": {"type": "integer", "maximum": 1}, "b": {"type": "integer"}}));
    let old = json!({"kind": "Good", "spec": {"a": 5, "b": 1}});
    assert!(
        errors(
            &schema,
            &json!({"kind": "Good", "spec": {"a": 5, "b": 2}}),
            &old
        )
        .is_empty()
    );
    assert_eq!(
        errors(
            &schema,
            &json!({"kind": "Good", "spec": {"a": 6, "b": 1}}),
            &old
        ),
        ["spec.a: Invalid value: 6: spec.a in body should be less than or equal to 1"]
    );
    // The resource's own kind is never ratcheted.
    let old = json!({"kind": "Bad", "spec": {"a": 0, "b": 1}});
    assert_eq!(
        errors(
            &schema,
            &json!({"kind": "Bad", "spec": {"a": 0, "b": 2}}),
            &old
        ),
        [r#"kind: Unsupported value: "Bad": supported values: "Good""#]
    );
}

#[test]
fn map_list_items_correlate_by_key_other_lists_do_not() {
    let schema = root(json!({
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer", "maximum": 100}}}},
        "numbers": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    }));
    let old =
        json!({"kind": "Good", "spec": {"ports": [{"name": "a", "port": 999}], "numbers": [-1]}});
    let new = json!({"kind": "Good", "spec": {"ports": [{"name": "b", "port": 500}, {"name": "a", "port": 999}], "numbers": [-1, 5]}});
    assert_eq!(
        errors(&schema, &new, &old),
        [
            "spec.numbers[0]: Invalid value: -1: spec.numbers[0] in body should be greater than or equal to 0",
            "spec.ports[0].port: Invalid value: 500: spec.ports[0].port in body should be less than or equal to 100",
        ]
    );
}

#[test]
fn members_without_a_schema_never_compare_equal() {
    // Upstream quirk: a preserved unknown member has no schema, so its parent is "changed".
    let schema = root(
        json!({"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "maxProperties": 1}}),
    );
    let old = json!({"kind": "Good", "spec": {"free": {"a": 1, "b": 2}}});
    let new = json!({"kind": "Good", "spec": {"free": {"a": 1, "b": 2}, "other": 1}});
    assert_eq!(
        errors(&schema, &new, &old),
        ["spec.free: Too many: 2: must have at most 1 item"]
    );
}

#[test]
fn list_type_errors_are_only_enforced_if_the_old_object_had_none() {
    let schema = root(
        json!({"tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}}),
    );
    let old = json!({"kind": "Good", "spec": {"tags": ["a", "a"]}});
    let new = json!({"kind": "Good", "spec": {"tags": ["a", "a", "b"]}});
    assert!(errors(&schema, &new, &old).is_empty());
    let clean_old = json!({"kind": "Good", "spec": {"tags": ["a"]}});
    assert_eq!(
        errors(&schema, &new, &clean_old),
        [r#"spec.tags[1]: Duplicate value: "a""#]
    );
}
