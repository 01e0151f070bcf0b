//! Structural defaulting, as apiextensions-apiserver `pkg/apiserver/schema/defaulting/algorithm.go`
//! applies it when an object is read from a request or from storage.

use serde_json::Value;

use super::schema::Schema;

/// Apply the schema's `default`s to `object`.
///
/// A property gets its default when it is absent, or when it is `null` and not `nullable`.
/// Defaults inside an object apply only when that object exists (or was itself just defaulted);
/// array items and `additionalProperties` values that are a non-nullable `null` take the
/// item/value schema's default, and every item and value is defaulted recursively.
pub fn apply_defaults(schema: &Value, object: &mut Value) {
    default_node(Some(Schema::new(schema)), object);
}

fn is_non_nullable_null(value: &Value, schema: Option<Schema>) -> bool {
    value.is_null() && schema.is_some_and(|s| !s.nullable())
}

/// `default: null` counts as no default, as a nil `Default.Object` does upstream.
fn default_of(schema: Schema<'_>) -> Option<&Value> {
    schema.default_value().filter(|d| !d.is_null())
}

fn default_node(schema: Option<Schema>, value: &mut Value) {
    let Some(schema) = schema else { return };
    match value {
        Value::Object(map) => {
            for name in schema.property_names() {
                let Some(property) = schema.property(name) else {
                    continue;
                };
                let Some(default) = default_of(property) else {
                    continue;
                };
                let missing = map
                    .get(name)
                    .is_none_or(|v| is_non_nullable_null(v, Some(property)));
                if missing {
                    map.insert(name.to_string(), default.clone());
                }
            }
            let member_schema = schema.additional_properties_schema();
            for (key, member) in map.iter_mut() {
                if let Some(property) = schema.property(key) {
                    default_node(Some(property), member);
                } else if let Some(values) = member_schema {
                    if is_non_nullable_null(member, Some(values))
                        && let Some(default) = default_of(values)
                    {
                        *member = default.clone();
                    }
                    default_node(Some(values), member);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = schema.items();
            for item in items.iter_mut() {
                if is_non_nullable_null(item, item_schema)
                    && let Some(default) = item_schema.and_then(default_of)
                {
                    *item = default.clone();
                }
                default_node(item_schema, item);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
