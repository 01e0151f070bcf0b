//! Label and field selectors on lists and watches, as the API server applies them: the
//! label grammar (`=`, `==`, `!=`, `in`, `notin`, existence, `!`), the field labels each kind
//! supports with the kind's own refusal message, and a watcher that sees an object stop
//! matching as a DELETED event (and start matching again as ADDED).

mod common;

use common::*;
use serde_json::json;
const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn label_and_field_selectors_choose_what_a_list_shows() {
    let fx = start().await;
    for (name, labels) in [
        ("web", json!({"app": "web", "tier": "front"})),
        ("api", json!({"app": "api"})),
        ("plain", json!({})),
    ] {
        let mut cm = configmap(name, json!({}));
        cm["metadata"]["labels"] = labels;
        fx.post(CMS, &cm).await.expect(201);
    }
    let cases: &[(&str, &[&str])] = &[
        ("labelSelector=app%3Dweb", &["web"]),
        ("labelSelector=app%3D%3Dweb", &["web"]),
        ("labelSelector=app!%3Dweb", &["api", "plain"]),
        ("labelSelector=app%20in%20(web,api)", &["api", "web"]),
        ("labelSelector=app%20notin%20(web)", &["api", "plain"]),
        ("labelSelector=tier", &["web"]),
        ("labelSelector=!app", &["plain"]),
        ("labelSelector=app,!tier", &["api"]),
        ("fieldSelector=metadata.name%3Dapi", &["api"]),
        ("fieldSelector=metadata.name!%3Dapi", &["plain", "web"]),
        (
            "fieldSelector=metadata.namespace%3Ddefault&labelSelector=app%3Dapi",
            &["api"],
        ),
    ];
    for (query, want) in cases {
        let list = fx.get(&format!("{CMS}?{query}")).await.expect(200);
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, *want, "{query}");
    }
}

#[tokio::test]
async fn unsupported_field_selectors_are_refused_with_the_kinds_message() {
    let fx = start().await;
    fx.install_crd().await;
    let cases = [
        (
            CMS.to_string(),
            "spec.x",
            r#""spec.x" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
        (
            "/api/v1/namespaces/default/pods".to_string(),
            "spec.x",
            "field label not supported: spec.x",
        ),
        (
            pools_path("default"),
            "spec.service.name",
            "field label not supported: spec.service.name",
        ),
        (
            "/api/v1/namespaces/default/events".to_string(),
            "regarding.name",
            "field label not supported: regarding.name",
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/default/events".to_string(),
            "involvedObject.name",
            "field label not supported: involvedObject.name",
        ),
    ];
    for (path, field, message) in cases {
        let reply = fx.get(&format!("{path}?fieldSelector={field}%3Dx")).await;
        assert_eq!((reply.code, reply.message()), (400, message), "{path}");
        assert_eq!(reply.body["reason"], "BadRequest");
    }
    let services = fx
        .get("/api/v1/services?fieldSelector=spec.type%3DClusterIP")
        .await
        .expect(200);
    assert!(services["items"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn an_object_that_stops_matching_a_watch_arrives_as_deleted() {
    let fx = start().await;
    let mut watch = fx.watch(CMS, "labelSelector=app%3Dweb").await;
    let mut cm = configmap("a", json!({}));
    cm["metadata"]["labels"] = json!({"app": "web"});
    fx.post(CMS, &cm).await.expect(201);
    assert_eq!(summary(&watch.next().await.unwrap()), "ADDED a");
    let relabel = |app: &str| json!({"metadata": {"labels": {"app": app}}});
    let moved = fx
        .patch(
            &format!("{CMS}/a"),
            "application/merge-patch+json",
            &relabel("api"),
        )
        .await
        .expect(200);
    let gone = watch.next().await.unwrap();
    assert_eq!(summary(&gone), "DELETED a");
    assert_eq!(
        gone["object"]["metadata"]["resourceVersion"],
        moved["metadata"]["resourceVersion"]
    );
    // A change while it does not match is not seen; matching again is ADDED.
    fx.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"data": {"x": "1"}}),
    )
    .await
    .expect(200);
    fx.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &relabel("web"),
    )
    .await
    .expect(200);
    let back = watch.next().await.unwrap();
    assert_eq!(summary(&back), "ADDED a");
    assert_eq!(back["object"]["data"]["x"], "1");
}
