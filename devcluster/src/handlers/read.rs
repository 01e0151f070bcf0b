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

use super::options::ListOptions;
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
        let mut raw = call.query.get("fieldSelector").unwrap_or("").to_string();
        // A watch of one object (`.../pods/web?watch=1`) selects it by name as well.
        if let Some(name) = call.path.name.as_deref() {
            let pinned = format!("metadata.name={name}");
            raw = if raw.trim().is_empty() {
                pinned
            } else {
                format!("{raw},{pinned}")
            };
        }
        // Field selectors name the fields of the view they were written against; they are
        // checked there, then matched against the stored form.
        let fields = FieldSelector::parse(&raw, &t.kind, t.field_selectors(), t.field_refusal())?
            .rename(|field| stored_field(t, field));
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

/// A `continue` token: the list's version (`-1`: "the newest", in the inconsistent token a
/// 410 hands out) and the last key served.
fn encode_continue(rv: i64, start: &str) -> String {
    STANDARD.encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string())
}

fn decode_continue(token: &str) -> ApiResult<(Option<u64>, String)> {
    let invalid = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let raw = STANDARD.decode(token).map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&raw).map_err(|_| invalid())?;
    let rv = match value["rv"].as_i64().ok_or_else(invalid)? {
        -1 => None,
        rv => Some(u64::try_from(rv).map_err(|_| invalid())?),
    };
    let start = value["start"].as_str().ok_or_else(invalid)?.to_string();
    Ok((rv, start))
}

/// Where an object sits in a list: etcd orders by key, `/registry/<resource>/<ns>/<name>`.
fn sort_key(object: &Value) -> String {
    let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    }
}

/// etcd3's `inconsistentContinue`, with the token that finishes the list at the newest state.
fn continue_expired(start: &str) -> ApiError {
    ApiError::expired(
        "The provided continue parameter is too old to display a consistent list result. You can \
         start a new list without the continue parameter, or use the continue token in this \
         response to retrieve the remainder of the results. Continuing with the provided token \
         results in an inconsistent list - objects that were created, modified, or deleted \
         between the time the first chunk was returned and now may show up in the list.",
    )
    .with_list_meta(json!({"continue": encode_continue(-1, start)}))
}

pub fn list(call: &Call, t: &ResourceType) -> ApiResult<Response<Body>> {
    let selection = Selection::from_call(call, t)?;
    let limit = call.query.number("limit")?.filter(|l| *l > 0);
    let options = ListOptions::parse(&call.query, false)?;
    let requested_rv = Some(options.resource_version.as_str()).filter(|v| !v.is_empty());
    let exact = options.exact();
    let namespace = t
        .namespaced
        .then(|| call.namespace())
        .filter(|ns| !ns.is_empty());
    let db = call.cluster.lock();
    let current = db.store.current_rv();
    let (at, start) = match call.query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (rv, start) = decode_continue(token)?;
            (rv, Some(start))
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
    let mut objects = db
        .store
        .list(&t.storage, namespace, at)
        .map_err(|e| match &start {
            Some(start) => continue_expired(start),
            None => ApiError::expired(format!(
                "too old resource version: {} ({})",
                e.requested, e.oldest
            )),
        })?;
    drop(db);
    objects.sort_by_cached_key(|o| sort_key(o));
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
            meta["continue"] = json!(encode_continue(list_rv as i64, &sort_key(last)));
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
