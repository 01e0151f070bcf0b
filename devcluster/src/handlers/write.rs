//! Writes: create, update (PUT), the three patch types and server-side apply, on the main
//! resource or its `/status` (each sees only its own half of the object, as on a cluster;
//! the answered-not-stored requests are in `review`). Every write takes the same path: scope
//! the change, keep the system's metadata, bump `generation` on spec changes only, run kind
//! hooks and admission, record field ownership, skip no-ops (no new resourceVersion), finish
//! a deletion whose last finalizer went, then commit.

use bytes::Bytes;
use http::{Response, header};
use serde_json::{Value, json};

use super::write_options::{self, Options};
use super::{Call, hooks};
use crate::admit::admit;
use crate::catalog::ResourceType;
use crate::cluster::Db;
use crate::convert::{to_storage, to_view};
use crate::fields::{self, PatchKind};
use crate::http::{Body, add_warnings};
use crate::meta;
use crate::status::{ApiError, ApiResult};

fn content_type(call: &Call) -> &str {
    call.headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
}

/// A request body: JSON, or YAML (what apply sends, and what some clients post).
pub(super) fn parse_body(call: &Call, body: &[u8]) -> ApiResult<Value> {
    let ct = content_type(call).split(';').next().unwrap_or("").trim();
    let value: Value = if ct.contains("yaml") {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad_request("the request body is not UTF-8"))?;
        serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else if ct == "application/vnd.kubernetes.protobuf" {
        crate::protobuf::decode(body).map_err(|e| {
            if e.starts_with(crate::protobuf::UNSUPPORTED_KIND) {
                ApiError::bad_request(e).with_code(415, "UnsupportedMediaType")
            } else {
                ApiError::bad_request(e)
            }
        })?
    } else if ct.is_empty() || ct.contains("json") || ct == "*/*" {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized: couldn't get version/kind; json parse error: {e}"
            ))
        })?
    } else {
        return Err(ApiError::unsupported_media_type(&[
            "application/json",
            "application/yaml",
        ]));
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body is not a JSON object",
        ));
    }
    Ok(value)
}

/// The body must be of the kind and version the path names (missing ones are filled in).
pub(super) fn check_kind(t: &ResourceType, object: &mut Value) -> ApiResult<()> {
    let want = t.api_version();
    match object.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => object["apiVersion"] = json!(want),
        Some(v) if v == want => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({want})"
            )));
        }
    }
    match object.get("kind").and_then(Value::as_str) {
        None | Some("") => object["kind"] = json!(t.kind),
        Some(k) if k == t.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                t.kind
            )));
        }
    }
    Ok(())
}

fn respond(
    call: &Call,
    t: &ResourceType,
    code: u16,
    view: &Value,
    warnings: &[String],
) -> Response<Body> {
    let mut response = call.render_object(t, code, view);
    add_warnings(&mut response, warnings);
    response
}

/// An object without what changes on every write, for no-op detection.
fn comparable(object: &Value) -> Value {
    let mut c = object.clone();
    if let Some(meta) = c.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        if let Some(Value::Array(managed)) = meta.get_mut("managedFields") {
            for entry in managed.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("time");
            }
        }
    }
    c
}

