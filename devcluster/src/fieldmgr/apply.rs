//! Server-side apply as the API server runs it: request checks, the first-apply bookkeeping
//! of existing fields, merging the configuration by schema, pruning what the applier dropped,
//! conflicts with other managers, `kubectl`'s last-applied-configuration handover, and the
//! managedFields written back.

use serde_json::Value;

use super::error::{Cause, PatchError};
use super::fieldset::FieldSet;
use super::managed::{Managed, ManagedEntry, ManagerId, Operation};
use super::merge::{drop_nulls, merge, remove_items};
use super::path::compact_json;
use super::schema::Schema;
use super::typed::{equal, to_field_set, validate};
use super::update::{
    Conflicts, empty_object, record_changes, untracked_fields, update_managers,
    without_managed_fields,
};

pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Checks a `fieldManager` as upstream's `ValidatePatchOptions` does (422 on `PatchOptions`).
/// Apply requires one; any write limits it to 128 printable characters.
pub fn validate_field_manager(manager: &str, apply: bool) -> Result<(), PatchError> {
    let mut errors: Vec<(String, String, &str)> = Vec::new();
    if apply && manager.is_empty() {
        errors.push((
            "Required value: is required for apply patch".into(),
            "fieldManager".into(),
            "FieldValueRequired",
        ));
    }
    if manager.len() > 128 {
        errors.push((
            "Too long: may not be more than 128 bytes".into(),
            "fieldManager".into(),
            "FieldValueTooLong",
        ));
    }
    for (i, c) in manager.chars().enumerate() {
        if c.is_control() {
            errors.push((
                format!(
                    "Invalid value: {}: invalid character U+{:04X} (at position {i})",
                    super::error::go_quote(manager),
                    c as u32
                ),
                "fieldManager".into(),
                "FieldValueInvalid",
            ));
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    let rendered: Vec<String> = errors.iter().map(|(m, f, _)| format!("{f}: {m}")).collect();
    let joined = if rendered.len() == 1 {
        rendered[0].clone()
    } else {
        format!("[{}]", rendered.join(", "))
    };
    Err(PatchError::Invalid {
        group: "meta.k8s.io".into(),
        kind: "PatchOptions".into(),
        name: String::new(),
        message: format!("PatchOptions.meta.k8s.io \"\" is invalid: {joined}"),
        causes: errors
            .into_iter()
            .map(|(message, field, reason)| Cause {
                reason: reason.into(),
                message,
                field,
            })
            .collect(),
    })
}

/// `group/version, Kind=kind` as Go prints a GroupVersionKind.
fn gvk_string(api_version: &str, kind: &str) -> String {
    match api_version.split_once('/') {
        Some((group, version)) => format!("{group}/{version}, Kind={kind}"),
        None => format!("/{api_version}, Kind={kind}"),
    }
}

fn text<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Server-side apply of `applied` (the user's partial configuration) by `manager`.
///
/// Returns the new object with managedFields updated, or a 409 listing every conflicting field
/// and manager. `live` is the stored object (`None` creates). `api_version` is the version of
/// the endpoint; `applied` must name it and the kind. The result still needs what any write
/// gets (name, uid, resourceVersion, defaults, validation); see the crate docs for the order.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    api_version: &str,
    now: &str,
    schema: Schema,
) -> Result<Value, PatchError> {
    validate_field_manager(manager, true)?;
    if !applied.is_object() {
        let found = match applied {
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            _ => "null",
        };
        return Err(PatchError::BadRequest(format!(
            "error decoding patch: json: cannot unmarshal {found} into Go value of type map[string]interface {{}}"
        )));
    }
    let kind = live
        .map(|l| text(l, "/kind"))
        .filter(|k| !k.is_empty())
        .or_else(|| schema_kind(schema))
        .unwrap_or_else(|| text(applied, "/kind"));
    let (applied_version, applied_kind) = (text(applied, "/apiVersion"), text(applied, "/kind"));
    if applied_version != api_version || applied_kind != kind {
        return Err(PatchError::BadRequest(format!(
            "invalid object type: {}",
            gvk_string(applied_version, applied_kind)
        )));
    }
    let live_object = match live {
        Some(l) => without_managed_fields(l),
        None => empty_object(schema, api_version, kind),
    };
    let mut managed = match live {
        Some(l) => Managed::from_object(l)
            .map_err(|e| PatchError::Internal(format!("failed to decode managed fields: {e}")))?,
        None => Managed::default(),
    };
    if managed.is_empty() && live.is_some() {
        let first = ManagerId::new(
            "before-first-apply",
            Operation::Update,
            api_version,
            subresource,
        );
        let empty = empty_object(schema, api_version, kind);
        let mut existing = live_object.clone();
        super::update::fill_skeleton(&mut existing, &empty);
        record_changes(
            &mut managed,
            &empty,
            &existing,
            schema,
            &first,
            api_version,
            now,
        );
        managed.cap_update_managers();
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(PatchError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    if let Some(problem) = validate(applied, schema) {
        return Err(PatchError::Internal(format!(
            "failed to create typed patch object ({}/{}; {}): {problem}",
            text(applied, "/metadata/namespace"),
            text(applied, "/metadata/name"),
            gvk_string(applied_version, applied_kind)
        )));
    }
    let id = ManagerId::new(manager, Operation::Apply, api_version, subresource);
    let outcome = match apply_fields(
        &live_object,
        applied,
        managed.clone(),
        &id,
        api_version,
        force,
        schema,
    ) {
        Err(conflicts) if manager == "kubectl" => {
            let allowed = allowed_conflicts(&live_object, api_version, schema);
            let remaining: Conflicts = conflicts
                .into_iter()
                .filter_map(|(id, set)| {
                    let left: Vec<_> = set
                        .paths()
                        .into_iter()
                        .filter(|p| !allowed.has(&p.0))
                        .collect();
                    (!left.is_empty()).then(|| (id, FieldSet::from_paths(left)))
                })
                .collect();
            if remaining.is_empty() {
                apply_fields(
                    &live_object,
                    applied,
                    managed,
                    &id,
                    api_version,
                    true,
                    schema,
                )
            } else {
                Err(remaining)
            }
        }
        other => other,
    };
    let (changed, mut managed) = outcome.map_err(conflict_error)?;
    // Upstream's `managedFieldsUpdater` stamps the applier on every apply, changed or not; a
    // write that differs only in such timestamps is then a no-op for the caller to detect
    // (`IgnoreManagedFieldsTimestampsTransformer`), so an apply that only adds a manager
    // (shared ownership of equal values) still records when it happened.
    if let Some(entry) = managed.get_mut(&id) {
        entry.time = Some(now.into());
    }
    let mut object = changed.unwrap_or(live_object);
    if manager == "kubectl"
        && !text(
            &object,
            &format!("/metadata/annotations/{}", LAST_APPLIED.replace('/', "~1")),
        )
        .is_empty()
    {
        set_last_applied(&mut object, applied);
    }
    drop_nulls(&mut object, schema);
    managed.store(&mut object);
    if let Some(live) = live
        && without_times(live) == without_times(&object)
    {
        return Ok(live.clone());
    }
    Ok(object)
}

/// An object with its managedFields timestamps blanked: upstream's
/// `IgnoreManagedFieldsTimestampsTransformer` keeps the old timestamps of a write that changes
/// nothing else.
fn without_times(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(Value::Array(entries)) = copy.pointer_mut("/metadata/managedFields") {
        for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
            entry.remove("time");
        }
    }
    copy
}

fn schema_kind<'a>(schema: Schema<'a>) -> Option<&'a str> {
    let gvks = schema
        .resolved()?
        .get("x-kubernetes-group-version-kind")?
        .as_array()?;
    match gvks.as_slice() {
        [one] => one.get("kind")?.as_str(),
        _ => None,
    }
}

/// structured-merge-diff's `Updater.Apply` plus `stripMeta`: the merged and pruned object
/// (`None` when nothing changed) and the managers after it, or the conflicts.
fn apply_fields(
    live: &Value,
    config: &Value,
    mut managed: Managed,
    id: &ManagerId,
    api_version: &str,
    force: bool,
    schema: Schema,
) -> Result<(Option<Value>, Managed), Conflicts> {
    let merged = merge(live, config, schema);
    let previous = managed.get(id).cloned();
    let last_set = previous
        .as_ref()
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    managed.put(ManagedEntry {
        id: id.clone(),
        api_version: api_version.into(),
        time: previous.and_then(|e| e.time),
        fields: to_field_set(config, schema),
    });
    let pruned = prune(&merged, &managed, &last_set, schema);
    update_managers(&mut managed, live, &pruned, schema, id, force)?;
    if let Some(entry) = managed.get_mut(id) {
        entry.fields = entry.fields.difference(&untracked_fields());
    }
    managed.drop_empty();
    let changed = (!equal(live, &pruned)).then_some(pruned);
    Ok((changed, managed))
}

/// Removes what the applier applied last time and no longer applies, unless another manager
/// (or this configuration) still owns it (upstream `prune`, `addBackOwnedItems`,
/// `addBackDanglingItems`).
fn prune(merged: &Value, managed: &Managed, last_set: &FieldSet, schema: Schema) -> Value {
    if last_set.is_empty() {
        return merged.clone();
    }
    let named = |set: &FieldSet| set.ensure_named_fields_are_members(Some(schema));
    let last = named(last_set);
    let pruned = remove_items(merged, &last, schema);
    let merged_set = named(&to_field_set(merged, schema));
    let owned = named(&managed.all_fields());
    let pruned_set = named(&to_field_set(&pruned, schema));
    let pruned = remove_items(
        merged,
        &merged_set.difference(&pruned_set.union(&owned)),
        schema,
    );
    let pruned_set = named(&to_field_set(&pruned, schema));
    remove_items(
        merged,
        &merged_set.difference(&pruned_set).intersection(&last),
        schema,
    )
}

/// Fields `kubectl` may take over without force because its last client-side apply set them
/// to what they still are (upstream `lastAppliedManager`).
fn allowed_conflicts(live: &Value, api_version: &str, schema: Schema) -> FieldSet {
    let pointer = format!("/metadata/annotations/{}", LAST_APPLIED.replace('/', "~1"));
    let Ok(last) = serde_json::from_str::<Value>(text(live, &pointer)) else {
        return FieldSet::new();
    };
    if text(&last, "/apiVersion") != api_version || validate(&last, schema).is_some() {
        return FieldSet::new();
    }
    let comparison = super::compare::compare(&last, live, schema);
    to_field_set(&last, schema)
        .difference(&comparison.modified)
        .difference(&comparison.added)
        .difference(&comparison.removed)
}

/// Rewrites the last-applied annotation from this configuration, as upstream does for
/// `kubectl` when the object already has one.
fn set_last_applied(object: &mut Value, applied: &Value) {
    let mut config = applied.clone();
    if let Some(annotations) = config
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
    let encoded = go_json(&config) + "\n";
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.insert(LAST_APPLIED.into(), Value::String(encoded));
    }
}

