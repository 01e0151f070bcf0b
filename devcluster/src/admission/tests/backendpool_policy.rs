//! The BackendPool CRD beyond its rules: bounds, enums, required fields, types, patterns,
//! pruning, defaults, update ratcheting and the 422 message.

use serde_json::{Value, json};

use super::super::{FieldError, apply_defaults, invalid_message, validate};
use super::backendpool::{NOT_CHECKED, SCHEMA, admit, messages, pool, with};

#[test]
fn bounds_enums_required_types_and_patterns() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            with(json!({"outlierDetection": {"maxEjectionPercent": 150}})),
            vec![
                "spec.outlierDetection.maxEjectionPercent: Invalid value: 150: spec.outlierDetection.maxEjectionPercent in body should be less than or equal to 100",
            ],
        ),
        (
            with(json!({"healthCheck": {"unhealthyThreshold": -1}})),
            vec![
                "spec.healthCheck.unhealthyThreshold: Invalid value: -1: spec.healthCheck.unhealthyThreshold in body should be greater than or equal to 1",
            ],
        ),
        (
            with(json!({"loadBalancer": {"maxShareMultiple": 0.5}})),
            vec![
                "spec.loadBalancer.maxShareMultiple: Invalid value: 0.5: spec.loadBalancer.maxShareMultiple in body should be greater than or equal to 1",
            ],
        ),
        (
            with(json!({"protocol": "HTTP3"})),
            vec![
                r#"spec.protocol: Unsupported value: "HTTP3": supported values: "HTTP1", "HTTP2", "GRPC""#,
                NOT_CHECKED,
            ],
        ),
        (
            json!({"protocol": "HTTP2"}),
            vec!["spec.service: Required value", NOT_CHECKED],
        ),
        (
            json!({"service": {"port": 80}}),
            vec!["spec.service.name: Required value", NOT_CHECKED],
        ),
        (
            with(json!({"healthCheck": {"healthyThreshold": "2"}})),
            vec![
                r#"spec.healthCheck.healthyThreshold: Invalid value: "string": spec.healthCheck.healthyThreshold in body must be of type integer: "string""#,
                NOT_CHECKED,
            ],
        ),
        (
            with(json!({"healthCheck": {"jitter": "10"}})),
            vec![
                r#"spec.healthCheck.jitter: Invalid value: "10": spec.healthCheck.jitter in body should match '^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)%$'"#,
            ],
        ),
        (
            with(json!({"retries": {"retryOn": ["5xx", "404"]}})),
            vec![
                r#"spec.retries.retryOn[1]: Invalid value: "404": spec.retries.retryOn[1] in body should match '^(connect-failure|reset|5xx|5[0-9][0-9])$'"#,
            ],
        ),
        (
            with(json!({"retries": {"retryOn": vec!["reset"; 17]}})),
            vec![
                "spec.retries.retryOn: Too many: 17: must have at most 16 items",
                NOT_CHECKED,
            ],
        ),
        (
            json!({"service": {"name": "w".repeat(64), "port": 80}}),
            vec![
                "spec.service.name: Too long: may not be more than 63 bytes",
                NOT_CHECKED,
            ],
        ),
        (
            json!({"service": {"name": "", "port": 80}}),
            vec![
                r#"spec.service.name: Invalid value: "": spec.service.name in body should be at least 1 chars long"#,
            ],
        ),
        // A malformed duration fails its pattern and then each rule that parses it.
        (
            with(json!({"healthCheck": {"interval": "2 s"}})),
            vec![
                r#"spec.healthCheck.interval: Invalid value: "2 s": spec.healthCheck.interval in body should match '^(0|([0-9]+(ms|s|m|h))+)$'"#,
                r#"spec.healthCheck: Invalid value: "object": type conversion error from 'string' to 'google.protobuf.Duration' evaluating rule: healthCheck.interval must be more than 0s"#,
                r#"spec.healthCheck: Invalid value: "object": type conversion error from 'string' to 'google.protobuf.Duration' evaluating rule: healthCheck.timeout must be more than 0s and at most healthCheck.interval"#,
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(messages(spec.clone()), want, "{spec}");
    }
    let mut no_spec = pool(Value::Null);
    if let Some(object) = no_spec.as_object_mut() {
        object.remove("spec");
    }
    let errors: Vec<String> = admit(no_spec).2.iter().map(ToString::to_string).collect();
    assert_eq!(errors, ["spec: Required value", NOT_CHECKED]);
}