/// Create `object` (in `t`'s view). `managed`: field ownership was already recorded (apply).
fn commit_create(
    call: &Call,
    t: &ResourceType,
    db: &mut Db,
    mut object: Value,
    opts: &Options,
    managed: bool,
) -> ApiResult<(Value, Vec<String>)> {
    check_kind(t, &mut object)?;
    let namespace = call.namespace().to_string();
    let meta = meta::metadata_mut(&mut object)
        .ok_or_else(|| ApiError::bad_request("the object is not a JSON object"))?;
    let prefix = meta
        .get("generateName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let generated = meta
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if generated {
        match prefix.as_str() {
            prefix if !prefix.is_empty() => {
                let name = format!("{prefix}{}", meta::name_suffix());
                meta.insert("name".into(), json!(name));
            }
            _ => {
                return Err(ApiError::invalid(
                    &t.kind,
                    &t.group,
                    "",
                    format!(
                        "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                        t.qualified_kind()
                    ),
                    json!([{"reason": "FieldValueRequired", "message": "Required value: name or generateName is required", "field": "metadata.name"}]),
                ));
            }
        }
    }
    if t.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(namespace));
            }
        }
    } else {
        meta.remove("namespace");
    }
    for field in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(field);
    }
    if !managed {
        meta.remove("managedFields");
    }
    meta.insert("uid".into(), json!(meta::new_uid()));
    meta.insert("creationTimestamp".into(), json!(meta::now_rfc3339()));
    let name = meta::name(&object).unwrap_or("").to_string();
    if t.namespaced {
        // Admission names the object as the request did (a generateName prefix, if that).
        let asked = if generated {
            prefix.as_str()
        } else {
            name.as_str()
        };
        hooks::check_namespace(db, t, asked, &namespace)?;
    }
    let key = call.key(t, &name);
    if db.store.get(&key).is_some() {
        return Err(ApiError::already_exists(&t.group, &t.resource, &name));
    }
    // A create cannot set status where status has its own endpoint.
    fields::scope(t, &mut object, None, None);
    if (t.is_custom() || object.get("spec").is_some())
        && let Some(meta) = meta::metadata_mut(&mut object)
    {
        meta.insert("generation".into(), json!(1));
    }
    hooks::defaults(t, &mut object);
    let warnings = admit(t, &mut object, None, opts.validation)?;
    if !managed {
        object = fields::record_update(t, None, object, &opts.manager, None, &meta::now_rfc3339());
    }
    hooks::prepare_create(t, db, &mut object)?;
    let stored = to_storage(t, object);
    if opts.dry_run {
        return Ok((to_view(t, &stored), warnings));
    }
    let change = call.cluster.commit(db, key, stored);
    hooks::after_commit(&call.cluster, db, t, &change.object, true)?;
    Ok((to_view(t, &change.object), warnings))
}

/// Replace `old` (stored) with `new` (in `t`'s view). Returns the view and whether it changed.
#[allow(clippy::too_many_arguments)]
fn commit_update(
    call: &Call,
    t: &ResourceType,
    db: &mut Db,
    old: &Value,
    mut new: Value,
    opts: &Options,
    managed: bool,
) -> ApiResult<(Value, Vec<String>)> {
    check_kind(t, &mut new)?;
    let name = call.path.name.clone().unwrap_or_default();
    match meta::name(&new) {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        Some(_) => {}
        None => {
            if let Some(meta) = meta::metadata_mut(&mut new) {
                meta.insert("name".into(), json!(name));
            }
        }
    }
    if let Some(rv) = meta::resource_version(&new)
        && Some(rv) != meta::resource_version(old)
    {
        return Err(ApiError::conflict(&t.group, &t.resource, &name));
    }
    if let (Some(want), Some(have)) = (meta::uid(&new), meta::uid(old))
        && !want.is_empty()
        && want != have
    {
        return Err(ApiError::precondition_failed(
            t,
            &call.key(t, &name),
            format!("UID in precondition: {want}, UID in object meta: {have}"),
        ));
    }
    let old_view = to_view(t, old);
    let subresource = call.path.subresource.as_deref();
    fields::scope(t, &mut new, Some(&old_view), subresource);
    meta::keep_system_fields(&old_view, &mut new)?;
    hooks::defaults(t, &mut new);
    let warnings = admit(t, &mut new, Some(&old_view), opts.validation)?;
    if !managed {
        new = fields::record_update(
            t,
            Some(&old_view),
            new,
            &opts.manager,
            subresource,
            &meta::now_rfc3339(),
        );
    }
    hooks::prepare_update(t, db, &old_view, &mut new)?;
    if subresource.is_none() {
        meta::bump_generation(&old_view, &mut new);
    }
    if let Some(meta) = meta::metadata_mut(&mut new) {
        meta.insert(
            "resourceVersion".into(),
            json!(meta::resource_version(old).unwrap_or("")),
        );
    }
    if comparable(&old_view) == comparable(&new) {
        return Ok((old_view, warnings));
    }
    let key = call.key(t, &name);
    if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() {
        if opts.dry_run {
            return Ok((new, warnings));
        }
        // The last finalizer is gone: the deletion completes (watchers see only DELETED).
        let change = call
            .cluster
            .remove(db, &key)
            .ok_or_else(|| ApiError::internal("the object vanished during its update"))?;
        hooks::after_delete(&call.cluster, db, t, &change.object)?;
        return Ok((to_view(t, &change.object), warnings));
    }
    let stored = to_storage(t, new);
    if opts.dry_run {
        return Ok((to_view(t, &stored), warnings));
    }
    let change = call.cluster.commit(db, key, stored);
    hooks::after_commit(&call.cluster, db, t, &change.object, false)?;
    Ok((to_view(t, &change.object), warnings))
}

