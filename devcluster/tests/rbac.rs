//! RBAC (`Settings.authorization` is `Rbac` by default): a ServiceAccount token used against
//! the server is held to the stored Roles and bindings — forbidden with upstream's message
//! until a RoleBinding grants the verb, resource and subresource — while the bootstrap grants
//! (discovery, self reviews) hold for every authenticated user; SubjectAccessReview and
//! SelfSubjectAccessReview answer the same way, with the RBAC authorizer's reasons.

mod common;

use common::*;
use http::Method;
use serde_json::{Value, json};

const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const APP: &str = "system:serviceaccount:shop:app";

async fn fixture() -> (Fixture, kube::Client) {
    let fx = start().await;
    fx.install_crd().await;
    fx.namespace("shop").await;
    fx.namespace("other").await;
    fx.post(
        "/api/v1/namespaces/shop/serviceaccounts",
        &json!({"metadata": {"name": "app"}}),
    )
    .await
    .expect(201);
    fx.create_pool(
        "shop",
        "web",
        json!({"service": {"name": "web", "port": 80}}),
    )
    .await;
    let answer = fx
        .post(
            "/api/v1/namespaces/shop/serviceaccounts/app/token",
            &json!({"spec": {}}),
        )
        .await
        .expect(201);
    let client = client_with_token(&fx, answer["status"]["token"].as_str().unwrap()).await;
    (fx, client)
}

async fn grant(fx: &Fixture, rules: Value) {
    let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/shop";
    fx.post(
        &format!("{rbac}/roles"),
        &json!({"metadata": {"name": "pool-reader"}, "rules": rules}),
    )
    .await
    .expect(201);
    fx.post(
        &format!("{rbac}/rolebindings"),
        &json!({"metadata": {"name": "pools"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pool-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "shop"}]}),
    )
    .await
    .expect(201);
}

async fn as_app(
    fx: &Fixture,
    client: &kube::Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Reply {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    fx.send_as(
        client,
        method,
        path,
        "application/merge-patch+json",
        None,
        bytes,
    )
    .await
}

async fn access(
    fx: &Fixture,
    verb: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
) -> Value {
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": APP, "groups": ["system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"],
                 "resourceAttributes": {"verb": verb, "group": "rollcall.dev", "resource": resource,
                                        "subresource": subresource, "namespace": namespace}}});
    fx.post(SAR, &body).await.expect(201)["status"].clone()
}

#[tokio::test]
async fn a_service_account_is_forbidden_until_a_role_binding_grants_it() {
    let (fx, app) = fixture().await;
    let pools = pools_path("shop");
    let denied = as_app(&fx, &app, Method::GET, &pools, None).await;
    assert_eq!(
        (denied.code, denied.body["reason"].as_str()),
        (403, Some("Forbidden"))
    );
    assert_eq!(
        denied.message(),
        format!(
            "backendpools.rollcall.dev is forbidden: User \"{APP}\" cannot list resource \"backendpools\" in API group \"rollcall.dev\" in the namespace \"shop\""
        )
    );
    assert_eq!(
        denied.body["details"],
        json!({"group": "rollcall.dev", "kind": "backendpools"})
    );
    assert_eq!(
        access(&fx, "list", "backendpools", "", "shop").await,
        json!({"allowed": false})
    );
    grant(&fx, json!([
        {"apiGroups": ["rollcall.dev"], "resources": ["backendpools"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["rollcall.dev"], "resources": ["backendpools/status"], "verbs": ["patch"]},
    ]))
    .await;
    assert_eq!(as_app(&fx, &app, Method::GET, &pools, None).await.code, 200);
    let status = json!({"status": {"observedGeneration": 1}});
    assert_eq!(
        as_app(
            &fx,
            &app,
            Method::PATCH,
            &format!("{pools}/web/status"),
            Some(status.clone())
        )
        .await
        .code,
        200
    );
    // What the role does not name stays forbidden: the main resource, another namespace.
    let cases = [
        (
            Method::PATCH,
            format!("{pools}/web"),
            "backendpools.rollcall.dev \"web\" is forbidden: User \"system:serviceaccount:shop:app\" cannot patch resource \"backendpools\" in API group \"rollcall.dev\" in the namespace \"shop\"",
        ),
        (
            Method::GET,
            pools_path("other"),
            "backendpools.rollcall.dev is forbidden: User \"system:serviceaccount:shop:app\" cannot list resource \"backendpools\" in API group \"rollcall.dev\" in the namespace \"other\"",
        ),
        (
            Method::GET,
            "/api/v1/namespaces/shop/secrets".to_string(),
            "secrets is forbidden: User \"system:serviceaccount:shop:app\" cannot list resource \"secrets\" in API group \"\" in the namespace \"shop\"",
        ),
    ];
    for (method, path, message) in cases {
        let reply = as_app(&fx, &app, method, &path, Some(status.clone())).await;
        assert_eq!((reply.code, reply.message()), (403, message), "{path}");
    }
    // The review names the binding that allowed it.
    assert_eq!(
        access(&fx, "list", "backendpools", "", "shop").await,
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"pools/shop\" of Role \"pool-reader\" to ServiceAccount \"app/shop\""})
    );
    assert_eq!(
        access(&fx, "patch", "backendpools", "status", "shop").await["allowed"],
        true
    );
    assert_eq!(
        access(&fx, "patch", "backendpools", "", "shop").await,
        json!({"allowed": false})
    );
    assert_eq!(
        access(&fx, "list", "backendpools", "", "other").await,
        json!({"allowed": false})
    );
}

