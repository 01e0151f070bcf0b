//! The fixture's fault switches and control endpoints (no real API server has them): failing
//! exactly the next N matching requests, 429 with `Retry-After` (which kube-rs's default
//! client honours and retries through), holding responses, clearing, and the request log.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn a_fail_rule_fails_exactly_the_next_matching_requests() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    fx.fault(json!({"fail": {"count": 2, "code": 500}})).await;
    for _ in 0..2 {
        let reply = fx.get(&format!("{CMS}/a")).await;
        assert_eq!(
            (reply.code, reply.body["reason"].as_str()),
            (500, Some("InternalError"))
        );
        assert_eq!(
            reply.message(),
            "an error on the server (\"fault injected\") has prevented the request from succeeding"
        );
    }
    assert_eq!(fx.get(&format!("{CMS}/a")).await.code, 200);
    // Narrowed to one verb and resource, other requests pass untouched.
    fx.fault(json!({"fail": {"count": 1, "code": 503, "verb": "list", "resource": "configmaps"}}))
        .await;
    assert_eq!(fx.get(&format!("{CMS}/a")).await.code, 200);
    assert_eq!(fx.get("/api/v1/namespaces/default/secrets").await.code, 200);
    assert_eq!(fx.get(CMS).await.code, 503);
    assert_eq!(fx.get(CMS).await.code, 200);
}

#[tokio::test]
async fn too_many_requests_carries_retry_after_and_kube_rs_retries_through_it() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    fx.fault(json!({"fail": {"count": 1, "code": 429}})).await;
    let reply = fx.get(&format!("{CMS}/a")).await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (429, Some("TooManyRequests"))
    );
    assert_eq!(
        reply
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert_eq!(reply.body["details"]["retryAfterSeconds"], 1);
    // kube-rs's default client retries 429 and 503 by itself.
    fx.fault(json!({"fail": {"count": 2, "code": 503}})).await;
    let api: Api<ConfigMap> = Api::default_namespaced(fx.client.clone());
    let got = tokio::time::timeout(GUARD, api.get("a"))
        .await
        .expect("in time")
        .expect("retried to success");
    assert_eq!(got.metadata.name.as_deref(), Some("a"));
    let log = fx.get("/_devcluster/requests").await.expect(200);
    let codes: Vec<u64> = log
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .take(3)
        .map(|e| e["code"].as_u64().unwrap())
        .collect();
    assert_eq!(codes, [200, 503, 503]);
}

#[tokio::test]
async fn a_pause_holds_responses_until_it_ends() {
    let fx = start().await;
    fx.fault(json!({"pause": 1.0})).await;
    let started = tokio::time::Instant::now();
    fx.get(CMS).await.expect(200);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    // Control requests are never held.
    let started = tokio::time::Instant::now();
    fx.fault(json!({"pause": 5.0})).await;
    fx.fault(json!({"clear": true})).await;
    fx.get(CMS).await.expect(200);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn clear_turns_every_switch_off() {
    let fx = start().await;
    fx.fault(json!({"fail": {"count": 1000, "code": 500}}))
        .await;
    assert_eq!(fx.get(CMS).await.code, 500);
    fx.fault(json!({"clear": true})).await;
    assert_eq!(fx.get(CMS).await.code, 200);
    let bad = fx
        .post("/_devcluster/faults", &json!({"fail": {"code": "x"}}))
        .await;
    assert_eq!(bad.code, 400);
}

#[tokio::test]
async fn the_request_log_records_who_asked_what() {
    let fx = start().await;
    fx.delete("/_devcluster/requests", None).await.expect(200);
    fx.post(
        &format!("{CMS}?fieldManager=me"),
        &configmap("a", json!({})),
    )
    .await
    .expect(201);
    fx.get(&format!("{CMS}/nope")).await;
    let log = fx.get("/_devcluster/requests").await.expect(200);
    let entries: Vec<(String, String, String, u64)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["verb"].as_str().unwrap().into(),
                e["resource"].as_str().unwrap().into(),
                e["name"].as_str().unwrap_or("").into(),
                e["code"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("create".into(), "configmaps".into(), String::new(), 201),
            ("get".into(), "configmaps".into(), "nope".into(), 404)
        ]
    );
    assert_eq!(log[0]["user"], "devcluster-admin");
    let info = fx.get("/_devcluster/info").await.expect(200);
    assert!(
        info["resourceVersion"].as_u64().unwrap()
            >= info["oldestResourceVersion"].as_u64().unwrap()
    );
}
