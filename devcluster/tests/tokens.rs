//! ServiceAccount tokens: TokenRequest (audiences, lifetime and its bounds, binding to a Pod
//! with the registry's checks) and TokenReview, which accepts a token only for its audiences,
//! before it expires, and while its ServiceAccount and bound Pod are the ones it was issued
//! for — with the authenticator's error otherwise.

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::*;
use rollcall_devcluster::Settings;
use serde_json::{Value, json};

const SA: &str = "/api/v1/namespaces/shop/serviceaccounts";
const REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

async fn fixture(settings: Settings) -> Fixture {
    let fx = start_with(settings).await;
    fx.namespace("shop").await;
    fx.post(SA, &json!({"metadata": {"name": "app"}}))
        .await
        .expect(201);
    fx
}

async fn pod(fx: &Fixture, name: &str, service_account: &str) -> Value {
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"serviceAccountName": service_account, "nodeName": "node-1",
                 "containers": [{"name": "c", "image": "app:1"}]}});
    fx.post("/api/v1/namespaces/shop/pods", &body)
        .await
        .expect(201)
}

async fn request(fx: &Fixture, spec: Value) -> Reply {
    fx.post(
        &format!("{SA}/app/token"),
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
    )
    .await
}

async fn token(fx: &Fixture, spec: Value) -> String {
    let answer = request(fx, spec).await.expect(201);
    answer["status"]["token"]
        .as_str()
        .expect("a token")
        .to_string()
}

async fn review(fx: &Fixture, token: &str, audiences: &[&str]) -> Value {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                      "spec": {"token": token, "audiences": audiences}});
    fx.post(REVIEWS, &body).await.expect(201)["status"].clone()
}

fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&raw).expect("JSON claims")
}

#[tokio::test]
async fn a_token_request_issues_a_token_for_its_audiences_and_lifetime() {
    let fx = fixture(Settings::default()).await;
    let answer = request(
        &fx,
        json!({"audiences": ["rollcall"], "expirationSeconds": 3600}),
    )
    .await
    .expect(201);
    assert_eq!(
        (answer["kind"].as_str(), answer["spec"]["audiences"].clone()),
        (Some("TokenRequest"), json!(["rollcall"]))
    );
    let token = answer["status"]["token"].as_str().unwrap();
    let issued = claims(token);
    assert_eq!(issued["aud"], json!(["rollcall"]));
    assert_eq!(issued["sub"], "system:serviceaccount:shop:app");
    assert_eq!(
        issued["exp"].as_i64().unwrap() - issued["iat"].as_i64().unwrap(),
        3600
    );
    let expires: k8s_openapi::jiff::Timestamp = answer["status"]["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(expires.as_second(), issued["exp"].as_i64().unwrap());
    // Without audiences, the API server's own.
    let default = claims(&token_of(&fx).await);
    assert_eq!(
        default["aud"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
}

async fn token_of(fx: &Fixture) -> String {
    token(fx, json!({})).await
}

#[tokio::test]
async fn a_token_lifetime_has_upstreams_bounds() {
    let fx = fixture(Settings::default()).await;
    for (seconds, detail) in [
        (599_i64, "may not specify a duration less than 10 minutes"),
        (
            (1_i64 << 32) + 1,
            "may not specify a duration larger than 2^32 seconds",
        ),
    ] {
        let reply = request(&fx, json!({"expirationSeconds": seconds})).await;
        assert_eq!(
            (reply.code, reply.body["reason"].as_str()),
            (422, Some("Invalid"))
        );
        assert_eq!(
            reply.message(),
            format!(
                "TokenRequest.authentication.k8s.io \"app\" is invalid: spec.expirationSeconds: Invalid value: {seconds}: {detail}"
            )
        );
        assert_eq!(
            reply.body["details"]["causes"][0]["field"],
            "spec.expirationSeconds"
        );
    }
    let missing = fx
        .post(&format!("{SA}/nobody/token"), &json!({"spec": {}}))
        .await;
    assert_eq!(
        (missing.code, missing.message()),
        (404, "serviceaccounts \"nobody\" not found")
    );
}

#[tokio::test]
async fn a_token_binds_to_a_pod_of_its_service_account() {
    let fx = fixture(Settings::default()).await;
    let web = pod(&fx, "web", "app").await;
    pod(&fx, "other", "default").await;
    let uid = web["metadata"]["uid"].as_str().unwrap();
    let bound = |name: &str, uid: &str, kind: &str| json!({"audiences": ["rollcall"], "boundObjectRef": {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid}});
    let token = token(&fx, bound("web", uid, "Pod")).await;
    assert_eq!(
        claims(&token)["kubernetes.io"]["pod"],
        json!({"name": "web", "uid": uid})
    );
    let cases = [
        (bound("web", "0b5a1c9e-0000-4000-8000-000000000000", "Pod"), 409,
         "Operation cannot be fulfilled on Pod \"web\": the UID in the bound object reference (0b5a1c9e-0000-4000-8000-000000000000) does not match the UID in record. The object might have been deleted and then recreated".to_string()),
        (bound("other", "", "Pod"), 400,
         "cannot bind token for serviceaccount \"app\" to pod running with different serviceaccount name.".to_string()),
        (bound("gone", "", "Pod"), 404, "pods \"gone\" not found".to_string()),
        (bound("cm", "", "ConfigMap"), 400, "cannot bind token to object of type /v1, Kind=ConfigMap".to_string()),
    ];
    for (spec, code, message) in cases {
        let reply = request(&fx, spec.clone()).await;
        assert_eq!(
            (reply.code, reply.message()),
            (code, message.as_str()),
            "{spec}"
        );
    }
}

#[tokio::test]
async fn a_review_authenticates_a_valid_token_as_its_service_account() {
    let fx = fixture(Settings::default()).await;
    let web = pod(&fx, "web", "app").await;
    let uid = web["metadata"]["uid"].as_str().unwrap();
    let token = token(&fx, json!({"audiences": ["rollcall"], "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid}})).await;
    let status = review(&fx, &token, &["rollcall"]).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!(["rollcall"]));
    let user = &status["user"];
    assert_eq!(user["username"], "system:serviceaccount:shop:app");
    let sa = fx.get(&format!("{SA}/app")).await.expect(200);
    assert_eq!(user["uid"], sa["metadata"]["uid"]);
    assert_eq!(
        user["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:shop",
            "system:authenticated"
        ])
    );
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["web"])
    );
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/pod-uid"],
        json!([uid])
    );
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/node-name"],
        json!(["node-1"])
    );
    let jti = claims(&token)["jti"].as_str().unwrap().to_string();
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/credential-id"],
        json!([format!("JTI={jti}")])
    );
}