#[test]
fn unknown_fields_are_pruned_and_reported() {
    let mut object = pool(with(
        json!({"foo": 1, "healthCheck": {"bar": true, "interval": "3s"}}),
    ));
    object["extra"] = json!("x");
    object["metadata"]["bogus"] = json!(1);
    object["status"] = json!({"ejections": [{"address": "10.0.0.1:80", "ejectedBy": 1, "of": 2, "reason": "5xx", "since": "now", "extra": 1}]});
    let (admitted, unknown, errors) = admit(object);
    assert_eq!(
        unknown,
        [
            "metadata.bogus",
            "extra",
            "spec.foo",
            "spec.healthCheck.bar",
            "status.ejections[0].extra"
        ]
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(admitted["spec"]["healthCheck"]["interval"], "3s");
    assert!(admitted.get("extra").is_none() && admitted["metadata"].get("bogus").is_none());
    assert_eq!(
        admitted["metadata"],
        json!({"name": "web", "namespace": "shop"})
    );
}

#[test]
fn defaults_fill_the_policy() {
    let (admitted, _, errors) = admit(pool(with(json!({"healthCheck": {"interval": "5s"}}))));
    assert!(errors.is_empty(), "{errors:?}");
    let spec = &admitted["spec"];
    assert_eq!(spec["protocol"], "HTTP1");
    assert_eq!(spec["panicThreshold"], "50%");
    assert_eq!(spec["healthCheck"]["interval"], "5s");
    assert_eq!(spec["healthCheck"]["type"], "TCP");
    assert_eq!(spec["healthCheck"]["unhealthyThreshold"], 3);
    assert_eq!(
        spec["outlierDetection"]["probation"],
        json!({"successes": 5, "trafficShare": "5%"})
    );
    assert_eq!(
        spec["retries"]["retryOn"],
        json!(["connect-failure", "reset", "502", "503", "504"])
    );
    assert_eq!(spec["loadBalancer"]["maxShareMultiple"], 2.0);
    assert!(spec["loadBalancer"].get("hashHeader").is_none());
    // status is nullable without a default: null stays null; an empty status gets its defaults.
    let (admitted, _, _) = admit(
        json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool", "metadata": {"name": "web"},
        "spec": {"service": {"name": "web", "port": 80}}, "status": null}),
    );
    assert_eq!(admitted["status"], Value::Null);
    let (admitted, _, _) = admit(
        json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool", "metadata": {"name": "web"},
        "spec": {"service": {"name": "web", "port": 80}}, "status": {}}),
    );
    assert_eq!(
        admitted["status"],
        json!({"conditions": [], "ejections": []})
    );
}

#[test]
fn updates_ratchet_unchanged_values() {
    let mut stored = pool(with(
        json!({"outlierDetection": {"maxEjectionPercent": 150}}),
    ));
    apply_defaults(&SCHEMA, &mut stored);
    // Only the service name changes: the stale bound is not held against the update.
    let mut renamed = stored.clone();
    renamed["spec"]["service"]["name"] = json!("web2");
    assert_eq!(
        validate(&SCHEMA, &renamed, Some(&stored)),
        Vec::<FieldError>::new()
    );
    // Touching the field itself is checked again.
    let mut raised = stored.clone();
    raised["spec"]["outlierDetection"]["maxEjectionPercent"] = json!(120);
    let errors: Vec<String> = validate(&SCHEMA, &raised, Some(&stored))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errors,
        [
            "spec.outlierDetection.maxEjectionPercent: Invalid value: 120: spec.outlierDetection.maxEjectionPercent in body should be less than or equal to 100"
        ]
    );
    // Rules ratchet too: an unchanged failing rule stays quiet, a changed one is checked.
    let mut stale = pool(with(json!({"loadBalancer": {"algorithm": "RingHash"}})));
    apply_defaults(&SCHEMA, &mut stale);
    let mut touched = stale.clone();
    touched["spec"]["protocol"] = json!("HTTP2");
    assert_eq!(
        validate(&SCHEMA, &touched, Some(&stale)),
        Vec::<FieldError>::new()
    );
    touched["spec"]["loadBalancer"]["maxShareMultiple"] = json!(3.0);
    assert_eq!(validate(&SCHEMA, &touched, Some(&stale)).len(), 1);
}

#[test]
fn the_422_message_lists_every_error() {
    let (_, _, errors) = admit(pool(with(
        json!({"protocol": "HTTP3", "outlierDetection": {"maxEjectionPercent": 150}}),
    )));
    assert_eq!(
        invalid_message("BackendPool", "rollcall.dev", "web", &errors),
        concat!(
            r#"BackendPool.rollcall.dev "web" is invalid: ["#,
            "spec.outlierDetection.maxEjectionPercent: Invalid value: 150: spec.outlierDetection.maxEjectionPercent in body should be less than or equal to 100, ",
            r#"spec.protocol: Unsupported value: "HTTP3": supported values: "HTTP1", "HTTP2", "GRPC", "#,
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
        )
    );
    let (_, _, errors) = admit(pool(with(json!({"timeouts": {"request": "0s"}}))));
    assert_eq!(
        invalid_message("BackendPool", "rollcall.dev", "web", &errors),
        r#"BackendPool.rollcall.dev "web" is invalid: spec.timeouts.request: Invalid value: "0s": timeouts.request must be more than 0s"#
    );
}
