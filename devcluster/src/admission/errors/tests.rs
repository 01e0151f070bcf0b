//! `field.Error` rendering and the `NewInvalid` message/status, checked against
//! apimachinery `pkg/util/validation/field/errors.go` and `pkg/api/errors/errors.go` (1.35).

use serde_json::json;

use super::super::path::FieldPath;
use super::*;

fn at(path: &str) -> FieldPath {
    path.split('.')
        .fold(FieldPath::root(), |p, name| p.child(name))
}

#[test]
fn error_bodies_render_values_as_go_does() {
    let cases: Vec<(FieldError, &str)> = vec![
        (
            FieldError::invalid(&at("spec.replicas"), json!(-1), "must be >= 0"),
            "spec.replicas: Invalid value: -1: must be >= 0",
        ),
        (
            FieldError::invalid(&at("spec.ratio"), json!(0.5), "x"),
            "spec.ratio: Invalid value: 0.5: x",
        ),
        (
            FieldError::invalid(&at("spec.ratio"), json!(1e6), "x"),
            "spec.ratio: Invalid value: 1e+06: x",
        ),
        (
            FieldError::invalid(&at("spec.name"), json!("a\"b"), "x"),
            "spec.name: Invalid value: \"a\\\"b\": x",
        ),
        (
            FieldError::invalid(&at("spec.on"), json!(true), "x"),
            "spec.on: Invalid value: true: x",
        ),
        (
            FieldError::invalid(&FieldPath::root(), json!(null), "x"),
            "<nil>: Invalid value: null: x",
        ),
        (
            FieldError::invalid(&at("spec.x"), json!({"b": 1, "a": "<"}), "x"),
            "spec.x: Invalid value: {\"a\":\"\\u003c\",\"b\":1}: x",
        ),
        (
            FieldError::new(ErrorKind::Invalid, &at("spec"), None, "no value"),
            "spec: Invalid value: no value",
        ),
        (
            FieldError::required(&at("spec.service"), ""),
            "spec.service: Required value",
        ),
        (
            FieldError::forbidden(&at("spec.a"), "not allowed"),
            "spec.a: Forbidden: not allowed",
        ),
        (
            FieldError::duplicate(
                &FieldPath::root().child("spec").child("ports").index(1),
                Some(json!({"name": "a"})),
            ),
            "spec.ports[1]: Duplicate value: {\"name\":\"a\"}",
        ),
        (
            FieldError::duplicate(&at("spec.a"), None),
            "spec.a: Duplicate value",
        ),
        (
            FieldError::too_long(&at("spec.a"), 32),
            "spec.a: Too long: may not be more than 32 bytes",
        ),
        (
            FieldError::too_long(&at("spec.a"), 1),
            "spec.a: Too long: may not be more than 1 byte",
        ),
        (
            FieldError::too_many(&at("spec.a"), 17, 16),
            "spec.a: Too many: 17: must have at most 16 items",
        ),
        (
            FieldError::too_many(&at("spec.a"), 2, 1),
            "spec.a: Too many: 2: must have at most 1 item",
        ),
        (
            FieldError::type_invalid(&at("spec.a"), json!("string"), "d"),
            "spec.a: Invalid value: \"string\": d",
        ),
        (
            FieldError::not_supported(
                &at("spec.protocol"),
                json!("HTTP3"),
                &["HTTP1".into(), "HTTP2".into()],
            ),
            "spec.protocol: Unsupported value: \"HTTP3\": supported values: \"HTTP1\", \"HTTP2\"",
        ),
        (
            FieldError::internal(&at("spec"), "boom"),
            "spec: Internal error: boom",
        ),
    ];
    for (error, want) in cases {
        assert_eq!(error.to_string(), want);
    }
}

#[test]
fn reasons_are_cause_types() {
    let path = at("spec");
    assert_eq!(
        FieldError::invalid(&path, json!(1), "").reason(),
        "FieldValueInvalid"
    );
    assert_eq!(
        FieldError::required(&path, "").reason(),
        "FieldValueRequired"
    );
    assert_eq!(
        FieldError::not_supported(&path, json!(1), &[]).reason(),
        "FieldValueNotSupported"
    );
    assert_eq!(FieldError::too_long(&path, 1).reason(), "FieldValueTooLong");
    assert_eq!(
        FieldError::too_many(&path, 2, 1).reason(),
        "FieldValueTooMany"
    );
    assert_eq!(
        FieldError::type_invalid(&path, json!(""), "").reason(),
        "FieldValueTypeInvalid"
    );
    assert_eq!(
        FieldError::duplicate(&path, None).reason(),
        "FieldValueDuplicate"
    );
    assert_eq!(
        FieldError::forbidden(&path, "").reason(),
        "FieldValueForbidden"
    );
}

#[test]
fn invalid_message_aggregates_like_new_invalid() {
    let one = FieldError::required(&at("spec.service"), "");
    let two = FieldError::invalid(&at("spec.x"), json!(1), "bad");
    assert_eq!(
        invalid_message("BackendPool", "rollcall.dev", "web", &[]),
        "BackendPool.rollcall.dev \"web\" is invalid"
    );
    assert_eq!(
        invalid_message(
            "BackendPool",
            "rollcall.dev",
            "web",
            std::slice::from_ref(&one)
        ),
        "BackendPool.rollcall.dev \"web\" is invalid: spec.service: Required value"
    );
    assert_eq!(
        invalid_message("Pod", "", "a", &[one.clone(), two.clone(), one.clone()]),
        "Pod \"a\" is invalid: [spec.service: Required value, spec.x: Invalid value: 1: bad]"
    );
    // Duplicates collapse to one message, which then stands alone.
    assert_eq!(
        invalid_message("Pod", "", "a", &[one.clone(), one.clone()]),
        "Pod \"a\" is invalid: spec.service: Required value"
    );
}

#[test]
fn invalid_status_carries_one_cause_per_error() {
    let errors = [
        FieldError::required(&at("spec.service"), ""),
        FieldError::required(&at("spec.service"), ""),
    ];
    let status = invalid_status("BackendPool", "rollcall.dev", "web", &errors);
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["group"], "rollcall.dev");
    assert_eq!(
        status["details"]["causes"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.service"})
    );
    assert_eq!(
        invalid_status("Pod", "", "a", &[])["details"].get("group"),
        None
    );
}
