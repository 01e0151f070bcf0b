//! Discovery and OpenAPI as kubectl, Helm and kube-rs walk them: a CRD's resource is listed
//! (short names, status subresource) in the legacy and the aggregated (`apidiscovery.k8s.io/
//! v2`) forms as soon as the CRD is created and goes when it is deleted; `/openapi/v3` lists
//! each group version with a hash that changes when its types do; PATCH operations carry
//! `x-kubernetes-group-version-kind` and `fieldValidation`, and a custom resource's PATCH body
//! offers no strategic merge patch.

mod common;

use common::*;
use serde_json::{Value, json};

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
const CRD: &str =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backendpools.rollcall.dev";

fn group_names(groups: &Value) -> Vec<String> {
    groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_crds_resource_is_discoverable_from_creation_to_deletion() {
    let fx = start().await;
    assert!(!group_names(&fx.get("/apis").await.expect(200)).contains(&"rollcall.dev".to_string()));
    assert_eq!(fx.get(POOLS).await.code, 404);
    let crd = fx.install_crd().await;
    assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
    let groups = fx.get("/apis").await.expect(200);
    let ours = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "rollcall.dev")
        .expect("listed");
    assert_eq!(
        ours["preferredVersion"],
        json!({"groupVersion": "rollcall.dev/v1alpha1", "version": "v1alpha1"})
    );
    assert_eq!(
        fx.get("/apis/rollcall.dev").await.expect(200)["kind"],
        "APIGroup"
    );
    let list = fx.get(POOLS).await.expect(200);
    assert_eq!(
        (list["kind"].as_str(), list["groupVersion"].as_str()),
        (Some("APIResourceList"), Some("rollcall.dev/v1alpha1"))
    );
    let resources = list["resources"].as_array().unwrap();
    let main = resources
        .iter()
        .find(|r| r["name"] == "backendpools")
        .expect("backendpools");
    assert_eq!(
        (
            main["singularName"].as_str(),
            main["namespaced"].as_bool(),
            main["kind"].as_str()
        ),
        (Some("backendpool"), Some(true), Some("BackendPool"))
    );
    assert_eq!(main["shortNames"], json!(["bp"]));
    assert_eq!(
        main["verbs"],
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    let status = resources
        .iter()
        .find(|r| r["name"] == "backendpools/status")
        .expect("status subresource");
    assert_eq!(status["verbs"], json!(["get", "patch", "update"]));
    // kube-rs's discovery resolves the kind, with what it can do.
    let discovery = kube::Discovery::new(fx.client.clone())
        .run()
        .await
        .expect("discovery");
    let gvk = kube::api::GroupVersionKind::gvk("rollcall.dev", "v1alpha1", "BackendPool");
    let (resource, caps) = discovery
        .resolve_gvk(&gvk)
        .expect("BackendPool is discovered");
    assert_eq!(resource.plural, "backendpools");
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "backendpools/status" || r.plural == "status"),
        "{:?}",
        caps.subresources
    );
    // The CRD goes, and so do its resource and its objects.
    fx.namespace("shop").await;
    fx.create_pool(
        "shop",
        "web",
        json!({"service": {"name": "web", "port": 80}}),
    )
    .await;
    fx.delete(CRD, None).await.expect(200);
    assert_eq!(fx.get(POOLS).await.code, 404);
    assert!(!group_names(&fx.get("/apis").await.expect(200)).contains(&"rollcall.dev".to_string()));
    fx.install_crd().await;
    assert!(
        fx.get(&pools_path("shop")).await.expect(200)["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn aggregated_discovery_lists_the_crd_with_its_subresources() {
    let fx = start().await;
    fx.install_crd().await;
    let reply = fx.get_as("/apis", AGGREGATED).await;
    assert_eq!(
        reply
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let list = reply.expect(200);
    assert_eq!(
        (list["kind"].as_str(), list["apiVersion"].as_str()),
        (
            Some("APIGroupDiscoveryList"),
            Some("apidiscovery.k8s.io/v2")
        )
    );
    let ours = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "rollcall.dev")
        .expect("listed");
    let version = &ours["versions"][0];
    assert_eq!(
        (version["version"].as_str(), version["freshness"].as_str()),
        (Some("v1alpha1"), Some("Current"))
    );
    let pools = &version["resources"][0];
    assert_eq!(pools["resource"], "backendpools");
    assert_eq!(
        pools["responseKind"],
        json!({"group": "rollcall.dev", "version": "v1alpha1", "kind": "BackendPool"})
    );
    assert_eq!(
        (pools["scope"].as_str(), pools["singularResource"].as_str()),
        (Some("Namespaced"), Some("backendpool"))
    );
    assert_eq!(pools["shortNames"], json!(["bp"]));
    assert_eq!(pools["subresources"][0]["subresource"], "status");
    let core = fx.get_as("/api", AGGREGATED).await.expect(200);
    let core_resources = core["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap();
    assert!(
        core_resources
            .iter()
            .any(|r| r["resource"] == "namespaces" && r["scope"] == "Cluster")
    );
    let sa = core_resources
        .iter()
        .find(|r| r["resource"] == "serviceaccounts")
        .unwrap();
    assert_eq!(sa["subresources"][0]["subresource"], "token");
}

async fn openapi_paths(fx: &Fixture) -> serde_json::Map<String, Value> {
    fx.get("/openapi/v3").await.expect(200)["paths"]
        .as_object()
        .expect("paths")
        .clone()
}

#[tokio::test]
async fn openapi_v3_hashes_change_with_the_crd() {
    let fx = start().await;
    fx.install_crd().await;
    let before = openapi_paths(&fx).await;
    let url = before["apis/rollcall.dev/v1alpha1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        url.starts_with("/openapi/v3/apis/rollcall.dev/v1alpha1?hash="),
        "{url}"
    );
    assert!(before.contains_key("api/v1") && before.contains_key("apis/apps/v1"));
    // A new printer column is a new CRD version of the document.
    let mut crd = fx.get(CRD).await.expect(200);
    crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "Protocol", "type": "string", "jsonPath": ".spec.protocol"}));
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["protocol"]
        ["description"] = json!("changed");
    fx.put(CRD, &crd).await.expect(200);
    let after = openapi_paths(&fx).await;
    assert_ne!(
        after["apis/rollcall.dev/v1alpha1"],
        before["apis/rollcall.dev/v1alpha1"]
    );
    assert_eq!(after["apis/apps/v1"], before["apis/apps/v1"]);
    let doc = fx
        .get(
            after["apis/rollcall.dev/v1alpha1"]["serverRelativeURL"]
                .as_str()
                .unwrap(),
        )
        .await
        .expect(200);
    let schema = &doc["components"]["schemas"]["dev.rollcall.v1alpha1.BackendPool"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["protocol"]["description"],
        "changed"
    );
    fx.delete(CRD, None).await.expect(200);
    assert!(
        !openapi_paths(&fx)
            .await
            .contains_key("apis/rollcall.dev/v1alpha1")
    );
}

