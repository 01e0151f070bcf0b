//! Invalid BackendPools are refused at admission with the message a person can act on — the
//! CRD's bounds, enums, patterns and every CEL rule, `service.port` as a name or a number —
//! through the request kubectl sends (a create with `fieldValidation=Strict`). Runs against
//! the local API server; the same checks run on a real cluster (in a namespace they create
//! and delete) with `ROLLCALL_E2E_CLUSTER=1`, `KUBECONFIG` naming a disposable cluster, and
//! `-- --ignored`; otherwise `cargo test` lists that test as ignored, with the reason.

use kube::api::{Api, DeleteParams};
use rollcall_e2e::run_dir;
use rollcall_testkit::system::{CRD_YAML, LocalApi, apply, client_for, pool_resource};
use serde_json::{Value, json};

/// (what is wrong, the spec beyond `service`, the field and message the refusal must name).
fn refusals() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let web = json!({"name": "web", "port": "http"});
    vec![
        (
            "a bound",
            json!({"outlierDetection": {"maxEjectionPercent": 150}}),
            "spec.outlierDetection.maxEjectionPercent",
            "should be less than or equal to 100",
        ),
        (
            "a lower bound",
            json!({"retries": {"attempts": 0}}),
            "spec.retries.attempts",
            "should be greater than or equal to 1",
        ),
        (
            "an enum",
            json!({"protocol": "HTTP3"}),
            "spec.protocol",
            "Unsupported value: \"HTTP3\": supported values: \"HTTP1\", \"HTTP2\", \"GRPC\"",
        ),
        (
            "an enum",
            json!({"loadBalancer": {"algorithm": "Random"}}),
            "spec.loadBalancer.algorithm",
            "Unsupported value: \"Random\"",
        ),
        (
            "a pattern",
            json!({"panicThreshold": "150%"}),
            "spec.panicThreshold",
            "should match",
        ),
        (
            "a duration pattern",
            json!({"healthCheck": {"interval": "2"}}),
            "spec.healthCheck.interval",
            "should match",
        ),
        (
            "probe timing",
            json!({"healthCheck": {"interval": "1s", "timeout": "2s"}}),
            "spec.healthCheck",
            "healthCheck.timeout must be more than 0s and at most healthCheck.interval",
        ),
        (
            "probe interval",
            json!({"healthCheck": {"interval": "0s", "timeout": "0s"}}),
            "spec.healthCheck",
            "healthCheck.interval must be more than 0s",
        ),
        (
            "probe path",
            json!({"healthCheck": {"type": "HTTP", "path": "healthz"}}),
            "spec.healthCheck",
            "healthCheck.path must start with '/' for HTTP checks",
        ),
        (
            "ejection times",
            json!({"outlierDetection": {"baseEjectionTime": "1m", "maxEjectionTime": "30s"}}),
            "spec.outlierDetection",
            "outlierDetection.maxEjectionTime must be at least outlierDetection.baseEjectionTime",
        ),
        (
            "base ejection",
            json!({"outlierDetection": {"baseEjectionTime": "0s"}}),
            "spec.outlierDetection",
            "outlierDetection.baseEjectionTime must be more than 0s",
        ),
        (
            "error-rate window",
            json!({"outlierDetection": {"errorRate": {"threshold": "20%", "window": "0s"}}}),
            "spec.outlierDetection.errorRate",
            "outlierDetection.errorRate.window must be more than 0s when a threshold is set",
        ),
        (
            "probation share",
            json!({"outlierDetection": {"probation": {"trafficShare": "0%"}}}),
            "spec.outlierDetection.probation",
            "outlierDetection.probation.trafficShare must be more than 0%",
        ),
        (
            "ring hash header",
            json!({"loadBalancer": {"algorithm": "RingHash"}}),
            "spec.loadBalancer",
            "loadBalancer.hashHeader is required when the algorithm is RingHash",
        ),
        (
            "per-try timeout",
            json!({"retries": {"perTryTimeout": "0s"}}),
            "spec.retries.perTryTimeout",
            "retries.perTryTimeout must be more than 0s",
        ),
        (
            "connect timeout",
            json!({"timeouts": {"connect": "0"}}),
            "spec.timeouts.connect",
            "timeouts.connect must be more than 0s",
        ),
        (
            "request timeout",
            json!({"timeouts": {"request": "0s"}}),
            "spec.timeouts.request",
            "timeouts.request must be more than 0s",
        ),
        (
            "a port name in capitals",
            json!({"service": {"name": "web", "port": "HTTP"}}),
            "spec.service",
            "service.port must be a port number 1-65535 or the name of a Service port",
        ),
        (
            "port 0",
            json!({"service": {"name": "web", "port": 0}}),
            "spec.service",
            "service.port must be a port number 1-65535",
        ),
        (
            "port 70000",
            json!({"service": {"name": "web", "port": 70000}}),
            "spec.service",
            "service.port must be a port number 1-65535",
        ),
        (
            "no service",
            json!({"service": null, "protocol": "HTTP1"}),
            "spec.service",
            "Required value",
        ),
        (
            "a service name",
            json!({"service": {"name": "Web_1", "port": 80}}),
            "spec.service.name",
            "should match",
        ),
    ]
    .into_iter()
    .map(|(what, extra, field, message)| {
        let mut spec = json!({"service": web});
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            if v.is_null() {
                spec.as_object_mut().map(|s| s.remove(&k));
            } else {
                spec[k] = v;
            }
        }
        (what, spec, field, message)
    })
    .collect()
}

