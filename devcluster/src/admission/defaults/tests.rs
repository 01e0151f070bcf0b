//! Defaulting cases, checked against apiextensions-apiserver
//! `pkg/apiserver/schema/defaulting/algorithm.go` (and its `algorithm_test.go` cases).

use serde_json::{Value, json};

use super::apply_defaults;

fn defaulted(schema: Value, mut object: Value) -> Value {
    apply_defaults(&schema, &mut object);
    object
}

#[test]
fn defaults_apply_where_upstream_applies_them() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "default": "A"},
        "b": {"type": "string", "default": "B", "nullable": true},
        "c": {"type": "string", "default": "C"},
        "nested": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}}},
        "created": {"type": "object", "default": {}, "properties": {"x": {"type": "integer", "default": 2}}},
        "list": {"type": "array", "items": {"type": "object", "default": {"d": true}, "properties": {"y": {"type": "string", "default": "Y"}}}},
        "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"z": {"type": "integer", "default": 3}}}},
        "nullDefault": {"type": "string", "default": null},
    }});
    let cases = [
        // Absent properties get their default; nested defaults only inside objects that exist,
        // including objects that were themselves just defaulted.
        (
            json!({}),
            json!({"a": "A", "b": "B", "c": "C", "created": {"x": 2}}),
        ),
        // null: kept when nullable, replaced when not.
        (
            json!({"a": null, "b": null}),
            json!({"a": "A", "b": null, "c": "C", "created": {"x": 2}}),
        ),
        (
            json!({"a": "set", "nested": {}}),
            json!({"a": "set", "b": "B", "c": "C", "nested": {"x": 1}, "created": {"x": 2}}),
        ),
        // Items and map values are defaulted; a null item takes the item schema's default.
        (
            json!({"list": [{}, null, {"y": "given"}], "map": {"k": {}, "l": {"z": 9}}}),
            json!({"a": "A", "b": "B", "c": "C", "created": {"x": 2},
                   "list": [{"y": "Y"}, {"d": true, "y": "Y"}, {"y": "given"}], "map": {"k": {"z": 3}, "l": {"z": 9}}}),
        ),
    ];
    for (object, want) in cases {
        assert_eq!(defaulted(schema.clone(), object.clone()), want, "{object}");
    }
}

#[test]
fn defaults_leave_unknown_and_mistyped_values_alone() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string", "default": "A"}}}}});
    assert_eq!(
        defaulted(
            schema.clone(),
            json!({"spec": "not an object", "other": {}})
        ),
        json!({"spec": "not an object", "other": {}})
    );
    assert_eq!(defaulted(schema, json!([1, 2])), json!([1, 2]));
}
