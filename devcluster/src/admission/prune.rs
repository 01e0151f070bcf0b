//! Pruning of unknown fields as the API server's decoder does it: apiextensions-apiserver
//! `pkg/apiserver/schema/pruning/algorithm.go`, the unknown-`metadata`-field check of
//! `schema/objectmeta/coerce.go` (root and embedded resources), and
//! `schema/defaulting/prunenulls.go` (non-nullable `null`s without a default are dropped).

use serde_json::{Map, Value};

use super::schema::{AdditionalProperties, Schema, sorted_keys};

/// The JSON field names of `metav1.ObjectMeta`; anything else under `metadata` is unknown.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn is_meta_field(key: &str) -> bool {
    matches!(key, "apiVersion" | "kind" | "metadata")
}

/// Remove every field the schema does not know and return their paths (`spec.foo`,
/// `spec.ports[0].bar`, `metadata.foo`), as the server lists them in
/// `unknown field "spec.foo"` under `fieldValidation=Strict` (or in warnings under `Warn`).
///
/// Order as upstream: unknown `metadata` fields of the root, then the pruned paths sorted,
/// then unknown `metadata` fields of embedded resources, sorted. `x-kubernetes-preserve-unknown-fields`
/// keeps a node's unknown fields (its known ones are still pruned below);
/// `apiVersion`, `kind` and `metadata` of the root and of `x-kubernetes-embedded-resource`
/// nodes are the server's and never pruned. Afterwards `null` values of non-nullable fields
/// without a default are dropped silently (not reported), as the decoder does.
pub fn prune(schema: &Value, object: &mut Value) -> Vec<String> {
    let root = Schema::new(schema);
    let mut unknown = Vec::new();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        unknown.extend(prune_object_meta(metadata, "metadata"));
    }
    let mut pruned = Vec::new();
    prune_node(object, Some(root), true, "", &mut pruned);
    pruned.sort();
    unknown.extend(pruned);
    prune_non_nullable_nulls(object, Some(root));
    let mut embedded = Vec::new();
    embedded_object_meta(object, root, "", &mut embedded);
    embedded.sort();
    unknown.extend(embedded);
    unknown
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn prune_object_meta(metadata: &mut Map<String, Value>, prefix: &str) -> Vec<String> {
    let mut unknown: Vec<String> = sorted_keys(metadata)
        .into_iter()
        .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
        .map(|k| format!("{prefix}.{k}"))
        .collect();
    metadata.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
    unknown.sort();
    unknown
}

fn prune_node(
    value: &mut Value,
    schema: Option<Schema>,
    embedded: bool,
    path: &str,
    unknown: &mut Vec<String>,
) {
    if let Some(s) = schema.filter(Schema::preserve_unknown_fields) {
        skip_prune(value, s, embedded || s.embedded_resource(), path, unknown);
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(s) = schema else {
                unknown.extend(map.keys().map(|k| join(path, k)));
                map.clear();
                return;
            };
            let embedded = embedded || s.embedded_resource();
            map.retain(|key, member| {
                if embedded && is_meta_field(key) {
                    return true;
                }
                if let Some(property) = s.property(key) {
                    prune_node(
                        member,
                        Some(property),
                        property.embedded_resource(),
                        &join(path, key),
                        unknown,
                    );
                    return true;
                }
                match s.additional_properties() {
                    AdditionalProperties::Schema(values) => {
                        prune_node(
                            member,
                            Some(values),
                            values.embedded_resource(),
                            &join(path, key),
                            unknown,
                        );
                        true
                    }
                    AdditionalProperties::Allowed(_) => {
                        prune_node(member, None, false, &join(path, key), unknown);
                        true
                    }
                    AdditionalProperties::Absent => {
                        if !is_meta_field(key) || !path.is_empty() {
                            unknown.push(join(path, key));
                        }
                        false
                    }
                }
            });
        }
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items());
            let embedded = item_schema.is_some_and(|s| s.embedded_resource());
            for (index, item) in items.iter_mut().enumerate() {
                prune_node(
                    item,
                    item_schema,
                    embedded,
                    &format!("{path}[{index}]"),
                    unknown,
                );
            }
        }
        _ => {}
    }
}

/// Under `x-kubernetes-preserve-unknown-fields`: keep unknown fields, prune inside known ones.
fn skip_prune(
    value: &mut Value,
    schema: Schema,
    embedded: bool,
    path: &str,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            for (key, member) in map.iter_mut() {
                if embedded && is_meta_field(key) {
                    continue;
                }
                if let Some(property) = schema.property(key) {
                    prune_node(
                        member,
                        Some(property),
                        property.embedded_resource(),
                        &join(path, key),
                        unknown,
                    );
                } else {
                    match schema.additional_properties() {
                        AdditionalProperties::Schema(values) => prune_node(
                            member,
                            Some(values),
                            values.embedded_resource(),
                            &join(path, key),
                            unknown,
                        ),
                        AdditionalProperties::Allowed(_) => {
                            prune_node(member, None, false, &join(path, key), unknown)
                        }
                        AdditionalProperties::Absent => {}
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.items() else {
                return;
            };
            for (index, item) in items.iter_mut().enumerate() {
                let path = format!("{path}[{index}]");
                skip_prune(
                    item,
                    item_schema,
                    item_schema.embedded_resource(),
                    &path,
                    unknown,
                );
            }
        }
        _ => {}
    }
}

/// `PruneNonNullableNullsWithoutDefaults`.
fn prune_non_nullable_nulls(value: &mut Value, schema: Option<Schema>) {
    match value {
        Value::Object(map) => {
            map.retain(|key, member| {
                let member_schema = schema.and_then(|s| s.member(key));
                let drop = member.is_null()
                    && member_schema.is_some_and(|s| {
                        !s.nullable() && s.default_value().is_none_or(Value::is_null)
                    });
                if !drop {
                    prune_non_nullable_nulls(member, member_schema);
                }
                !drop
            });
        }
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items());
            for item in items.iter_mut() {
                prune_non_nullable_nulls(item, item_schema);
            }
        }
        _ => {}
    }
}

/// Unknown `metadata` fields of embedded resources below the root (field-path notation:
/// map members as `[key]`), as `objectmeta.CoerceWithOptions` reports them.
fn embedded_object_meta(value: &mut Value, schema: Schema, path: &str, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if schema.embedded_resource()
                && !path.is_empty()
                && let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut)
            {
                unknown.extend(prune_object_meta(metadata, &format!("{path}.metadata")));
            }
            for (key, member) in map.iter_mut() {
                if let Some(property) = schema.property(key) {
                    embedded_object_meta(member, property, &join(path, key), unknown);
                } else if let Some(values) = schema.additional_properties_schema() {
                    embedded_object_meta(member, values, &format!("{path}[{key}]"), unknown);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.items() else {
                return;
            };
            for (index, item) in items.iter_mut().enumerate() {
                embedded_object_meta(item, item_schema, &format!("{path}[{index}]"), unknown);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
