//! Ownership bookkeeping for writes that are not server-side apply (create, update, JSON /
//! merge / strategic patches), as the API server's field manager records them, plus the pieces
//! apply shares: the ownership update after a change, the untracked metadata fields, and the
//! subresource reset the caller performs.

use serde_json::{Map, Value};

use super::compare::{Comparison, compare};
use super::fieldset::FieldSet;
use super::managed::{Managed, ManagedEntry, ManagerId, Operation};
use super::path::Path;
use super::schema::Schema;

/// Fields no manager ever owns (upstream `stripMetaManager`).
pub(crate) fn untracked_fields() -> FieldSet {
    let meta = |name: &str| Path::fields(&["metadata", name]);
    FieldSet::from_paths([
        Path::fields(&["apiVersion"]),
        Path::fields(&["kind"]),
        Path::fields(&["metadata"]),
        meta("name"),
        meta("namespace"),
        meta("creationTimestamp"),
        meta("selfLink"),
        meta("uid"),
        meta("clusterName"),
        meta("generation"),
        meta("managedFields"),
        meta("resourceVersion"),
    ])
}

/// Conflicting fields, per other manager.
pub(crate) type Conflicts = Vec<(ManagerId, FieldSet)>;

/// structured-merge-diff's `Updater.update`: fields `new` added or changed leave every manager
/// but `actor` (an error unless `force`), fields it removed leave every manager but `actor`, and
/// managers left with nothing are dropped.
pub(crate) fn update_managers(
    managed: &mut Managed,
    old: &Value,
    new: &Value,
    schema: Schema,
    actor: &ManagerId,
    force: bool,
) -> Result<Comparison, Conflicts> {
    let comparison = compare(old, new, schema);
    let changed = comparison.modified.union(&comparison.added);
    let conflicts: Conflicts = managed
        .entries()
        .iter()
        .filter(|e| e.id != *actor)
        .filter_map(|e| {
            let c = e.fields.intersection(&changed);
            (!c.is_empty()).then(|| (e.id.clone(), c))
        })
        .collect();
    if !force && !conflicts.is_empty() {
        return Err(conflicts);
    }
    for entry in managed.entries_mut() {
        if entry.id == *actor {
            continue;
        }
        if let Some((_, c)) = conflicts.iter().find(|(id, _)| *id == entry.id) {
            entry.fields = entry.fields.difference(c);
        }
        if !comparison.removed.is_empty() {
            entry.fields = entry.fields.difference(&comparison.removed);
        }
    }
    managed.drop_empty();
    Ok(comparison)
}

/// Records what `new` changed relative to `old` for an `Update`-operation manager, as upstream's
/// `Update` plus the `managedFieldsUpdater` and `stripMeta` layers do. Returns the comparison.
pub(crate) fn record_changes(
    managed: &mut Managed,
    old: &Value,
    new: &Value,
    schema: Schema,
    id: &ManagerId,
    api_version: &str,
    now: &str,
) {
    let current = ManagerId::new("current-operation", Operation::Update, api_version, None);
    let Ok(comparison) = update_managers(managed, old, new, schema, &current, true) else {
        return;
    };
    let set = comparison
        .modified
        .union(&comparison.added)
        .difference(&untracked_fields());
    if set.is_empty() {
        return;
    }
    let previous = managed
        .get(id)
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    managed.put(ManagedEntry {
        id: id.clone(),
        api_version: api_version.into(),
        time: Some(now.into()),
        fields: set.union(&previous),
    });
}

/// The object a create starts from. Upstream compares against a new empty Go object, whose
/// non-pointer structs are `{}` and whose non-`omitempty` fields are `null`; the schema cannot
/// tell pointers apart, so for built-in kinds required properties and the conventionally
/// non-pointer structs (`metadata`, `spec`, `status`, `template`, `strategy`,
/// `updateStrategy`) stand in. Custom resources start from nothing, as upstream's do.
pub(crate) fn empty_object(schema: Schema, api_version: &str, kind: &str) -> Value {
    let mut object = match is_builtin(schema) {
        true => empty_struct(schema, 0),
        false => Map::new(),
    };
    object.remove("metadata");
    object.insert("apiVersion".into(), Value::String(api_version.into()));
    object.insert("kind".into(), Value::String(kind.into()));
    Value::Object(object)
}

/// Whether the schema is a built-in kind's (a definition carrying its group-version-kind).
fn is_builtin(schema: Schema) -> bool {
    schema.has_definitions()
        && schema
            .extension("x-kubernetes-group-version-kind")
            .is_some()
}

/// Adds the parts of `skeleton` that `value` lacks, so objects compare as their Go types
/// would decode them (see [`empty_object`]).
fn with_skeleton(value: &Value, skeleton: &Value) -> Value {
    let mut out = value.clone();
    fill_skeleton(&mut out, skeleton);
    out
}

pub(crate) fn fill_skeleton(value: &mut Value, skeleton: &Value) {
    if let (Value::Object(map), Value::Object(skel)) = (value, skeleton) {
        for (key, part) in skel {
            match map.get_mut(key) {
                Some(existing) => fill_skeleton(existing, part),
                None => {
                    map.insert(key.clone(), part.clone());
                }
            }
        }
    }
}

