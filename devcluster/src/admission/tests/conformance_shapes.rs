//! Conformance cases for arrays, objects, combinators, list types, embedded resources and
//! the CEL gate; the upstream sources are listed in `conformance.rs`.

use serde_json::json;

use super::super::validate;
use super::conformance::{CONVERT, ERRORS, FIELD, LISTTYPE, OBJECTMETA, STRATEGY, case, check};

#[test]
fn arrays_and_objects() {
    check(&[
        case(
            "maxItems",
            json!({"type": "array", "items": {"type": "integer"}, "maxItems": 1}),
            json!([1, 2]),
            &["spec.x: Too many: 2: must have at most 1 item"],
            &[CONVERT, FIELD],
        ),
        case(
            "minItems",
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 2}),
            json!([1]),
            &["spec.x: Invalid value: 1: spec.x in body should have at least 2 items"],
            &[ERRORS, CONVERT],
        ),
        case(
            "uniqueItems",
            json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true}),
            json!([1, 1]),
            &[r#"spec.x: Invalid value: "": spec.x in body shouldn't contain duplicates"#],
            &[ERRORS, CONVERT],
        ),
        case(
            "items",
            json!({"type": "array", "items": {"type": "integer"}}),
            json!([1, "a"]),
            &[
                r#"spec.x[1]: Invalid value: "string": spec.x[1] in body must be of type integer: "string""#,
            ],
            &["kube-openapi pkg/validation/validate/slice_validator.go"],
        ),
        case(
            "maxProperties",
            json!({"type": "object", "maxProperties": 1}),
            json!({"a": 1, "b": 2}),
            &["spec.x: Too many: 2: must have at most 1 item"],
            &[CONVERT, FIELD],
        ),
        case(
            "minProperties",
            json!({"type": "object", "minProperties": 2}),
            json!({"a": 1}),
            &["spec.x: Invalid value: 1: spec.x in body should have at least 2 properties"],
            &[ERRORS, CONVERT],
        ),
        case(
            "required",
            json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string"}}}),
            json!({}),
            &["spec.x.a: Required value", "spec.x.b: Required value"],
            &[CONVERT, FIELD],
        ),
        case(
            "forbidden property",
            json!({"type": "object", "additionalProperties": false}),
            json!({"b": 1}),
            &[r#"spec.x: Invalid value: "b": spec.x.b in body is a forbidden property"#],
            &[
                ERRORS,
                "kube-openapi pkg/validation/validate/object_validator.go",
            ],
        ),
        case(
            "map values (dotted in OpenAPI errors)",
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            json!({"k": "v"}),
            &[
                r#"spec.x.k: Invalid value: "string": spec.x.k in body must be of type integer: "string""#,
            ],
            &["kube-openapi pkg/validation/validate/object_validator.go"],
        ),
    ]);
}

#[test]
fn combinators() {
    check(&[
        case(
            "anyOf",
            json!({"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": 1}]}),
            json!(3),
            &[
                r#"<nil>: Invalid value: "": "spec.x" must validate at least one schema (anyOf)"#,
                "spec.x: Invalid value: 3: spec.x in body should be greater than or equal to 5",
            ],
            &[
                "kube-openapi pkg/validation/validate/schema_props.go",
                "kube-openapi pkg/validation/validate/schema_messages.go",
                CONVERT,
            ],
        ),
        case(
            "anyOf passes",
            json!({"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": 4}]}),
            json!(3),
            &[],
            &["kube-openapi pkg/validation/validate/schema_props.go"],
        ),
        case(
            "oneOf, two valid",
            json!({"type": "integer", "oneOf": [{"minimum": 1}, {"maximum": 5}]}),
            json!(3),
            &[
                r#"<nil>: Invalid value: "": "spec.x" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
            ],
            &["kube-openapi pkg/validation/validate/schema_messages.go"],
        ),
        case(
            "allOf",
            json!({"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 2}]}),
            json!(3),
            &[
                "spec.x: Invalid value: 3: spec.x in body should be less than or equal to 2",
                r#"<nil>: Invalid value: "": "spec.x" must validate all the schemas (allOf)"#,
            ],
            &["kube-openapi pkg/validation/validate/schema_props.go"],
        ),
        case(
            "not",
            json!({"type": "integer", "not": {"minimum": 1}}),
            json!(3),
            &[r#"<nil>: Invalid value: "": "spec.x" must not validate the schema (not)"#],
            &["kube-openapi pkg/validation/validate/schema_messages.go"],
        ),
    ]);
}

#[test]
fn list_types_and_embedded_resources() {
    check(&[
        case(
            "set",
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}),
            json!(["a", "b", "a", "a"]),
            &[r#"spec.x[2]: Duplicate value: "a""#],
            &[LISTTYPE, FIELD],
        ),
        case(
            "map with one key",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}),
            json!([{"name": "a", "port": 1}, {"name": "a", "port": 2}]),
            &[r#"spec.x[1]: Duplicate value: {"name":"a"}"#],
            &[LISTTYPE],
        ),
        case(
            "map with two keys",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port"], "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}),
            json!([{"name": "a", "port": 1}, {"name": "a", "port": 2}, {"port": 1, "name": "a"}]),
            &[r#"spec.x[2]: Duplicate value: {"name":"a","port":1}"#],
            &[LISTTYPE],
        ),
        case(
            "map of scalars",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"x-kubernetes-int-or-string": true}}),
            json!(["a"]),
            &[r#"spec.x[0]: Invalid value: "a": must be an object for an array of list-type map"#],
            &[LISTTYPE],
        ),
        case(
            "embedded resource needs apiVersion and kind",
            json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
            json!({"metadata": {"name": "a/b"}}),
            &[
                "spec.x.apiVersion: Required value",
                "spec.x.kind: Required value",
                r#"spec.x.metadata.name: Invalid value: "a/b": may not contain '/'"#,
            ],
            &[OBJECTMETA, "apimachinery pkg/api/validation/path/name.go"],
        ),
        case(
            "embedded kind must be a DNS-1035 label",
            json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
            json!({"apiVersion": "a/b/c", "kind": "My_Kind"}),
            &[
                r#"spec.x.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
                r#"spec.x.kind: Invalid value: "My_Kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            ],
            &[
                OBJECTMETA,
                "apimachinery pkg/util/validation/validation.go",
                "apimachinery pkg/runtime/schema/group_version.go",
            ],
        ),
    ]);
}

#[test]
fn blocking_errors_skip_rules() {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "required": ["a"],
        "properties": {"a": {"type": "string"}, "b": {"type": "integer", "minimum": 0}},
        "x-kubernetes-validations": [{"rule": "false", "message": "never"}],
    }}});
    let messages: Vec<String> = validate(&schema, &json!({"spec": {"b": 1}}), None)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "spec.a: Required value",
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ],
        "checked against {STRATEGY}"
    );
    // A non-blocking error (pattern, bounds) does not stop the rules.
    let messages: Vec<String> = validate(&schema, &json!({"spec": {"a": "x", "b": -1}}), None)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "spec.b: Invalid value: -1: spec.b in body should be greater than or equal to 0",
            "spec: Invalid value: never"
        ]
    );
}
