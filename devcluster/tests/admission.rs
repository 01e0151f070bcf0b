//! Admission of BackendPools through the API, with the project's CRD installed as a user
//! would: schema bounds, enums, required fields and types, every CEL rule of the CRD
//! (`controller/src/crd/rules.rs`) with its message, `service.port` as a name or a number,
//! unknown fields under each `fieldValidation`, and the 422 answer in upstream's shape
//! (`Kind.group "name" is invalid: [...]`, `details.causes` with field paths).

mod common;

use common::*;
use serde_json::{Value, json};

const NOT_CHECKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";
const PORT_RULE: &str = "spec.service: Invalid value: service.port must be a port number 1-65535 or the name of a Service port (lowercase letters, digits and '-')";

/// A spec with a valid service plus `policy`.
fn with(policy: Value) -> Value {
    let mut spec = json!({"service": {"name": "web", "port": "http"}});
    if let (Some(spec), Value::Object(policy)) = (spec.as_object_mut(), policy) {
        spec.extend(policy);
    }
    spec
}

async fn fixture() -> Fixture {
    let fx = start().await;
    fx.install_crd().await;
    fx.namespace("shop").await;
    fx
}

/// The field errors of creating a pool with `spec`, as the 422 message lists them.
async fn refusal(fx: &Fixture, spec: Value) -> Vec<String> {
    let reply = fx
        .post(&pools_path("shop"), &pool("bad", spec.clone()))
        .await;
    if reply.code == 201 {
        fx.delete(&format!("{}/bad", pools_path("shop")), None)
            .await
            .expect(200);
        return Vec::new();
    }
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (422, Some("Invalid")),
        "{spec}: {:#}",
        reply.body
    );
    // One cause per error, each naming its field; the message lists them all.
    let errors: Vec<String> = reply.body["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    let listed = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    assert_eq!(
        reply.message(),
        format!("BackendPool.rollcall.dev \"bad\" is invalid: {listed}")
    );
    assert_eq!(reply.body["details"]["name"], "bad");
    assert_eq!(
        (
            reply.body["details"]["group"].as_str(),
            reply.body["details"]["kind"].as_str()
        ),
        (Some("rollcall.dev"), Some("BackendPool"))
    );
    errors
}

