//! The project's BackendPool CRD (a copy of `crds/backendpool.yaml`, parsed with serde-saphyr)
//! through prune, default and validate, as the API server runs a create or an update. The
//! rule cases mirror `controller/src/crd/cel_tests.rs`; here every rule runs, the
//! int-or-string `type(self.port) == int` one included.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::super::{FieldError, apply_defaults, prune, validate};

pub(super) static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    let crd: Value = serde_saphyr::from_str(include_str!("../../../../crds/backendpool.yaml"))
        .expect("CRD parses");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
});

pub(super) fn pool(spec: Value) -> Value {
    json!({
        "apiVersion": "rollcall.dev/v1alpha1",
        "kind": "BackendPool",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": spec,
    })
}

/// The spec of the tests' pools: a service plus `policy`.
pub(super) fn with(policy: Value) -> Value {
    let mut spec = json!({"service": {"name": "web", "port": "http"}});
    if let (Some(spec), Value::Object(policy)) = (spec.as_object_mut(), policy) {
        spec.extend(policy);
    }
    spec
}

/// What the server does on create: prune, default, validate.
pub(super) fn admit(mut object: Value) -> (Value, Vec<String>, Vec<FieldError>) {
    let unknown = prune(&SCHEMA, &mut object);
    apply_defaults(&SCHEMA, &mut object);
    let errors = validate(&SCHEMA, &object, None);
    (object, unknown, errors)
}

pub(super) fn messages(spec: Value) -> Vec<String> {
    admit(pool(spec))
        .2
        .iter()
        .map(ToString::to_string)
        .collect()
}

pub(super) const NOT_CHECKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";
const PORT_RULE: &str = "spec.service: Invalid value: service.port must be a port number 1-65535 or the name of a Service port (lowercase letters, digits and '-')";

#[test]
fn minimal_and_full_pools_pass() {
    let accepted = [
        json!({"service": {"name": "web", "port": 80}}),
        with(json!({
            "loadBalancer": {"algorithm": "RingHash", "hashHeader": "x-user"},
            "healthCheck": {"type": "HTTP", "path": "/ready", "interval": "5s", "timeout": "5s"},
            "outlierDetection": {"baseEjectionTime": "10s", "maxEjectionTime": "10s",
                                 "errorRate": {"threshold": "0%", "window": "0s"}},
        })),
        // Passive-only checks need no sensible probe timing.
        with(json!({"healthCheck": {"type": "None", "interval": "1s", "timeout": "5s"}})),
    ];
    for spec in accepted {
        assert_eq!(messages(spec.clone()), Vec::<String>::new(), "{spec}");
    }
}

#[test]
fn the_design_example_reads_and_passes() {
    let spec = json!({
        "service": {"name": "checkout", "port": "http"},
        "protocol": "HTTP1",
        "loadBalancer": {"algorithm": "LeastRequest"},
        "healthCheck": {"type": "HTTP", "path": "/healthz", "interval": "2s", "timeout": "1s",
                        "jitter": "10%", "healthyThreshold": 2, "unhealthyThreshold": 3},
        "outlierDetection": {"consecutiveGatewayErrors": 3, "consecutive5xx": 5,
                             "errorRate": {"threshold": "20%", "window": "10s", "minRequests": 20},
                             "baseEjectionTime": "30s", "maxEjectionTime": "5m",
                             "maxEjectionPercent": 50,
                             "probation": {"successes": 5, "trafficShare": "5%"}},
        "panicThreshold": "50%",
        "slowStart": {"window": "30s"},
        "draining": {"timeout": "30s"},
        "retries": {"attempts": 2, "perTryTimeout": "4s",
                    "budget": {"percent": 20, "minPerSecond": 10},
                    "retryOn": ["connect-failure", "reset", "502", "503", "504"],
                    "idempotencyKeyHeader": "Idempotency-Key"},
        "timeouts": {"connect": "1s", "request": "12s"},
    });
    let (_, unknown, errors) = admit(pool(spec));
    assert!(
        unknown.is_empty() && errors.is_empty(),
        "{unknown:?} {errors:?}"
    );
}

