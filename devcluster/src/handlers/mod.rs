//! Resource requests: find the type a path names, check scope, verb and subresource, and hand
//! the request to the read, write, delete or watch handler. Answers are rendered here in the
//! form the client asked for (`Accept`): the object, a `Table` for `kubectl get`, or
//! `PartialObjectMetadata` for metadata-only clients.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Response, header};
use serde_json::{Value, json};

use crate::catalog::{Behavior, ResourceType};
use crate::cluster::Cluster;
use crate::http::{Body, json_response};
use crate::request::{Query, ResourcePath};
use crate::status::{ApiError, ApiResult};
use crate::store::Key;
use crate::table::{self, IncludeObject};
use crate::tokens::User;

mod delete;
mod hooks;
pub(crate) mod options;
pub(crate) mod read;
mod review;
mod write;
mod write_options;

/// One resource request, parsed and authenticated.
pub struct Call {
    pub cluster: Arc<Cluster>,
    pub path: ResourcePath,
    pub query: Query,
    pub headers: HeaderMap,
    pub user: User,
    pub verb: &'static str,
}

/// What the client wants back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rendering {
    Object,
    Table,
    Metadata,
}

// === impl Call ===

impl Call {
    pub fn rendering(&self) -> Rendering {
        let accept = self
            .headers
            .get(header::ACCEPT)
            .and_then(|a| a.to_str().ok())
            .unwrap_or("");
        // The first acceptable entry wins, as the server negotiates.
        for entry in accept.split(',') {
            if entry.contains("as=Table") {
                return Rendering::Table;
            }
            if entry.contains("as=PartialObjectMetadata") {
                return Rendering::Metadata;
            }
            if entry.trim().starts_with("application/json") || entry.trim().starts_with("*/*") {
                return Rendering::Object;
            }
        }
        Rendering::Object
    }

    pub fn namespace(&self) -> &str {
        self.path.namespace.as_deref().unwrap_or("")
    }

    pub fn key(&self, t: &ResourceType, name: &str) -> Key {
        Key {
            storage: t.storage.clone(),
            namespace: if t.namespaced {
                self.namespace().to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }

    /// Render one object (already in `t`'s view).
    pub fn render_object(&self, t: &ResourceType, code: u16, object: &Value) -> Response<Body> {
        match self.rendering() {
            Rendering::Object => json_response(code, object),
            Rendering::Metadata => json_response(code, &metadata_only(object)),
            Rendering::Table => {
                let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
                json_response(code, &self.table(t, &[object], meta))
            }
        }
    }

    pub fn table(&self, t: &ResourceType, objects: &[&Value], meta: Value) -> Value {
        let include = IncludeObject::parse(self.query.get("includeObject"));
        let no_headers = self.query.flag("noHeaders");
        table::table(t, objects, meta, include, no_headers)
    }
}

pub fn metadata_only(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// Route a resource request to its handler.
pub async fn handle(call: Call, method: &Method, body: Bytes) -> ApiResult<Response<Body>> {
    let t = {
        let db = call.cluster.lock();
        db.catalog
            .get(&call.path.group, &call.path.version, &call.path.resource)
    }
    .ok_or_else(ApiError::path_not_found)?;
    // Scope: a cluster-scoped kind has no namespace path, and a namespaced object needs one.
    if !t.namespaced && call.path.namespace.is_some() {
        return Err(ApiError::path_not_found());
    }
    if t.namespaced && call.path.namespace.is_none() && call.path.name.is_some() {
        return Err(ApiError::path_not_found());
    }
    if !t.verbs.contains(&call.verb) {
        return Err(ApiError::method_not_allowed(
            call.verb,
            &t.group,
            &t.resource,
        ));
    }
    if t.behavior == Behavior::Review {
        return review::review(&call, &t, &body);
    }
    match call.path.subresource.as_deref() {
        None => {}
        Some("status")
            if t.status_subresource && matches!(call.verb, "get" | "update" | "patch") => {}
        Some("status") if t.status_subresource => {
            return Err(ApiError::method_not_allowed(
                call.verb,
                &t.group,
                &t.resource,
            ));
        }
        Some("token") if t.group.is_empty() && t.resource == "serviceaccounts" => {
            if call.verb != "create" {
                return Err(ApiError::method_not_allowed(
                    call.verb,
                    "",
                    "serviceaccounts/token",
                ));
            }
            return review::token_request(&call, &body);
        }
        Some(_) => return Err(ApiError::path_not_found()),
    }
    match (method, call.verb) {
        (_, "get") => read::get(&call, &t),
        (_, "list") => read::list(&call, &t),
        (_, "watch") => crate::watch::watch(&call, &t),
        (_, "create") => write::create(&call, &t, &body),
        (_, "update") => write::update(&call, &t, &body),
        (_, "patch") => write::patch(&call, &t, &body),
        (_, "delete") => delete::delete(&call, &t, &body),
        (_, "deletecollection") => delete::delete_collection(&call, &t, &body),
        _ => Err(ApiError::method_not_allowed(
            call.verb,
            &t.group,
            &t.resource,
        )),
    }
}
