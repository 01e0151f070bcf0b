//! Discovery, as clients walk it: `/version`, `/api` and `/apis` (legacy lists, and the
//! aggregated `apidiscovery.k8s.io/v2` form when a client asks for it, as kubectl and Helm
//! do), `/apis/{group}`, and each group version's `APIResourceList` with subresources. Custom
//! resources appear as soon as their CRD is stored.

use http::{HeaderMap, HeaderValue, Response, header};
use serde_json::{Value, json};

use crate::catalog::ResourceType;
use crate::cluster::Cluster;
use crate::http::{Body, json_response};
use crate::schemas;
use crate::status::{ApiError, ApiResult};

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub fn version() -> Value {
    let v = &schemas::builtin().kubernetes_version;
    let minor = v.trim_start_matches('v').split('.').nth(1).unwrap_or("35");
    json!({
        "major": "1", "minor": minor, "gitVersion": v, "gitCommit": "devcluster",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25",
        "compiler": "gc", "platform": "linux/amd64",
        "emulationMajor": "1", "emulationMinor": minor,
        "minCompatibilityMajor": "1", "minCompatibilityMinor": minor,
    })
}

pub fn core_versions(parts: &http::request::Parts) -> Value {
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    })
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn api_group(name: &str, versions: &[String]) -> Value {
    let listed: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(name, v), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": listed,
        "preferredVersion": listed.first().cloned().unwrap_or(Value::Null),
    })
}

pub fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("g=apidiscovery.k8s.io") && a.contains("v=v2;"))
}

/// `/apis`: every named group.
pub fn groups(cluster: &Cluster, headers: &HeaderMap) -> Response<Body> {
    let db = cluster.lock();
    let groups: Vec<(String, Vec<String>)> = db
        .catalog
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .collect();
    if wants_aggregated(headers) {
        let items: Vec<Value> = groups
            .iter()
            .map(|(g, versions)| aggregated_group(&db.catalog, g, versions))
            .collect();
        return aggregated_response(items);
    }
    let list: Vec<Value> = groups.iter().map(|(g, vs)| api_group(g, vs)).collect();
    json_response(
        200,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}),
    )
}

/// `/api` in aggregated form.
pub fn core_aggregated(cluster: &Cluster) -> Response<Body> {
    let db = cluster.lock();
    aggregated_response(vec![aggregated_group(&db.catalog, "", &["v1".to_string()])])
}

fn aggregated_response(items: Vec<Value>) -> Response<Body> {
    let mut r = json_response(
        200,
        &json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {}, "items": items}),
    );
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(AGGREGATED));
    r
}

fn aggregated_group(catalog: &crate::catalog::Catalog, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = catalog
                .in_group_version(group, v)
                .iter()
                .map(|t| {
                    let mut subresources = Vec::new();
                    if t.status_subresource {
                        subresources.push(json!({"subresource": "status",
                            "responseKind": {"group": t.group, "version": t.version, "kind": t.kind},
                            "verbs": ["get", "patch", "update"]}));
                    }
                    if t.group.is_empty() && t.resource == "serviceaccounts" {
                        subresources.push(json!({"subresource": "token",
                            "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
                            "verbs": ["create"]}));
                    }
                    json!({
                        "resource": t.resource,
                        "responseKind": {"group": t.group, "version": t.version, "kind": t.kind},
                        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": t.singular,
                        "verbs": t.verbs,
                        "shortNames": t.short_names,
                        "categories": t.categories,
                        "subresources": subresources,
                    })
                })
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
}

/// `/apis/{group}`.
pub fn group(cluster: &Cluster, name: &str) -> ApiResult<Value> {
    let db = cluster.lock();
    let versions = db
        .catalog
        .groups()
        .into_iter()
        .find(|(g, _)| g == name)
        .map(|(_, vs)| vs)
        .ok_or_else(ApiError::path_not_found)?;
    let mut group = api_group(name, &versions);
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    Ok(group)
}

fn resource_entries(t: &ResourceType) -> Vec<Value> {
    let mut entry = json!({
        "name": t.resource,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": t.verbs,
    });
    if !t.short_names.is_empty() {
        entry["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        entry["categories"] = json!(t.categories);
    }
    let mut entries = vec![entry];
    if t.status_subresource {
        entries.push(
            json!({"name": format!("{}/status", t.resource), "singularName": "",
            "namespaced": t.namespaced, "kind": t.kind, "verbs": ["get", "patch", "update"]}),
        );
    }
    if t.group.is_empty() && t.resource == "serviceaccounts" {
        entries.push(json!({"name": "serviceaccounts/token", "singularName": "",
            "namespaced": true, "group": "authentication.k8s.io", "version": "v1",
            "kind": "TokenRequest", "verbs": ["create"]}));
    }
    entries
}

/// `/api/v1`, `/apis/{group}/{version}`.
pub fn resources(cluster: &Cluster, group: &str, version: &str) -> ApiResult<Value> {
    let db = cluster.lock();
    let types = db.catalog.in_group_version(group, version);
    if types.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let resources: Vec<Value> = types.iter().flat_map(|t| resource_entries(t)).collect();
    Ok(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": resources,
    }))
}
