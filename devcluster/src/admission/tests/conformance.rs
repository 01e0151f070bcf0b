//! One case per schema keyword with the exact message kube-apiserver 1.35 returns. Each case
//! names the upstream file its expected text was checked against:
//! - `ERRORS`: kube-openapi `pkg/validation/errors/schema.go` (message templates),
//! - `VALIDATE`: kube-openapi `pkg/validation/validate/{type,validator,values,schema_props,slice_validator,object_validator}.go`,
//! - `CONVERT`: apiextensions-apiserver `pkg/apiserver/validation/validation.go` (`kubeOpenAPIResultToFieldErrors`),
//! - `FIELD`: apimachinery `pkg/util/validation/field/errors.go`,
//! - `LISTTYPE`: apiextensions-apiserver `pkg/apiserver/schema/listtype/validation.go`,
//! - `OBJECTMETA`: apiextensions-apiserver `pkg/apiserver/schema/objectmeta/validation.go`,
//! - `STRATEGY`: apiextensions-apiserver `pkg/registry/customresource/strategy.go`.

use serde_json::{Value, json};

use super::super::validate;

pub(super) struct Case {
    name: &'static str,
    schema: Value,
    value: Value,
    want: &'static [&'static str],
    checked_against: &'static [&'static str],
}

pub(super) const ERRORS: &str = "kube-openapi pkg/validation/errors/schema.go";
pub(super) const VALIDATE: &str = "kube-openapi pkg/validation/validate/";
pub(super) const CONVERT: &str = "apiextensions-apiserver pkg/apiserver/validation/validation.go";
pub(super) const FIELD: &str = "apimachinery pkg/util/validation/field/errors.go";
pub(super) const LISTTYPE: &str =
    "apiextensions-apiserver pkg/apiserver/schema/listtype/validation.go";
pub(super) const OBJECTMETA: &str =
    "apiextensions-apiserver pkg/apiserver/schema/objectmeta/validation.go";
pub(super) const STRATEGY: &str = "apiextensions-apiserver pkg/registry/customresource/strategy.go";

pub(super) fn case(
    name: &'static str,
    schema: Value,
    value: Value,
    want: &'static [&'static str],
    checked_against: &'static [&'static str],
) -> Case {
    Case {
        name,
        schema,
        value,
        want,
        checked_against,
    }
}

/// Validate `{"spec": {"x": value}}` with `schema` as the schema of `spec.x`.
pub(super) fn run(case: &Case) -> Vec<String> {
    let root = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": case.schema}}}});
    validate(&root, &json!({"spec": {"x": case.value}}), None)
        .iter()
        .map(ToString::to_string)
        .collect()
}

pub(super) fn check(cases: &[Case]) {
    for case in cases {
        assert!(
            !case.checked_against.is_empty(),
            "{}: name the upstream source",
            case.name
        );
        assert_eq!(
            run(case),
            case.want,
            "{} (checked against {:?})",
            case.name,
            case.checked_against
        );
    }
}

