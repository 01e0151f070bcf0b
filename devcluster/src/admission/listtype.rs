//! `x-kubernetes-list-type: set` and `map` uniqueness, as apiextensions-apiserver
//! `pkg/apiserver/schema/listtype/validation.go` checks it: every repeated item (set) or
//! repeated key (map) after its first occurrence is a `Duplicate value`.

use serde_json::{Map, Value, json};

use super::errors::FieldError;
use super::goformat::json_marshal;
use super::path::FieldPath;
use super::schema::{Schema, sorted_keys};

/// `ValidateListSetsAndMaps(nil, schema, object)`.
pub fn validate(schema: &Value, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Value::Object(map) = object {
        validate_object(&FieldPath::root(), Schema::new(schema), map, &mut errors);
    }
    errors
}

fn validate_object(
    path: &FieldPath,
    schema: Schema,
    map: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    if let Some(values) = schema.additional_properties_schema() {
        for key in sorted_keys(map) {
            validate_value(&path.key(key), values, &map[key.as_str()], errors);
        }
    }
    if schema.properties().is_some() {
        for key in sorted_keys(map) {
            if let Some(property) = schema.property(key) {
                validate_value(&path.child(key), property, &map[key.as_str()], errors);
            }
        }
    }
}

fn validate_value(path: &FieldPath, schema: Schema, value: &Value, errors: &mut Vec<FieldError>) {
    match value {
        Value::Array(items) => validate_array(path, schema, items, errors),
        Value::Object(map) => validate_object(path, schema, map, errors),
        _ => {}
    }
}

fn validate_array(path: &FieldPath, schema: Schema, items: &[Value], errors: &mut Vec<FieldError>) {
    match schema.list_type() {
        Some("set") => {
            for index in repeated(items.iter().map(Some)) {
                errors.push(FieldError::duplicate(
                    &path.index(index),
                    Some(items[index].clone()),
                ));
            }
        }
        Some("map") => validate_list_map(path, schema, items, errors),
        _ => {}
    }
    if let Some(item_schema) = schema.items() {
        for (index, item) in items.iter().enumerate() {
            validate_value(&path.index(index), item_schema, item, errors);
        }
    }
}

/// Go compares scalars as `interface{}` map keys (so `1` and `1.0` differ) and compounds by
/// their JSON encoding; `None` stands for an item without a key, equal only to another.
fn identity(value: Option<&Value>) -> String {
    match value {
        None => "unspecified".to_string(),
        Some(Value::Number(n)) if n.is_f64() => {
            format!("float:{}", json_marshal(&Value::Number(n.clone())))
        }
        Some(Value::Number(n)) => format!("int:{n}"),
        Some(Value::Array(_) | Value::Object(_)) => {
            format!("json:{}", json_marshal(value.unwrap_or(&Value::Null)))
        }
        Some(other) => format!("scalar:{}", json_marshal(other)),
    }
}

/// Indices of the second occurrence of every repeated value (`validateListSet`).
fn repeated<'v>(values: impl Iterator<Item = Option<&'v Value>>) -> Vec<usize> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut second = Vec::new();
    for (index, value) in values.enumerate() {
        let id = identity(value);
        match seen.iter_mut().find(|(known, _)| *known == id) {
            Some((_, times)) => {
                *times += 1;
                if *times == 2 {
                    second.push(index);
                }
            }
            None => seen.push((id, 1)),
        }
    }
    second
}

fn validate_list_map(
    path: &FieldPath,
    schema: Schema,
    items: &[Value],
    errors: &mut Vec<FieldError>,
) {
    for (index, item) in items.iter().enumerate() {
        if !item.is_null() && !item.is_object() {
            let detail = "must be an object for an array of list-type map";
            errors.push(FieldError::invalid(
                &path.index(index),
                item.clone(),
                detail,
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    let key_fields = schema.list_map_keys();
    if let [key_field] = key_fields.as_slice() {
        let keys: Vec<Option<&Value>> = items.iter().map(|item| item.get(key_field)).collect();
        for index in repeated(keys.iter().copied()) {
            let shown = match keys[index] {
                None => json!({}),
                Some(key) => json!({ *key_field: key }),
            };
            errors.push(FieldError::duplicate(&path.index(index), Some(shown)));
        }
        return;
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            for field in &key_fields {
                if let Some(value) = item.get(*field) {
                    key.insert((*field).to_string(), value.clone());
                }
            }
            Value::Object(key)
        })
        .collect();
    for index in repeated(keys.iter().map(Some)) {
        errors.push(FieldError::duplicate(
            &path.index(index),
            Some(keys[index].clone()),
        ));
    }
}
