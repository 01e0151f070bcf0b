//! Deletes: preconditions (uid, resourceVersion), finalizers (the object stays, with a
//! `deletionTimestamp`, until the last one is removed), Namespaces that terminate by deleting
//! their contents first, and `deletecollection` over a selection.

use bytes::Bytes;
use http::Response;
use serde_json::{Value, json};

use super::Call;
use super::hooks;
use super::read::Selection;
use crate::catalog::ResourceType;
use crate::cluster::Db;
use crate::convert::{to_storage, to_view};
use crate::http::{Body, json_response};
use crate::meta;
use crate::status::{ApiError, ApiResult, success_status};
use crate::store::Key;

/// `DeleteOptions`, from the body or the query string.
struct DeleteOptions {
    dry_run: bool,
    uid: Option<String>,
    resource_version: Option<String>,
}

fn options(call: &Call, body: &Bytes) -> ApiResult<DeleteOptions> {
    let parsed: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else if body.starts_with(crate::protobuf::MAGIC) {
        crate::protobuf::decode(body).map_err(ApiError::bad_request)?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let dry_run = parsed["dryRun"]
        .as_array()
        .is_some_and(|d| d.iter().any(|v| v == "All"))
        || call.query.get("dryRun") == Some("All");
    Ok(DeleteOptions {
        dry_run,
        uid: parsed["preconditions"]["uid"].as_str().map(String::from),
        resource_version: parsed["preconditions"]["resourceVersion"]
            .as_str()
            .map(String::from),
    })
}

/// Whether a successful delete answers with the object (custom resources and the kinds that
/// linger) or with a `Status`.
fn returns_object(t: &ResourceType) -> bool {
    t.is_custom()
        || matches!(
            t.kind.as_str(),
            "Pod" | "Namespace" | "CustomResourceDefinition"
        )
}

/// Delete (or start deleting) one stored object; returns its last view.
pub fn delete_object(
    call: &Call,
    t: &ResourceType,
    db: &mut Db,
    key: &Key,
    stored: &Value,
    dry_run: bool,
) -> ApiResult<Value> {
    if t.group.is_empty() && t.kind == "Namespace" {
        return terminate_namespace(call, db, key, stored, dry_run);
    }
    if !meta::finalizers(stored).is_empty() {
        if meta::is_deleting(stored) || dry_run {
            return Ok(to_view(t, stored));
        }
        let mut marked = stored.clone();
        meta::mark_deleting(&mut marked);
        let change = call.cluster.commit(db, key.clone(), marked);
        return Ok(to_view(t, &change.object));
    }
    if dry_run {
        return Ok(to_view(t, stored));
    }
    let change = call
        .cluster
        .remove(db, key)
        .ok_or_else(|| ApiError::not_found(&t.group, &t.resource, &key.name))?;
    hooks::after_delete(&call.cluster, db, t, &change.object)?;
    Ok(to_view(t, &change.object))
}

/// A Namespace goes `Terminating`, its contents are deleted, and it goes once it is empty.
fn terminate_namespace(
    call: &Call,
    db: &mut Db,
    key: &Key,
    stored: &Value,
    dry_run: bool,
) -> ApiResult<Value> {
    let t = db
        .catalog
        .get("", "v1", "namespaces")
        .ok_or_else(|| ApiError::internal("namespaces are not served"))?;
    if dry_run {
        return Ok(to_view(&t, stored));
    }
    let mut terminating = stored.clone();
    if !meta::is_deleting(stored) {
        meta::mark_deleting(&mut terminating);
        terminating["status"]["phase"] = json!("Terminating");
        terminating = (*call.cluster.commit(db, key.clone(), terminating).object).clone();
    }
    hooks::empty_namespace(&call.cluster, db, &key.name)?;
    Ok(to_view(
        &t,
        &db.store.get(key).map_or(terminating, |o| (*o).clone()),
    ))
}

pub fn delete(call: &Call, t: &ResourceType, body: &Bytes) -> ApiResult<Response<Body>> {
    let opts = options(call, body)?;
    let name = call.path.name.clone().unwrap_or_default();
    let key = call.key(t, &name);
    let mut db = call.cluster.lock();
    let stored = db
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&t.group, &t.resource, &name))?;
    let uid = meta::uid(&stored).unwrap_or("").to_string();
    if let Some(want) = opts.uid.as_deref()
        && want != uid
    {
        return Err(ApiError::precondition_failed(
            t,
            &key,
            format!("UID in precondition: {want}, UID in object meta: {uid}"),
        ));
    }
    let rv = meta::resource_version(&stored).unwrap_or("").to_string();
    if let Some(want) = opts.resource_version.as_deref()
        && want != rv
    {
        return Err(ApiError::precondition_failed(
            t,
            &key,
            format!(
                "ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
            ),
        ));
    }
    let view = delete_object(call, t, &mut db, &key, &stored, opts.dry_run)?;
    Ok(if returns_object(t) {
        call.render_object(t, 200, &view)
    } else {
        json_response(200, &success_status(&t.group, &t.resource, &name, &uid))
    })
}

pub fn delete_collection(call: &Call, t: &ResourceType, body: &Bytes) -> ApiResult<Response<Body>> {
    let opts = options(call, body)?;
    let selection = Selection::from_call(call, t)?;
    let namespace = t
        .namespaced
        .then(|| call.namespace())
        .filter(|ns| !ns.is_empty());
    let mut db = call.cluster.lock();
    let selected: Vec<_> = db
        .store
        .list(&t.storage, namespace, None)
        .map_err(|_| ApiError::internal("listing for deletecollection failed"))?
        .into_iter()
        .filter(|o| selection.matches(o))
        .collect();
    let mut deleted = Vec::new();
    for stored in selected {
        let key = Key {
            storage: t.storage.clone(),
            namespace: meta::namespace(&stored).unwrap_or("").to_string(),
            name: meta::name(&stored).unwrap_or("").to_string(),
        };
        deleted.push(delete_object(
            call,
            t,
            &mut db,
            &key,
            &stored,
            opts.dry_run,
        )?);
    }
    let rv = db.store.current_rv().to_string();
    Ok(json_response(
        200,
        &json!({"kind": t.list_kind, "apiVersion": t.api_version(),
                "metadata": {"resourceVersion": rv}, "items": deleted}),
    ))
}

/// Used by hooks to delete what a Namespace or CRD leaves behind.
pub fn remove_stored(
    cluster: &crate::cluster::Cluster,
    db: &mut Db,
    t: &ResourceType,
    stored: &Value,
) -> ApiResult<()> {
    let key = Key {
        storage: t.storage.clone(),
        namespace: meta::namespace(stored).unwrap_or("").to_string(),
        name: meta::name(stored).unwrap_or("").to_string(),
    };
    if !meta::finalizers(stored).is_empty() {
        if !meta::is_deleting(stored) {
            let mut marked = stored.clone();
            meta::mark_deleting(&mut marked);
            cluster.commit(db, key, to_storage(t, to_view(t, &marked)));
        }
        return Ok(());
    }
    if let Some(change) = cluster.remove(db, &key) {
        hooks::after_delete(cluster, db, t, &change.object)?;
    }
    Ok(())
}