#[test]
fn each_bad_policy_is_refused_with_its_rule_message() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"healthCheck": {"interval": "1s", "timeout": "2s"}}),
            vec![
                "spec.healthCheck: Invalid value: healthCheck.timeout must be more than 0s and at most healthCheck.interval",
            ],
        ),
        (
            json!({"healthCheck": {"interval": "0s", "timeout": "0s"}}),
            vec![
                "spec.healthCheck: Invalid value: healthCheck.interval must be more than 0s",
                "spec.healthCheck: Invalid value: healthCheck.timeout must be more than 0s and at most healthCheck.interval",
            ],
        ),
        (
            json!({"healthCheck": {"type": "HTTP", "path": "healthz"}}),
            vec![
                "spec.healthCheck: Invalid value: healthCheck.path must start with '/' for HTTP checks",
            ],
        ),
        (
            json!({"outlierDetection": {"baseEjectionTime": "1m", "maxEjectionTime": "30s"}}),
            vec![
                "spec.outlierDetection: Invalid value: outlierDetection.maxEjectionTime must be at least outlierDetection.baseEjectionTime",
            ],
        ),
        (
            json!({"outlierDetection": {"baseEjectionTime": "0s"}}),
            vec![
                "spec.outlierDetection: Invalid value: outlierDetection.baseEjectionTime must be more than 0s",
            ],
        ),
        (
            json!({"outlierDetection": {"errorRate": {"threshold": "20%", "window": "0s"}}}),
            vec![
                "spec.outlierDetection.errorRate: Invalid value: outlierDetection.errorRate.window must be more than 0s when a threshold is set",
            ],
        ),
        (
            json!({"outlierDetection": {"probation": {"trafficShare": "0%"}}}),
            vec![
                "spec.outlierDetection.probation: Invalid value: outlierDetection.probation.trafficShare must be more than 0%",
            ],
        ),
        (
            json!({"loadBalancer": {"algorithm": "RingHash"}}),
            vec![
                "spec.loadBalancer: Invalid value: loadBalancer.hashHeader is required when the algorithm is RingHash",
            ],
        ),
        (
            json!({"loadBalancer": {"algorithm": "RingHash", "hashHeader": null}}),
            vec![
                "spec.loadBalancer: Invalid value: loadBalancer.hashHeader is required when the algorithm is RingHash",
            ],
        ),
        // Rules on string fields show the value (Kubernetes 1.35).
        (
            json!({"retries": {"perTryTimeout": "0s"}}),
            vec![
                r#"spec.retries.perTryTimeout: Invalid value: "0s": retries.perTryTimeout must be more than 0s"#,
            ],
        ),
        (
            json!({"timeouts": {"connect": "0"}}),
            vec![
                r#"spec.timeouts.connect: Invalid value: "0": timeouts.connect must be more than 0s"#,
            ],
        ),
    ];
    for (policy, want) in cases {
        assert_eq!(messages(with(policy.clone())), want, "{policy}");
    }
}

#[test]
fn service_port_is_a_number_or_a_name() {
    for port in [
        json!(1),
        json!(80),
        json!(65535),
        json!("http"),
        json!("grpc-web"),
        json!("8080"),
    ] {
        assert_eq!(
            messages(json!({"service": {"name": "web", "port": port}})),
            Vec::<String>::new(),
            "{port}"
        );
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
            messages(json!({"service": {"name": "web", "port": port}})),
            [PORT_RULE],
            "{port}"
        );
    }
    assert_eq!(
        messages(json!({"service": {"name": "web", "port": 8.5}})),
        [
            r#"spec.service.port: Invalid value: "number": spec.service.port in body must be of type integer,string: "number""#,
            NOT_CHECKED
        ]
    );
}