pub fn create(call: &Call, t: &ResourceType, body: &Bytes) -> ApiResult<Response<Body>> {
    if call.path.name.is_some() {
        return Err(ApiError::method_not_allowed(
            "create",
            &t.group,
            &t.resource,
        ));
    }
    let object = parse_body(call, body)?;
    let opts = write_options::parse(call, false)?;
    let mut db = call.cluster.lock();
    let (view, warnings) = commit_create(call, t, &mut db, object, &opts, false)?;
    Ok(respond(call, t, 201, &view, &warnings))
}

pub fn update(call: &Call, t: &ResourceType, body: &Bytes) -> ApiResult<Response<Body>> {
    let object = parse_body(call, body)?;
    let opts = write_options::parse(call, false)?;
    let name = call.path.name.clone().unwrap_or_default();
    let mut db = call.cluster.lock();
    let Some(old) = db.store.get(&call.key(t, &name)) else {
        return Err(ApiError::not_found(&t.group, &t.resource, &name));
    };
    let (view, warnings) = commit_update(call, t, &mut db, &old, object, &opts, false)?;
    Ok(respond(call, t, 200, &view, &warnings))
}

pub fn patch(call: &Call, t: &ResourceType, body: &Bytes) -> ApiResult<Response<Body>> {
    let ct = content_type(call).to_string();
    let kind = PatchKind::from_content_type(&ct)
        .ok_or_else(|| ApiError::unsupported_media_type(PatchKind::ACCEPTED))?;
    if kind == PatchKind::Strategic && t.is_custom() {
        return Err(ApiError::unsupported_media_type(
            crate::fieldmgr::CUSTOM_RESOURCE_PATCH_TYPES,
        ));
    }
    if kind == PatchKind::Apply {
        return apply(call, t, body);
    }
    let opts = write_options::parse(call, false)?;
    let name = call.path.name.clone().unwrap_or_default();
    let mut db = call.cluster.lock();
    let Some(old) = db.store.get(&call.key(t, &name)) else {
        return Err(ApiError::not_found(&t.group, &t.resource, &name));
    };
    let patched = fields::patch(t, kind, &to_view(t, &old), body)?;
    let (view, warnings) = commit_update(call, t, &mut db, &old, patched, &opts, false)?;
    Ok(respond(call, t, 200, &view, &warnings))
}

fn apply(call: &Call, t: &ResourceType, body: &Bytes) -> ApiResult<Response<Body>> {
    let opts = write_options::parse(call, true)?;
    let mut applied = parse_body(call, body)?;
    check_kind(t, &mut applied)?;
    let subresource = call.path.subresource.as_deref();
    let force = opts.force;
    let name = call.path.name.clone().unwrap_or_default();
    let now = meta::now_rfc3339();
    let mut db = call.cluster.lock();
    match db.store.get(&call.key(t, &name)) {
        None if subresource.is_some() => Err(ApiError::not_found(&t.group, &t.resource, &name)),
        None => {
            if meta::name(&applied).is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta::name(&applied).unwrap_or("")
                )));
            }
            let mut object = fields::apply(t, None, &applied, &opts.manager, force, None, &now)?;
            if let Some(meta) = meta::metadata_mut(&mut object) {
                meta.insert("name".into(), json!(name));
            }
            let (view, warnings) = commit_create(call, t, &mut db, object, &opts, true)?;
            Ok(respond(call, t, 201, &view, &warnings))
        }
        Some(old) => {
            let old_view = to_view(t, &old);
            let mut merged = fields::apply(
                t,
                Some(&old_view),
                &applied,
                &opts.manager,
                force,
                subresource,
                &now,
            )?;
            // Apply carries no precondition unless the configuration names a version.
            if meta::resource_version(&applied).is_none()
                && let Some(meta) = meta::metadata_mut(&mut merged)
            {
                meta.remove("resourceVersion");
            }
            let (view, warnings) = commit_update(call, t, &mut db, &old, merged, &opts, true)?;
            Ok(respond(call, t, 200, &view, &warnings))
        }
    }
}
