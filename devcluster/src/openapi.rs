//! OpenAPI v3, as kubectl reads it: `/openapi/v3` lists one document per group version (with
//! a hash that changes when its types do), and each document carries the paths with their
//! operations — the PATCH operations marked with `x-kubernetes-group-version-kind` and the
//! `fieldValidation` parameter, which is how kubectl decides to leave validation to the
//! server — and the schemas: Kubernetes' own definitions, plus each custom resource's schema
//! from its CRD, under the names the API server gives them.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::catalog::{ResourceType, Schema};
use crate::cluster::Cluster;
use crate::schemas;
use crate::status::{ApiError, ApiResult};

fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The name the API server gives a custom resource's schema: `dev.rollcall.v1alpha1.BackendPool`.
pub fn custom_schema_name(t: &ResourceType, kind: &str) -> String {
    let reversed: Vec<&str> = t.group.split('.').rev().collect();
    format!("{}.{}.{kind}", reversed.join("."), t.version)
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn definition_of(t: &ResourceType) -> String {
    match &t.schema {
        Schema::Builtin(name) => name.to_string(),
        Schema::Custom(_) => custom_schema_name(t, &t.kind),
    }
}

fn query_param(name: &str, kind: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": kind, "uniqueItems": true}})
}

fn operation(t: &ResourceType, action: &str, response: &str, params: &[&str]) -> Value {
    let mut parameters: Vec<Value> = params.iter().map(|p| query_param(p, "string")).collect();
    if action == "patch" {
        parameters.push(query_param("force", "boolean"));
    }
    let mut op = json!({
        "operationId": format!("{action}{}", t.kind),
        "parameters": parameters,
        "responses": {"200": {"description": "OK", "content": {
            "application/json": {"schema": schema_ref(response)}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version, "kind": t.kind},
    });
    if matches!(action, "put" | "post" | "patch") {
        // Custom resources take no strategic merge patch; kubectl reads this list to decide
        // which patch to send.
        let types: &[&str] = if action == "patch" && t.is_custom() {
            &[
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
            ]
        } else if action == "patch" {
            &[
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ]
        } else {
            &["*/*"]
        };
        let content: Map<String, Value> = types
            .iter()
            .map(|ct| {
                (
                    ct.to_string(),
                    json!({"schema": schema_ref(&definition_of(t))}),
                )
            })
            .collect();
        op["requestBody"] = json!({"content": content, "required": true});
    }
    op
}

fn paths_of(t: &ResourceType, paths: &mut Map<String, Value>) {
    let base = format!("/{}", prefix(&t.group, &t.version));
    let collection = if t.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", t.resource)
    } else {
        format!("{base}/{}", t.resource)
    };
    let def = definition_of(t);
    let list = format!("{def}List");
    let write = ["dryRun", "fieldManager", "fieldValidation"];
    if t.verbs.contains(&"list") {
        paths.insert(
            collection.clone(),
            json!({
                "get": operation(t, "list", &list, &["labelSelector", "fieldSelector", "resourceVersion", "limit", "continue", "watch"]),
                "post": operation(t, "post", &def, &write),
                "delete": operation(t, "deletecollection", "io.k8s.apimachinery.pkg.apis.meta.v1.Status", &["labelSelector"]),
            }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(t, "get", &def, &[]),
                "put": operation(t, "put", &def, &write),
                "patch": operation(t, "patch", &def, &write),
                "delete": operation(t, "delete", "io.k8s.apimachinery.pkg.apis.meta.v1.Status", &["dryRun"]),
            }),
        );
        if t.status_subresource {
            paths.insert(
                format!("{collection}/{{name}}/status"),
                json!({
                    "get": operation(t, "get", &def, &[]),
                    "put": operation(t, "put", &def, &write),
                    "patch": operation(t, "patch", &def, &write),
                }),
            );
        }
        if t.namespaced {
            paths.insert(
                format!("{base}/{}", t.resource),
                json!({"get": operation(t, "list", &list, &["labelSelector", "fieldSelector"])}),
            );
        }
    } else {
        paths.insert(
            collection,
            json!({"post": operation(t, "post", &def, &write)}),
        );
    }
}

/// A custom resource's schema in OpenAPI form, and its list.
fn custom_schemas(t: &ResourceType, schema: &Value, out: &mut Map<String, Value>) {
    let gvk = json!([{"group": t.group, "version": t.version, "kind": t.kind}]);
    let mut object = schema.clone();
    if let Some(props) = object
        .as_object_mut()
        .map(|o| o.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    {
        props.insert("apiVersion".into(), json!({"type": "string"}));
        props.insert("kind".into(), json!({"type": "string"}));
        props.insert(
            "metadata".into(),
            schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        );
    }
    object["x-kubernetes-group-version-kind"] = gvk;
    let name = custom_schema_name(t, &t.kind);
    out.insert(
        format!("{name}List"),
        json!({
            "type": "object", "required": ["items"],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "items": {"type": "array", "items": schema_ref(&name)},
                "metadata": schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")},
            "x-kubernetes-group-version-kind": [{"group": t.group, "version": t.version, "kind": t.list_kind}],
        }),
    );
    out.insert(name, object);
}

/// The document of one group version.
pub fn group_version(cluster: &Cluster, group: &str, version: &str) -> ApiResult<Value> {
    let types = cluster.lock().catalog.in_group_version(group, version);
    if types.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let mut paths = Map::new();
    let mut components = schemas::builtin().definitions.clone();
    for t in &types {
        paths_of(t, &mut paths);
        if let Schema::Custom(schema) = &t.schema {
            custom_schemas(t, schema, &mut components);
        }
    }
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": schemas::builtin().kubernetes_version},
        "paths": paths,
        "components": {"schemas": components},
    }))
}

/// `/openapi/v3`: where each group version's document is, with a hash of its content.
pub fn root(cluster: &Cluster) -> Value {
    let groups = cluster.lock().catalog.groups();
    let mut paths = Map::new();
    for (group, versions) in groups {
        for version in versions {
            let Ok(doc) = group_version(cluster, &group, &version) else {
                continue;
            };
            let mut hasher = DefaultHasher::new();
            doc.to_string().hash(&mut hasher);
            let path = prefix(&group, &version);
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={:016X}", hasher.finish())}),
            );
        }
    }
    json!({"paths": paths})
}