#[tokio::test]
async fn patch_operations_say_what_kubectl_needs() {
    let fx = start().await;
    fx.install_crd().await;
    let doc = fx
        .get("/openapi/v3/apis/rollcall.dev/v1alpha1")
        .await
        .expect(200);
    let patch = &doc["paths"]["/apis/rollcall.dev/v1alpha1/namespaces/{namespace}/backendpools/{name}"]
        ["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "rollcall.dev", "version": "v1alpha1", "kind": "BackendPool"})
    );
    assert_eq!(patch["x-kubernetes-action"], "patch");
    let params: Vec<&str> = patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        params.contains(&"fieldValidation")
            && params.contains(&"fieldManager")
            && params.contains(&"force"),
        "{params:?}"
    );
    let mut types: Vec<&str> = patch["requestBody"]["content"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    types.sort_unstable();
    assert_eq!(
        types,
        [
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json"
        ]
    );
    let status = &doc["paths"]["/apis/rollcall.dev/v1alpha1/namespaces/{namespace}/backendpools/{name}/status"]
        ["patch"];
    assert_eq!(
        status["x-kubernetes-group-version-kind"]["kind"],
        "BackendPool"
    );
    // A built-in kind does take strategic merge patches.
    let apps = fx.get("/openapi/v3/apis/apps/v1").await.expect(200);
    let deploy = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert!(
        deploy["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_some()
    );
    assert_eq!(
        deploy["x-kubernetes-group-version-kind"]["kind"],
        "Deployment"
    );
}