#[test]
fn types() {
    check(&[
        case(
            "string for integer",
            json!({"type": "integer"}),
            json!("a"),
            &[
                r#"spec.x: Invalid value: "string": spec.x in body must be of type integer: "string""#,
            ],
            &[ERRORS, VALIDATE, CONVERT],
        ),
        case(
            "integer for string",
            json!({"type": "string"}),
            json!(1),
            &[
                r#"spec.x: Invalid value: "integer": spec.x in body must be of type string: "integer""#,
            ],
            &[ERRORS, VALIDATE],
        ),
        case(
            "object for array",
            json!({"type": "array", "items": {"type": "string"}}),
            json!({}),
            &[r#"spec.x: Invalid value: "object": spec.x in body must be of type array: "object""#],
            &[ERRORS, VALIDATE],
        ),
        case(
            "string for boolean",
            json!({"type": "boolean"}),
            json!("true"),
            &[
                r#"spec.x: Invalid value: "string": spec.x in body must be of type boolean: "string""#,
            ],
            &[ERRORS, VALIDATE],
        ),
        case(
            "null, not nullable",
            json!({"type": "string"}),
            json!(null),
            &[r#"spec.x: Invalid value: "null": spec.x in body must be of type string: "null""#],
            &[VALIDATE],
        ),
        case(
            "null, nullable",
            json!({"type": "string", "nullable": true}),
            json!(null),
            &[],
            &[VALIDATE],
        ),
        case(
            "int-or-string",
            json!({"x-kubernetes-int-or-string": true}),
            json!(true),
            &[
                r#"spec.x: Invalid value: "boolean": spec.x in body must be of type integer,string: "boolean""#,
            ],
            &[CONVERT, VALIDATE],
        ),
        case(
            "integral float is an integer",
            json!({"type": "integer"}),
            json!(2.0),
            &[],
            &[VALIDATE],
        ),
        case(
            "integer is a number",
            json!({"type": "number"}),
            json!(2),
            &[],
            &[VALIDATE],
        ),
        case(
            "fraction for integer",
            json!({"type": "integer"}),
            json!(1.5),
            &[
                r#"spec.x: Invalid value: "number": spec.x in body must be of type integer: "number""#,
                r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.x"#,
            ],
            &[VALIDATE, CONVERT],
        ),
        case(
            "int32 overflow",
            json!({"type": "integer", "format": "int32"}),
            json!(3_000_000_000_i64),
            &[
                r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.x"#,
            ],
            &[VALIDATE, CONVERT],
        ),
        case(
            "unknown integer formats are dropped",
            json!({"type": "integer", "format": "uint32"}),
            json!(-1),
            &[],
            &["apiextensions-apiserver pkg/apiserver/validation/formats.go"],
        ),
    ]);
}

#[test]
fn numbers() {
    check(&[
        case(
            "maximum",
            json!({"type": "integer", "maximum": 10}),
            json!(11),
            &["spec.x: Invalid value: 11: spec.x in body should be less than or equal to 10"],
            &[ERRORS, VALIDATE],
        ),
        case(
            "exclusive maximum",
            json!({"type": "integer", "maximum": 10, "exclusiveMaximum": true}),
            json!(10),
            &["spec.x: Invalid value: 10: spec.x in body should be less than 10"],
            &[ERRORS],
        ),
        case(
            "minimum",
            json!({"type": "integer", "minimum": 0.0}),
            json!(-1),
            &["spec.x: Invalid value: -1: spec.x in body should be greater than or equal to 0"],
            &[ERRORS, VALIDATE],
        ),
        case(
            "exclusive minimum",
            json!({"type": "integer", "minimum": 0, "exclusiveMinimum": true}),
            json!(0),
            &["spec.x: Invalid value: 0: spec.x in body should be greater than 0"],
            &[ERRORS],
        ),
        case(
            "float maximum",
            json!({"type": "number", "maximum": 1.5}),
            json!(2.5),
            &["spec.x: Invalid value: 2.5: spec.x in body should be less than or equal to 1.5"],
            &[ERRORS, FIELD],
        ),
        case(
            "multipleOf",
            json!({"type": "integer", "multipleOf": 3}),
            json!(7),
            &["spec.x: Invalid value: 7: spec.x in body should be a multiple of 3"],
            &[ERRORS, VALIDATE],
        ),
        case(
            "fractional multipleOf",
            json!({"type": "number", "multipleOf": 0.5}),
            json!(0.3),
            &["spec.x: Invalid value: 0.3: spec.x in body should be a multiple of 0.5"],
            &[ERRORS, VALIDATE],
        ),
        case(
            "multipleOf must be positive",
            json!({"type": "integer", "multipleOf": 0}),
            json!(4),
            &[
                "spec.x: Invalid value: 0: factor MultipleOf declared for spec.x must be positive: 0",
            ],
            &[ERRORS],
        ),
    ]);
}

#[test]
fn strings() {
    check(&[
        case(
            "maxLength",
            json!({"type": "string", "maxLength": 3}),
            json!("abcd"),
            &["spec.x: Too long: may not be more than 3 bytes"],
            &[CONVERT, FIELD],
        ),
        case(
            "maxLength counts runes",
            json!({"type": "string", "maxLength": 3}),
            json!("héé"),
            &[],
            &["kube-openapi pkg/validation/validate/values.go"],
        ),
        case(
            "minLength",
            json!({"type": "string", "minLength": 2}),
            json!("é"),
            &[r#"spec.x: Invalid value: "é": spec.x in body should be at least 2 chars long"#],
            &[ERRORS, VALIDATE],
        ),
        case(
            "pattern",
            json!({"type": "string", "pattern": "^a+$"}),
            json!("b"),
            &[r#"spec.x: Invalid value: "b": spec.x in body should match '^a+$'"#],
            &[ERRORS, VALIDATE],
        ),
        case(
            "only the first string error",
            json!({"type": "string", "maxLength": 1, "pattern": "^a$"}),
            json!("bb"),
            &["spec.x: Too long: may not be more than 1 byte"],
            &[VALIDATE],
        ),
        case(
            "enum",
            json!({"type": "string", "enum": ["a", "b"]}),
            json!("c"),
            &[r#"spec.x: Unsupported value: "c": supported values: "a", "b""#],
            &[CONVERT, FIELD],
        ),
        case(
            "numeric enum",
            json!({"type": "integer", "enum": [1, 2]}),
            json!(3),
            &[r#"spec.x: Unsupported value: 3: supported values: "1", "2""#],
            &[CONVERT, FIELD],
        ),
        case(
            "date-time",
            json!({"type": "string", "format": "date-time"}),
            json!("yesterday"),
            &[
                r#"spec.x: Invalid value: "yesterday": spec.x in body must be of type date-time: "yesterday""#,
            ],
            &[ERRORS, CONVERT],
        ),
        case(
            "date-time passes",
            json!({"type": "string", "format": "date-time"}),
            json!("2024-02-29T23:59:59.5+01:00"),
            &[],
            &["kube-openapi pkg/validation/strfmt/time.go"],
        ),
        case(
            "uuid",
            json!({"type": "string", "format": "uuid"}),
            json!("nope"),
            &[r#"spec.x: Invalid value: "nope": spec.x in body must be of type uuid: "nope""#],
            &[ERRORS],
        ),
        case(
            "unknown string formats are dropped",
            json!({"type": "string", "format": "colour"}),
            json!("x"),
            &[],
            &["apiextensions-apiserver pkg/apiserver/validation/formats.go"],
        ),
    ]);
}
