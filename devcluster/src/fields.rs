//! Patches and field ownership, as the handlers see them: one call per patch type, one for
//! server-side apply and one to record a non-apply write, each given the resource type so the
//! right schema (a built-in definition, or the CRD's with `ObjectMeta` added) decides list and
//! map semantics. The merge logic itself lives in `fieldmgr`; this module picks schemas,
//! scopes writes to their subresource and turns its errors into API answers.

use serde_json::Value;

use crate::catalog::{ResourceType, Schema as TypeSchema};
use crate::fieldmgr::{self, PatchError, Schema};
use crate::schemas;
use crate::status::{ApiError, ApiResult};

/// The patch formats the API server takes, by `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchKind {
    pub const ACCEPTED: &'static [&'static str] = &[
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ];

    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" => Some(Self::Apply),
            _ => None,
        }
    }
}

fn api_error(e: PatchError) -> ApiError {
    let status = e.to_status();
    let reason = match e.reason() {
        "" => "InternalError",
        reason => reason,
    };
    let mut error = ApiError::bad_request(status["message"].as_str().unwrap_or("").to_string())
        .with_code(e.status_code(), reason);
    if let Some(details) = status.get("details").filter(|d| !d.is_null()) {
        error = error.with_details(details.clone());
    }
    error
}

/// Run `f` with the merge schema of `t`.
fn with_schema<R>(t: &ResourceType, f: impl FnOnce(Schema) -> R) -> R {
    let defs = &schemas::builtin().definitions;
    match &t.schema {
        TypeSchema::Builtin(name) => match Schema::definition(defs, name) {
            Some(schema) => f(schema),
            None => f(Schema::deduced()),
        },
        TypeSchema::Custom(structural) => {
            let node = fieldmgr::custom_resource_schema(structural, true);
            f(Schema::new(Some(defs), &node))
        }
    }
}

/// Apply a JSON, merge or strategic merge patch to `live` (in `t`'s view).
pub fn patch(t: &ResourceType, kind: PatchKind, live: &Value, body: &[u8]) -> ApiResult<Value> {
    match kind {
        PatchKind::Json => fieldmgr::json_patch(live, body),
        PatchKind::Merge => fieldmgr::merge_patch(live, body),
        PatchKind::Strategic => with_schema(t, |s| fieldmgr::strategic_merge_patch(live, body, s)),
        PatchKind::Apply => return Err(ApiError::internal("apply is not a patch")),
    }
    .map_err(api_error)
}

/// Keep a write to the half of the object its endpoint owns: `status` for `/status`,
/// everything else on the main resource of a kind with a status subresource. With `old` the
/// other half is copied back from it; without (an applied configuration) it is dropped.
pub fn scope(t: &ResourceType, object: &mut Value, old: Option<&Value>, subresource: Option<&str>) {
    fieldmgr::reset_fields(object, old, subresource, t.status_subresource);
}

/// Server-side apply of `applied` by `manager` onto `live` (absent: a create); `live` and the
/// result are in `t`'s view.
pub fn apply(
    t: &ResourceType,
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    now: &str,
) -> ApiResult<Value> {
    let mut config = applied.clone();
    scope(t, &mut config, None, subresource);
    let mut merged = with_schema(t, |s| {
        fieldmgr::apply(
            live,
            &config,
            manager,
            force,
            subresource,
            &t.api_version(),
            now,
            s,
        )
    })
    .map_err(api_error)?;
    if let Some(live) = live {
        scope(t, &mut merged, Some(live), subresource);
    }
    Ok(merged)
}

/// Record what a non-apply write by `manager` changed in `new`'s managedFields (`new` already
/// scoped to its subresource).
pub fn record_update(
    t: &ResourceType,
    old: Option<&Value>,
    new: Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) -> Value {
    with_schema(t, |s| {
        fieldmgr::record_update(old, &new, manager, subresource, &t.api_version(), now, s)
    })
}