fn empty_struct(schema: Schema, depth: usize) -> Map<String, Value> {
    const STRUCTS: [&str; 6] = [
        "metadata",
        "spec",
        "status",
        "template",
        "strategy",
        "updateStrategy",
    ];
    let mut out = Map::new();
    let Some(node) = schema.resolved() else {
        return out;
    };
    let required: Vec<&str> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = node.get("properties").and_then(Value::as_object) else {
        return out;
    };
    for name in properties.keys() {
        let Some(child) = schema.property(name) else {
            continue;
        };
        let is_struct = child
            .resolved()
            .and_then(|n| n.get("properties"))
            .is_some_and(|p| p.as_object().is_some_and(|p| !p.is_empty()));
        if is_struct && STRUCTS.contains(&name.as_str()) && depth < 8 {
            out.insert(name.clone(), Value::Object(empty_struct(child, depth + 1)));
        } else if required.contains(&name.as_str()) {
            out.insert(name.clone(), Value::Null);
        }
    }
    out
}

pub(crate) fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    copy
}

fn has_uid(object: &Value) -> bool {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .is_some_and(|u| !u.is_empty())
}

/// Which managedFields an update starts from (upstream `decodeLiveOrNew`): for the main
/// resource the request may carry its own (`[]` resets them), else the stored object's.
fn starting_managed(old: &Value, new: &Value, subresource: Option<&str>) -> Managed {
    let from_old = || Managed::from_object(old).unwrap_or_default();
    if subresource.is_some() {
        return from_old();
    }
    match new.pointer("/metadata/managedFields") {
        Some(Value::Array(items)) if items.is_empty() => Managed::default(),
        Some(Value::Array(items))
            if items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty) =>
        {
            Managed::default()
        }
        _ => match Managed::from_object(new) {
            Ok(m) if !m.is_empty() => m,
            _ => from_old(),
        },
    }
}

/// Records ownership for a non-apply write by `manager` (operation `Update`): fields the write
/// added or changed move to this manager, fields it removed leave every set. Returns `new` with
/// `metadata.managedFields` set.
///
/// `old` is the stored object (`None` for a create) and must keep its `metadata.uid`: like
/// upstream, an existing object that has no managedFields is not tracked. An empty `manager`
/// is recorded as `unknown`; derive it from the User-Agent before calling, as upstream does.
/// Call [`reset_fields`] on `new` first when the kind has a status subresource.
pub fn record_update(
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    subresource: Option<&str>,
    api_version: &str,
    now: &str,
    schema: Schema,
) -> Value {
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or_default();
    let old_object = match old {
        Some(o) => o.clone(),
        None => empty_object(schema, api_version, kind),
    };
    let mut managed = starting_managed(&old_object, new, subresource);
    let mut result = without_managed_fields(new);
    if !result.is_object() {
        return new.clone();
    }
    if managed.is_empty() && has_uid(&old_object) {
        return result;
    }
    let id = ManagerId::new(manager, Operation::Update, api_version, subresource);
    let skeleton = empty_object(schema, api_version, kind);
    let before = with_skeleton(&without_managed_fields(&old_object), &skeleton);
    record_changes(
        &mut managed,
        &before,
        &with_skeleton(&result, &skeleton),
        schema,
        &id,
        api_version,
        now,
    );
    managed.cap_update_managers();
    managed.store(&mut result);
    result
}

/// Limits a write to what its endpoint may change, as the strategies' `PrepareForUpdate` do:
/// a `/status` write changes only `status`; a main-resource write of a kind with a status
/// subresource changes everything but `status`. With `old`, the out-of-scope parts are copied
/// back from it; without (an applied configuration), they are removed from `object`.
pub fn reset_fields(
    object: &mut Value,
    old: Option<&Value>,
    subresource: Option<&str>,
    has_status_subresource: bool,
) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match subresource {
        Some("status") => match old {
            Some(old) => {
                let status = map.remove("status");
                let managed = map
                    .get_mut("metadata")
                    .and_then(Value::as_object_mut)
                    .and_then(|m| m.remove("managedFields"));
                let mut copy = without_managed_fields(old);
                if let Some(copy_map) = copy.as_object_mut() {
                    match status {
                        Some(s) => copy_map.insert("status".into(), s),
                        None => copy_map.remove("status"),
                    };
                    if let (Some(list), Some(meta)) = (
                        managed,
                        copy_map.get_mut("metadata").and_then(Value::as_object_mut),
                    ) {
                        meta.insert("managedFields".into(), list);
                    }
                }
                *object = copy;
            }
            None => {
                map.retain(|k, _| {
                    matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")
                });
                if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.retain(|k, _| {
                        matches!(k.as_str(), "name" | "namespace" | "uid" | "resourceVersion")
                    });
                }
            }
        },
        None if has_status_subresource => match old.and_then(|o| o.get("status")) {
            Some(status) if old.is_some() => {
                map.insert("status".into(), status.clone());
            }
            _ => {
                map.remove("status");
            }
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests;