fn pool(name: &str, namespace: &str, spec: &Value) -> Value {
    json!({
        "apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec,
    })
}

/// The create `kubectl apply` sends for a new object: `fieldValidation=Strict`.
async fn create(
    client: &kube::Client,
    namespace: &str,
    object: &Value,
) -> Result<Value, kube::Error> {
    let resource = pool_resource();
    let uri = format!(
        "/apis/{}/namespaces/{namespace}/{}?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
        resource.api_version, resource.plural
    );
    let request = http::Request::post(uri)
        .header("content-type", "application/json")
        .body(object.to_string().into_bytes())
        .map_err(kube::Error::HttpError)?;
    client.request::<Value>(request).await
}

async fn check_refusals(client: &kube::Client, namespace: &str) {
    let mut wrong = Vec::new();
    for (i, (what, spec, field, message)) in refusals().into_iter().enumerate() {
        let name = format!("bad-{i}");
        match create(client, namespace, &pool(&name, namespace, &spec)).await {
            Ok(_) => wrong.push(format!("{what}: {spec} was accepted")),
            Err(kube::Error::Api(status)) => {
                let expected = format!("BackendPool.rollcall.dev \"{name}\" is invalid");
                if status.code != 422
                    || !status.message.contains(&expected)
                    || !status.message.contains(&format!("{field}:"))
                    || !status.message.contains(message)
                {
                    wrong.push(format!(
                        "{what}: expected 422 naming {field} and {message:?}, got {} {}",
                        status.code, status.message
                    ));
                }
            }
            Err(other) => wrong.push(format!("{what}: {other}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "refusals that were not right:\n{}",
        wrong.join("\n")
    );

    // Unknown fields: refused under Strict with the decoder's message, as kubectl sees it.
    let typo = json!({"service": {"name": "web", "port": 80}, "heathCheck": {}});
    let refused = create(client, namespace, &pool("typo", namespace, &typo)).await;
    match refused {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400, "{}", s.message);
            assert!(
                s.message.contains("unknown field \"spec.heathCheck\""),
                "{}",
                s.message
            );
        }
        other => panic!("an unknown field was not refused: {other:?}"),
    }

    // What is valid stays valid: both forms of the port, and the minimal pool.
    for (name, port) in [("by-name", json!("http")), ("by-number", json!(8080))] {
        let spec = json!({"service": {"name": "web", "port": port}});
        create(client, namespace, &pool(name, namespace, &spec))
            .await
            .unwrap_or_else(|e| panic!("{name} was refused: {e}"));
    }
}

#[tokio::test]
async fn invalid_pools_are_refused_at_admission_with_their_messages() {
    let dir = run_dir("admission");
    let api = LocalApi::start(&dir, &[]).await.unwrap();
    api.apply(CRD_YAML, "rollcall-e2e").await.unwrap();
    api.apply(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
        "rollcall-e2e",
    )
    .await
    .unwrap();
    check_refusals(&api.client, "shop").await;
}

/// Run with `ROLLCALL_E2E_CLUSTER=1 KUBECONFIG=... cargo test -p rollcall-e2e --test admission
/// -- --ignored`; `cargo test` lists it as ignored, with the reason.
#[tokio::test]
#[ignore = "needs a disposable cluster: ROLLCALL_E2E_CLUSTER=1, KUBECONFIG, and -- --ignored"]
async fn on_a_real_cluster() {
    let (Ok("1"), Ok(kubeconfig)) = (
        std::env::var("ROLLCALL_E2E_CLUSTER").as_deref(),
        std::env::var("KUBECONFIG"),
    ) else {
        panic!(
            "set ROLLCALL_E2E_CLUSTER=1 and KUBECONFIG to a disposable cluster to run the \
             admission checks there (this applies the BackendPool CRD)"
        );
    };
    let client = client_for(std::path::Path::new(&kubeconfig)).await.unwrap();
    apply(&client, CRD_YAML, "rollcall-e2e").await.unwrap();
    let namespace = format!("rollcall-e2e-{}", std::process::id());
    let ns_yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n");
    apply(&client, &ns_yaml, "rollcall-e2e").await.unwrap();
    eprintln!("running against the cluster in {kubeconfig}, namespace {namespace}");
    check_refusals(&client, &namespace).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
}