#[tokio::test]
async fn subresource_rules_match_as_the_rbac_authorizer_matches_them() {
    let (fx, _) = fixture().await;
    grant(
        &fx,
        json!([
            {"apiGroups": ["rollcall.dev"], "resources": ["backendpools/*"], "verbs": ["get"]},
            {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["update"]},
        ]),
    )
    .await;
    // `resource/*` is no wildcard for RBAC: it matches only a subresource literally named `*`.
    assert_eq!(
        access(&fx, "get", "backendpools", "status", "shop").await["allowed"],
        false
    );
    assert_eq!(
        access(&fx, "get", "backendpools", "", "shop").await["allowed"],
        false
    );
    assert_eq!(
        access(&fx, "update", "backendpools", "status", "shop").await["allowed"],
        true
    );
    assert_eq!(
        access(&fx, "update", "backendpools", "", "shop").await["allowed"],
        false
    );
}

#[tokio::test]
async fn every_authenticated_user_may_discover_and_review_itself() {
    let (fx, app) = fixture().await;
    for path in [
        "/api",
        "/apis",
        "/apis/rollcall.dev/v1alpha1",
        "/version",
        "/openapi/v3",
    ] {
        assert_eq!(
            as_app(&fx, &app, Method::GET, path, None).await.code,
            200,
            "{path}"
        );
    }
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "group": "rollcall.dev", "resource": "backendpools", "namespace": "shop"}}});
    let reply = fx
        .send_as(
            &app,
            Method::POST,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            "application/json",
            None,
            body.to_string().into_bytes(),
        )
        .await;
    assert_eq!(reply.expect(201)["status"], json!({"allowed": false}));
    // The admin is a member of system:masters.
    let admin = fx
        .post(
            SAR,
            &json!({"spec": {"user": "admin", "groups": ["system:masters"],
        "resourceAttributes": {"verb": "delete", "resource": "namespaces"}}}),
        )
        .await
        .expect(201);
    assert_eq!(admin["status"]["allowed"], true);
    // Anonymous requests get nothing but the public paths.
    let anonymous = reqless_get(&fx, "/api/v1/namespaces").await;
    assert_eq!(anonymous, 403);
}

/// A request with no credentials at all.
async fn reqless_get(fx: &Fixture, path: &str) -> u16 {
    let text = std::fs::read_to_string(&fx.kubeconfig).expect("kubeconfig");
    let token = fx.server.cluster.settings.admin_token.clone();
    let without: String = text
        .lines()
        .filter(|l| !l.contains(&token))
        .map(|l| format!("{l}\n"))
        .collect();
    let path_file = fx.dir.path().join("anonymous");
    std::fs::write(&path_file, without).expect("written");
    let client = raw_client_for(&path_file).await;
    fx.send_as(&client, Method::GET, path, "application/json", None, vec![])
        .await
        .code
}