#[tokio::test]
async fn a_review_refuses_wrong_audiences_garbage_and_invalidated_tokens() {
    let fx = fixture(Settings::default()).await;
    let web = pod(&fx, "web", "app").await;
    let uid = web["metadata"]["uid"].as_str().unwrap();
    let pod_token = token(&fx, json!({"audiences": ["rollcall"], "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid}})).await;
    let sa_token = token(&fx, json!({"audiences": ["rollcall"]})).await;
    let refused = |status: &Value| {
        assert_eq!(status["authenticated"], false, "{status}");
        assert_eq!(status["user"], json!({}));
        status["error"].as_str().unwrap_or("").to_string()
    };
    assert_eq!(
        refused(&review(&fx, &sa_token, &["other"]).await),
        r#"[invalid bearer token, token audiences ["rollcall"] is invalid for the target audiences ["other"]]"#
    );
    assert_eq!(
        refused(&review(&fx, "not-a-token", &[]).await),
        "invalid bearer token"
    );
    let mut forged = sa_token.clone();
    forged.push('x');
    assert!(
        refused(&review(&fx, &forged, &["rollcall"]).await).starts_with("invalid bearer token")
    );
    // The bound Pod goes.
    fx.delete("/api/v1/namespaces/shop/pods/web", None)
        .await
        .expect(200);
    assert_eq!(
        refused(&review(&fx, &pod_token, &["rollcall"]).await),
        "[invalid bearer token, service account token has been invalidated]"
    );
    // The ServiceAccount goes, then comes back as another object.
    let old_uid = fx.get(&format!("{SA}/app")).await.expect(200)["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    fx.delete(&format!("{SA}/app"), None).await.expect(200);
    assert_eq!(
        refused(&review(&fx, &sa_token, &["rollcall"]).await),
        "[invalid bearer token, serviceaccounts \"app\" not found]"
    );
    let new_uid = fx
        .post(SA, &json!({"metadata": {"name": "app"}}))
        .await
        .expect(201)["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        refused(&review(&fx, &sa_token, &["rollcall"]).await),
        format!(
            "[invalid bearer token, service account UID ({new_uid}) does not match claim ({old_uid})]"
        )
    );
}

#[tokio::test]
async fn a_token_expires_after_its_lifetime_and_leeway() {
    let short = |leeway| Settings {
        min_token_seconds: 1,
        token_leeway: leeway,
        ..Settings::default()
    };
    // go-jose's default leeway (a minute) on one server, none on the other.
    let lenient = fixture(short(Settings::default().token_leeway)).await;
    let strict = fixture(short(Duration::ZERO)).await;
    let spec = json!({"audiences": ["rollcall"], "expirationSeconds": 1});
    let lenient_token = token(&lenient, spec.clone()).await;
    let strict_token = token(&strict, spec).await;
    assert_eq!(
        review(&strict, &strict_token, &["rollcall"]).await["authenticated"],
        true
    );
    let error = eventually(|| async {
        let status = review(&strict, &strict_token, &["rollcall"]).await;
        (status["authenticated"] == false).then(|| status["error"].clone())
    })
    .await;
    assert_eq!(
        error,
        "[invalid bearer token, service account token has expired]"
    );
    // Issued earlier, past its expiry too, but within the leeway.
    assert_eq!(
        review(&lenient, &lenient_token, &["rollcall"]).await["authenticated"],
        true
    );
}
