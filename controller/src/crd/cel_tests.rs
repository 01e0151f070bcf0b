//! The CRD's CEL rules, evaluated client-side (kube's `cel` feature) against the schema that
//! is installed: each piece of nonsense is refused with its message, sensible input passes.

use kube::core::cel::Validator;
use serde_json::{Value, json};

use super::definition;

fn check(spec: Value) -> Result<(), Vec<String>> {
    let crd = serde_json::to_value(definition()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let object = json!({
        "apiVersion": "rollcall.dev/v1alpha1",
        "kind": "BackendPool",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": spec,
    });
    Validator::new()
        .validate(schema, &object, None)
        .or_else(|errs| {
            let errs: Vec<String> = errs
                .into_vec()
                .into_iter()
                .map(|e| e.message)
                .filter(|m| !m.contains(UNSUPPORTED))
                .collect();
            if errs.is_empty() { Ok(()) } else { Err(errs) }
        })
}

/// kube-cel cannot evaluate `type(..)`, which the `service.port` int-or-string rule needs (the
/// API server can); that one rule is left to the end-to-end tests against an API server.
const UNSUPPORTED: &str = "rule references 'type'";

fn with(policy: Value) -> Value {
    let mut spec = json!({"service": {"name": "web", "port": "http"}});
    spec.as_object_mut()
        .unwrap()
        .extend(policy.as_object().unwrap().clone());
    spec
}

fn refused(policy: Value, message: &str) {
    let errs = check(with(policy.clone())).expect_err(&format!("{policy} was accepted"));
    assert!(
        errs.iter().any(|m| m == message),
        "{policy}: expected {message:?}, got {errs:?}"
    );
}

#[test]
fn minimal_and_full_pools_pass() {
    check(json!({"service": {"name": "web", "port": 80}})).unwrap();
    check(with(json!({
        "loadBalancer": {"algorithm": "RingHash", "hashHeader": "x-user"},
        "healthCheck": {"type": "HTTP", "path": "/ready", "interval": "5s", "timeout": "5s"},
        "outlierDetection": {"baseEjectionTime": "10s", "maxEjectionTime": "10s",
                             "errorRate": {"threshold": "0%", "window": "0s"}},
    })))
    .unwrap();
    // Passive-only checks need no sensible probe timing.
    check(with(
        json!({"healthCheck": {"type": "None", "interval": "1s", "timeout": "5s"}}),
    ))
    .unwrap();
}

#[test]
fn probe_timeout_must_fit_in_the_interval() {
    refused(
        json!({"healthCheck": {"interval": "1s", "timeout": "2s"}}),
        "healthCheck.timeout must be more than 0s and at most healthCheck.interval",
    );
    refused(
        json!({"healthCheck": {"interval": "0s", "timeout": "0s"}}),
        "healthCheck.interval must be more than 0s",
    );
    refused(
        json!({"healthCheck": {"type": "HTTP", "path": "healthz"}}),
        "healthCheck.path must start with '/' for HTTP checks",
    );
}

#[test]
fn ejection_times_must_be_ordered_and_positive() {
    refused(
        json!({"outlierDetection": {"baseEjectionTime": "1m", "maxEjectionTime": "30s"}}),
        "outlierDetection.maxEjectionTime must be at least outlierDetection.baseEjectionTime",
    );
    refused(
        json!({"outlierDetection": {"baseEjectionTime": "0s"}}),
        "outlierDetection.baseEjectionTime must be more than 0s",
    );
    refused(
        json!({"outlierDetection": {"errorRate": {"threshold": "20%", "window": "0s"}}}),
        "outlierDetection.errorRate.window must be more than 0s when a threshold is set",
    );
    refused(
        json!({"outlierDetection": {"probation": {"trafficShare": "0%"}}}),
        "outlierDetection.probation.trafficShare must be more than 0%",
    );
}

#[test]
fn ring_hash_needs_a_header_and_timeouts_must_be_positive() {
    refused(
        json!({"loadBalancer": {"algorithm": "RingHash"}}),
        "loadBalancer.hashHeader is required when the algorithm is RingHash",
    );
    refused(
        json!({"retries": {"perTryTimeout": "0s"}}),
        "retries.perTryTimeout must be more than 0s",
    );
    refused(
        json!({"timeouts": {"connect": "0"}}),
        "timeouts.connect must be more than 0s",
    );
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
    let typed: super::BackendPoolSpec = serde_json::from_value(spec.clone()).unwrap();
    typed.policy.validate().unwrap();
    check(spec).unwrap();
}
