//! CustomResourceDefinitions: checked as the API server checks their shape (name is
//! `plural.group`, one storage version, a known scope), marked established with their accepted
//! names, and turned into the resource types that serve their objects — names, scope, short
//! names, categories, each served version's schema, status subresource and printer columns.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::catalog::{Behavior, CellSource, Column, ResourceType, STORED_VERBS, Schema};
use crate::cluster::Db;
use crate::meta;
use crate::status::{ApiError, ApiResult};

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn invalid(name: &str, field: &str, detail: String) -> ApiError {
    ApiError::invalid(
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
        name,
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: {field}: {detail}"
        ),
        json!([{"reason": "FieldValueInvalid", "message": detail, "field": field}]),
    )
}

/// Refuse a CRD a real server would refuse for its shape.
pub fn validate(crd: &Value) -> ApiResult<()> {
    let name = meta::name(crd).unwrap_or("");
    let group = str_at(crd, "/spec/group");
    let plural = str_at(crd, "/spec/names/plural");
    if group.is_empty() || !group.contains('.') {
        return Err(invalid(
            name,
            "spec.group",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        return Err(invalid(name, "spec.names.plural", "Required value".into()));
    }
    if str_at(crd, "/spec/names/kind").is_empty() {
        return Err(invalid(name, "spec.names.kind", "Required value".into()));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            name,
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = str_at(crd, "/spec/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        return Err(invalid(
            name,
            "spec.scope",
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(invalid(
            name,
            "spec.versions",
            "Invalid value: null: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"] == json!(true))
        .count();
    if storage != 1 {
        return Err(invalid(
            name,
            "spec.versions",
            format!(
                "Invalid value: {}: must have exactly one version marked as storage version",
                storage
            ),
        ));
    }
    Ok(())
}

/// The status a CRD gets once the API server accepts and serves it.
pub fn establish(crd: &mut Value) {
    let now = meta::now_rfc3339();
    let storage = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v["storage"] == json!(true)))
        .and_then(|v| v["name"].as_str())
        .unwrap_or("")
        .to_string();
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    if names.get("singular").is_none() {
        names["singular"] = json!(str_at(crd, "/spec/names/kind").to_lowercase());
    }
    if names.get("listKind").is_none() {
        names["listKind"] = json!(format!("{}List", str_at(crd, "/spec/names/kind")));
    }
    let mut stored_versions: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !stored_versions.contains(&json!(storage)) {
        stored_versions.push(json!(storage));
    }
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": stored_versions,
    });
}

fn columns(version: &Value) -> Vec<Column> {
    let mut columns = vec![Column {
        name: "Name".into(),
        type_: "string".into(),
        format: "name".into(),
        description: String::new(),
        priority: 0,
        source: CellSource::Path(".metadata.name".into()),
    }];
    match version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
    {
        Some(defined) => columns.extend(defined.iter().map(|c| {
            Column {
                name: c["name"].as_str().unwrap_or("").into(),
                type_: c["type"].as_str().unwrap_or("string").into(),
                format: c["format"].as_str().unwrap_or("").into(),
                description: c["description"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| {
                        format!(
                            "Custom resource definition column (in JSONPath format): {}",
                            c["jsonPath"].as_str().unwrap_or("")
                        )
                    }),
                priority: c["priority"].as_i64().unwrap_or(0),
                source: CellSource::Path(c["jsonPath"].as_str().unwrap_or("").into()),
            }
        })),
        None => columns.push(Column {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            source: CellSource::Path(".metadata.creationTimestamp".into()),
        }),
    }
    columns
}

/// The resource types a stored CRD defines (one per served version).
pub fn types_of(crd: &Value) -> Vec<ResourceType> {
    let name = meta::name(crd).unwrap_or("").to_string();
    let group = str_at(crd, "/spec/group").to_string();
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let kind = names["kind"].as_str().unwrap_or("").to_string();
    let plural = names["plural"].as_str().unwrap_or("").to_string();
    let list = |key: &str| -> Vec<String> {
        names[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v["storage"] == json!(true))
        .and_then(|v| v["name"].as_str())
        .unwrap_or("")
        .to_string();
    versions
        .iter()
        .filter(|v| v["served"] != json!(false))
        .map(|v| ResourceType {
            group: group.clone(),
            version: v["name"].as_str().unwrap_or("").to_string(),
            resource: plural.clone(),
            kind: kind.clone(),
            list_kind: names["listKind"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| format!("{kind}List")),
            singular: names["singular"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| kind.to_lowercase()),
            namespaced: str_at(crd, "/spec/scope") == "Namespaced",
            short_names: list("shortNames"),
            categories: list("categories"),
            verbs: STORED_VERBS,
            status_subresource: v.pointer("/subresources/status").is_some(),
            storage: name.clone(),
            behavior: Behavior::Stored,
            schema: Schema::Custom(Arc::new(
                v.pointer("/schema/openAPIV3Schema").cloned().unwrap_or(
                    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                ),
            )),
            columns: columns(v),
            crd: Some(name.clone()),
            storage_version: storage_version.clone(),
        })
        .collect()
}

/// Serve (or re-serve, after an update) what `crd` defines.
pub fn register(db: &mut Db, crd: &Value) {
    let name = meta::name(crd).unwrap_or("");
    db.catalog.remove_crd(name);
    for t in types_of(crd) {
        db.catalog.insert(t);
    }
}
