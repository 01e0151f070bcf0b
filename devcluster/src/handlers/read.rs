//! Reads: `get` of one object, and `list` with the API server's resourceVersion semantics
//! (unset or `0`: the newest state; `resourceVersionMatch=Exact`: the state as of that
//! version, or `410` once compacted; a version from the future: `504 Too large resource
//! version`), label and field selectors, and `limit`/`continue` pagination whose pages are all
//! consistent with the first one.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::Response;
use serde_json::{Value, json};

use super::{Call, Rendering, metadata_only};
use crate::catalog::ResourceType;
use crate::convert::{stored_field, to_view};
use crate::http::{Body, json_response};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};

/// The objects a list or watch selects.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selection {
    pub fn from_call(call: &Call, t: &ResourceType) -> ApiResult<Self> {
        let labels = LabelSelector::parse(call.query.get("labelSelector").unwrap_or(""))?;
        let raw = call.query.get("fieldSelector").unwrap_or("");
        // Field selectors name the fields of the view they were written against.
        let translated: Vec<String> = raw
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|term| {
                let split = term.find(['=', '!']).unwrap_or(term.len());
                let (field, rest) = term.split_at(split);
                format!("{}{rest}", stored_field(t, field.trim()))
            })
            .collect();
        let fields = FieldSelector::parse(&translated.join(","), &t.kind, t.field_selectors())?;
        Ok(Self { labels, fields })
    }

    /// Whether a stored object is selected.
    pub fn matches(&self, stored: &Value) -> bool {
        self.labels.matches(stored) && self.fields.matches(stored)
    }

    pub fn is_everything(&self) -> bool {
        self.labels == LabelSelector::default() && self.fields.is_empty()
    }
}

pub fn get(call: &Call, t: &ResourceType) -> ApiResult<Response<Body>> {
    let name = call.path.name.as_deref().unwrap_or("");
    let stored = call
        .cluster
        .lock()
        .store
        .get(&call.key(t, name))
        .ok_or_else(|| ApiError::not_found(&t.group, &t.resource, name))?;
    Ok(call.render_object(t, 200, &to_view(t, &stored)))
}

/// A `continue` token: the list's version and the last key served.
fn encode_continue(rv: u64, start: &str) -> String {
    STANDARD.encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string())
}

fn decode_continue(token: &str) -> ApiResult<(u64, String)> {
    let invalid = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let raw = STANDARD.decode(token).map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&raw).map_err(|_| invalid())?;
    let rv = value["rv"].as_u64().ok_or_else(invalid)?;
    let start = value["start"].as_str().ok_or_else(invalid)?.to_string();
    Ok((rv, start))
}

fn sort_key(object: &Value) -> String {
    let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    format!("{ns}/{name}")
}

pub fn list(call: &Call, t: &ResourceType) -> ApiResult<Response<Body>> {
    let selection = Selection::from_call(call, t)?;
    let limit = call.query.number("limit")?.filter(|l| *l > 0);
    let requested_rv = call.query.get("resourceVersion").filter(|v| !v.is_empty());
    let exact = call.query.get("resourceVersionMatch") == Some("Exact");
    let namespace = t
        .namespaced
        .then(|| call.namespace())
        .filter(|ns| !ns.is_empty());
    let db = call.cluster.lock();
    let current = db.store.current_rv();
    let (at, start) = match call.query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (rv, start) = decode_continue(token)?;
            (Some(rv), Some(start))
        }
        None => {
            let rv = requested_rv
                .map(|v| {
                    v.parse::<u64>().map_err(|_| {
                        ApiError::bad_request(format!("invalid resource version: {v}"))
                    })
                })
                .transpose()?;
            if let Some(rv) = rv
                && rv > current
            {
                return Err(ApiError::timeout(format!(
                    "Too large resource version: {rv}, current: {current}"
                ))
                .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge",
                    "message": "Too large resource version"}], "retryAfterSeconds": 1})));
            }
            (rv.filter(|rv| exact && *rv > 0), None)
        }
    };
    let objects = db.store.list(&t.storage, namespace, at).map_err(|e| {
        if start.is_some() {
            ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter, or use the continue \
                 token in this response to retrieve the remainder of the results.",
            )
        } else {
            ApiError::expired(format!(
                "too old resource version: {} ({})",
                e.requested, e.oldest
            ))
        }
    })?;
    drop(db);
    let list_rv = at.unwrap_or(current);
    let mut selected: Vec<Arc<Value>> = objects
        .into_iter()
        .filter(|o| selection.matches(o))
        .filter(|o| start.as_deref().is_none_or(|s| sort_key(o).as_str() > s))
        .collect();
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if let Some(limit) = limit
        && selected.len() > limit as usize
    {
        let remaining = selected.len() - limit as usize;
        selected.truncate(limit as usize);
        if let Some(last) = selected.last() {
            meta["continue"] = json!(encode_continue(list_rv, &sort_key(last)));
        }
        if selection.is_everything() {
            meta["remainingItemCount"] = json!(remaining);
        }
    }
    let views: Vec<Value> = selected.iter().map(|o| to_view(t, o)).collect();
    Ok(match call.rendering() {
        Rendering::Table => {
            let refs: Vec<&Value> = views.iter().collect();
            json_response(200, &call.table(t, &refs, meta))
        }
        Rendering::Metadata => json_response(
            200,
            &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta, "items": views.iter().map(metadata_only).collect::<Vec<_>>()}),
        ),
        Rendering::Object => json_response(
            200,
            &json!({"kind": t.list_kind, "apiVersion": t.api_version(), "metadata": meta, "items": views}),
        ),
    })
}