/// JSON as Go's encoder writes it: sorted keys, HTML characters escaped.
fn go_json(value: &Value) -> String {
    compact_json(value)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The 409 upstream builds from apply conflicts.
fn conflict_error(conflicts: Conflicts) -> PatchError {
    let mut conflicts = conflicts;
    conflicts.sort_by_key(|(id, _)| id.identifier());
    let flat: Vec<(String, String)> = conflicts
        .iter()
        .flat_map(|(id, set)| {
            let who = id.describe();
            set.paths()
                .into_iter()
                .map(move |p| (who.clone(), p.to_string()))
        })
        .collect();
    let message = match flat.as_slice() {
        [(who, path)] => format!("Apply failed with 1 conflict: conflict with {who}: {path}"),
        _ => {
            let mut lines = Vec::new();
            for (id, set) in &conflicts {
                lines.push(format!("conflicts with {}:", id.describe()));
                lines.extend(set.paths().iter().map(|p| format!("- {p}")));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                flat.len(),
                lines.join("\n")
            )
        }
    };
    PatchError::Conflict {
        message,
        causes: flat
            .into_iter()
            .map(|(who, field)| Cause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with {who}"),
                field,
            })
            .collect(),
    }
}

#[cfg(test)]
mod crd_tests;
#[cfg(test)]
mod semantics_tests;
#[cfg(test)]
mod tests;
