//! One bad BackendPool never stops the others. With the CRD applied without its schema (as
//! happens with version skew or a hand-edited CRD), pools the controller cannot read or
//! validate sit in the API server next to a good one; the controller starts, becomes ready,
//! serves and writes the good pool, and gives each bad one `Ready=False` with reason
//! `InvalidSpec`, a message naming the field, and an `InvalidSpec` Event; fixing one heals it.

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use rollcall_e2e::{PATIENCE, condition, count, run_dir, wait_event};
use rollcall_testkit::system::{
    CRD_YAML, Controller, LocalApi, NAMESPACE_YAML, SERVICE_YAML, parse_yaml, pool_resource,
    slices_yaml,
};
use rollcall_testkit::{Behavior, TestBackend};
use serde_json::{Value, json};

/// The CRD with its schema replaced by "anything goes", so the API server stores what its
/// validation would have refused.
fn schemaless_crd() -> String {
    let mut crd: Value = parse_yaml(CRD_YAML).unwrap().remove(0);
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        version["schema"]["openAPIV3Schema"] =
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        version["additionalPrinterColumns"] = json!([]);
    }
    crd.to_string()
}

fn pool(name: &str, extra: Value) -> String {
    let mut spec = json!({"service": {"name": "web", "port": "http"}});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
           "metadata": {"name": name, "namespace": "shop"}, "spec": spec})
    .to_string()
}

async fn wait_condition(
    pools: &Api<DynamicObject>,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let status = pools
            .get(name)
            .await
            .ok()
            .and_then(|p| p.data.get("status").cloned())
            .unwrap_or(Value::Null);
        if done(&status) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: no {what} within {PATIENCE:?}; status {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn invalid_with(status: &Value, field: &str) -> bool {
    let ready = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    ready.is_some_and(|c| {
        c["status"] == "False"
            && c["reason"] == "InvalidSpec"
            && c["message"].as_str().is_some_and(|m| m.contains(field))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_pool_gets_a_condition_and_never_stops_the_others() {
    let dir = run_dir("contained");
    let api = LocalApi::start(&dir, &[]).await.unwrap();
    let mut backends = Vec::new();
    for _ in 0..3 {
        backends.push(TestBackend::spawn(Behavior::ok()).await.unwrap());
    }
    api.apply(&schemaless_crd(), "rollcall-e2e").await.unwrap();
    for yaml in [NAMESPACE_YAML, SERVICE_YAML] {
        api.apply(yaml, "rollcall-e2e").await.unwrap();
    }
    api.apply(&slices_yaml(&backends), "rollcall-e2e")
        .await
        .unwrap();
    api.apply(&pool("web", json!({})), "rollcall-e2e")
        .await
        .unwrap();
    // Unreadable (a negative count) and unusable (a probe timeout above its interval).
    api.apply(
        &pool(
            "negative",
            json!({"healthCheck": {"unhealthyThreshold": -1}}),
        ),
        "rollcall-e2e",
    )
    .await
    .unwrap();
    api.apply(
        &pool(
            "timing",
            json!({"healthCheck": {"interval": "1s", "timeout": "5s"}}),
        ),
        "rollcall-e2e",
    )
    .await
    .unwrap();

    let mut controller = Controller::start(&api.kubeconfig, "rollcall-controller-0", &dir, &[])
        .await
        .unwrap();
    controller.wait_ready(PATIENCE).await.unwrap();
    let pools: Api<DynamicObject> =
        Api::namespaced_with(api.client.clone(), "shop", &pool_resource());
    let good = wait_condition(&pools, "web", "Ready", |s| {
        condition(s, "Ready") == Some("True")
    })
    .await;
    assert_eq!(count(&good, "total"), 3, "{good}");
    wait_condition(&pools, "negative", "InvalidSpec", |s| {
        invalid_with(s, "spec.healthCheck.unhealthyThreshold")
    })
    .await;
    wait_condition(&pools, "timing", "InvalidSpec", |s| {
        invalid_with(s, "spec.healthCheck.timeout")
    })
    .await;
    wait_event(&api.client, "shop", "InvalidSpec", |m| {
        m.contains("unhealthyThreshold")
    })
    .await
    .unwrap();

    // One more arrives while it runs; another is fixed.
    api.apply(
        &pool(
            "late",
            json!({"outlierDetection": {"maxEjectionPercent": "half"}}),
        ),
        "rollcall-e2e",
    )
    .await
    .unwrap();
    wait_condition(&pools, "late", "InvalidSpec", |s| {
        invalid_with(s, "spec.outlierDetection.maxEjectionPercent")
    })
    .await;
    pools
        .patch(
            "timing",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"healthCheck": {"timeout": "500ms"}}})),
        )
        .await
        .unwrap();
    wait_condition(&pools, "timing", "Ready after the fix", |s| {
        condition(s, "Ready") == Some("True")
    })
    .await;
    assert!(
        controller.is_ready().await,
        "the controller stopped being ready"
    );
}