#[tokio::test]
async fn schema_bounds_enums_required_fields_and_types_are_enforced() {
    let fx = fixture().await;
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            with(json!({"outlierDetection": {"maxEjectionPercent": 150}})),
            vec![
                "spec.outlierDetection.maxEjectionPercent: Invalid value: 150: spec.outlierDetection.maxEjectionPercent in body should be less than or equal to 100",
            ],
        ),
        (
            with(json!({"healthCheck": {"unhealthyThreshold": 0}})),
            vec![
                "spec.healthCheck.unhealthyThreshold: Invalid value: 0: spec.healthCheck.unhealthyThreshold in body should be greater than or equal to 1",
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
            with(json!({"healthCheck": {"healthyThreshold": "2"}})),
            vec![
                r#"spec.healthCheck.healthyThreshold: Invalid value: "string": spec.healthCheck.healthyThreshold in body must be of type integer: "string""#,
                NOT_CHECKED,
            ],
        ),
        (
            with(json!({"panicThreshold": "half"})),
            vec![
                r#"spec.panicThreshold: Invalid value: "half": spec.panicThreshold in body should match '^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)%$'"#,
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
            with(json!({"retries": {"retryOn": ["5xx", "404"]}})),
            vec![
                r#"spec.retries.retryOn[1]: Invalid value: "404": spec.retries.retryOn[1] in body should match '^(connect-failure|reset|5xx|5[0-9][0-9])$'"#,
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(refusal(&fx, spec.clone()).await, want, "{spec}");
    }
}

#[tokio::test]
async fn every_cel_rule_of_the_crd_refuses_with_its_message() {
    let fx = fixture().await;
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            with(json!({"healthCheck": {"interval": "0s", "timeout": "0s"}})),
            vec![
                "spec.healthCheck: Invalid value: healthCheck.interval must be more than 0s",
                "spec.healthCheck: Invalid value: healthCheck.timeout must be more than 0s and at most healthCheck.interval",
            ],
        ),
        (
            with(json!({"healthCheck": {"interval": "1s", "timeout": "2s"}})),
            vec![
                "spec.healthCheck: Invalid value: healthCheck.timeout must be more than 0s and at most healthCheck.interval",
            ],
        ),
        (
            with(json!({"healthCheck": {"type": "HTTP", "path": "healthz"}})),
            vec![
                "spec.healthCheck: Invalid value: healthCheck.path must start with '/' for HTTP checks",
            ],
        ),
        (
            with(json!({"outlierDetection": {"baseEjectionTime": "0s"}})),
            vec![
                "spec.outlierDetection: Invalid value: outlierDetection.baseEjectionTime must be more than 0s",
            ],
        ),
        (
            with(json!({"outlierDetection": {"baseEjectionTime": "1m", "maxEjectionTime": "30s"}})),
            vec![
                "spec.outlierDetection: Invalid value: outlierDetection.maxEjectionTime must be at least outlierDetection.baseEjectionTime",
            ],
        ),
        (
            with(json!({"outlierDetection": {"errorRate": {"threshold": "20%", "window": "0s"}}})),
            vec![
                "spec.outlierDetection.errorRate: Invalid value: outlierDetection.errorRate.window must be more than 0s when a threshold is set",
            ],
        ),
        (
            with(json!({"outlierDetection": {"probation": {"trafficShare": "0%"}}})),
            vec![
                "spec.outlierDetection.probation: Invalid value: outlierDetection.probation.trafficShare must be more than 0%",
            ],
        ),
        (
            with(json!({"loadBalancer": {"algorithm": "RingHash"}})),
            vec![
                "spec.loadBalancer: Invalid value: loadBalancer.hashHeader is required when the algorithm is RingHash",
            ],
        ),
        (
            with(json!({"retries": {"perTryTimeout": "0s"}})),
            vec![
                r#"spec.retries.perTryTimeout: Invalid value: "0s": retries.perTryTimeout must be more than 0s"#,
            ],
        ),
        (
            with(json!({"timeouts": {"connect": "0"}})),
            vec![
                r#"spec.timeouts.connect: Invalid value: "0": timeouts.connect must be more than 0s"#,
            ],
        ),
        (
            with(json!({"timeouts": {"request": "0ms"}})),
            vec![
                r#"spec.timeouts.request: Invalid value: "0ms": timeouts.request must be more than 0s"#,
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(refusal(&fx, spec.clone()).await, want, "{spec}");
    }
    // What each rule allows passes.
    for spec in [
        with(json!({"healthCheck": {"type": "None", "interval": "0s", "timeout": "5s"}})),
        with(json!({"loadBalancer": {"algorithm": "RingHash", "hashHeader": "x-user"}})),
        with(json!({"outlierDetection": {"errorRate": {"threshold": "0%", "window": "0s"}}})),
        with(
            json!({"healthCheck": {"type": "HTTP", "path": "/ready", "interval": "5s", "timeout": "5s"}}),
        ),
    ] {
        assert!(refusal(&fx, spec.clone()).await.is_empty(), "{spec}");
    }
}

#[tokio::test]
async fn service_port_is_a_port_number_or_a_port_name() {
    let fx = fixture().await;
    for port in [
        json!(1),
        json!(80),
        json!(65535),
        json!("http"),
        json!("grpc-web"),
        json!("8080"),
    ] {
        let errors = refusal(&fx, json!({"service": {"name": "web", "port": port}})).await;
        assert!(errors.is_empty(), "{port}: {errors:?}");
    }
    for port in [
        json!(0),
        json!(65536),
        json!(-1),
        json!("HTTP"),
        json!("-http"),
        json!(""),
    ] {
        assert_eq!(
            refusal(&fx, json!({"service": {"name": "web", "port": port}})).await,
            [PORT_RULE],
            "{port}"
        );
    }
    assert_eq!(
        refusal(&fx, json!({"service": {"name": "web", "port": 8.5}})).await,
        [
            r#"spec.service.port: Invalid value: "number": spec.service.port in body must be of type integer,string: "number""#,
            NOT_CHECKED
        ]
    );
}

#[tokio::test]
async fn unknown_fields_follow_field_validation() {
    let fx = fixture().await;
    let mut body = pool(
        "web",
        with(json!({"bogus": 1, "healthCheck": {"extra": true}})),
    );
    body["metadata"]["junk"] = json!("x");
    let path = pools_path("shop");
    let strict = fx
        .post(&format!("{path}?fieldValidation=Strict"), &body)
        .await;
    assert_eq!(
        (strict.code, strict.body["reason"].as_str()),
        (400, Some("BadRequest"))
    );
    assert_eq!(
        strict.message(),
        r#"BackendPool in version "v1alpha1" cannot be handled as a BackendPool: strict decoding error: unknown field "metadata.junk", unknown field "spec.bogus", unknown field "spec.healthCheck.extra""#
    );
    for query in ["", "?fieldValidation=Warn"] {
        let warned = fx.post(&format!("{path}{query}"), &body).await;
        assert_eq!(warned.code, 201, "{query}");
        assert_eq!(
            warned.warnings(),
            [
                r#"299 - "unknown field \"metadata.junk\"""#,
                r#"299 - "unknown field \"spec.bogus\"""#,
                r#"299 - "unknown field \"spec.healthCheck.extra\"""#
            ],
            "{query}"
        );
        assert!(warned.body["spec"].get("bogus").is_none(), "pruned");
        fx.delete(&format!("{path}/web"), None).await.expect(200);
    }
    let ignored = fx
        .post(&format!("{path}?fieldValidation=Ignore"), &body)
        .await;
    assert_eq!(ignored.code, 201);
    assert!(ignored.warnings().is_empty());
    assert!(ignored.body["spec"]["healthCheck"].get("extra").is_none());
    // Built-in kinds answer the same way.
    let mut cm = configmap("a", json!({}));
    cm["spec"] = json!({"x": 1});
    let strict = fx
        .post(
            "/api/v1/namespaces/shop/configmaps?fieldValidation=Strict",
            &cm,
        )
        .await;
    assert_eq!(
        strict.message(),
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "spec""#
    );
}

#[tokio::test]
async fn defaults_are_filled_in_on_create() {
    let fx = fixture().await;
    let created = fx
        .create_pool(
            "shop",
            "web",
            json!({"service": {"name": "web", "port": 80}}),
        )
        .await;
    let spec = &created["spec"];
    assert_eq!(
        (spec["protocol"].as_str(), spec["panicThreshold"].as_str()),
        (Some("HTTP1"), Some("50%"))
    );
    assert_eq!(spec["healthCheck"]["interval"], "2s");
    assert_eq!(
        spec["retries"]["retryOn"],
        json!(["connect-failure", "reset", "502", "503", "504"])
    );
}
