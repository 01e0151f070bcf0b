//! Server-side application of a strategic merge patch (apimachinery `strategicpatch`, with
//! `MergeParallelList` and `IgnoreUnmatchedNulls` as the API server sets them): maps merge with
//! `null` deleting, `$patch: replace|delete`, `$retainKeys`, `$setElementOrder/<field>` and
//! `$deleteFromPrimitiveList/<field>`, and lists merge by the schema's patch strategy and key.

use serde_json::{Map, Value};

use super::error::{PatchError, go_fmt};
use super::schema::Schema;
use super::strategic_list::{
    bad_arg_type, merge_slice_handler, normalize_element_order, partition_maps,
    partition_primitives, remove_directives, slice_element_type, validate_set_order,
};

pub(crate) const DIRECTIVE: &str = "$patch";
pub(crate) const RETAIN_KEYS: &str = "$retainKeys";
pub(crate) const SET_ELEMENT_ORDER: &str = "$setElementOrder";
pub(crate) const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Why a strategic merge patch failed, by upstream's sentinel errors.
#[derive(Debug)]
pub(crate) enum SmpError {
    NoListOfLists,
    BadPatchFormatForPrimitiveList,
    BadPatchFormatForRetainKeys,
    BadPatchFormatForSetElementOrderList,
    /// Any other error: upstream returns it unwrapped, so it reaches the client as a 500.
    Other(String),
}

impl From<SmpError> for PatchError {
    fn from(e: SmpError) -> Self {
        match e {
            SmpError::NoListOfLists => PatchError::Unprocessable {
                detail: "lists of lists are not supported".into(),
            },
            SmpError::BadPatchFormatForPrimitiveList => {
                PatchError::BadRequest("invalid patch format of primitive list".into())
            }
            SmpError::BadPatchFormatForRetainKeys => {
                PatchError::BadRequest("invalid patch format of retainKeys".into())
            }
            SmpError::BadPatchFormatForSetElementOrderList => {
                PatchError::BadRequest("invalid patch format of setElementOrder list".into())
            }
            SmpError::Other(message) => PatchError::Internal(message),
        }
    }
}

pub(crate) type SmpResult<T> = Result<T, SmpError>;

/// Applies a strategic merge patch to `object` with the patch strategies and merge keys of
/// `schema` (a built-in kind's; custom resources answer 415, see
/// [`PatchError::unsupported_patch_type`]).
pub fn strategic_merge_patch(
    object: &Value,
    patch: &[u8],
    schema: Schema,
) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(patch)
        .map_err(|_| PatchError::BadRequest("invalid JSON patch".into()))?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&patch)
        )));
    };
    let original = object.as_object().cloned().unwrap_or_default();
    let merged = merge_map(original, patch, Meta(Some(schema)))?;
    Ok(Value::Object(merged))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// Patch metadata lookups (upstream `LookupPatchMeta`); `None` is a schema-less subtree.
#[derive(Clone, Copy)]
pub(crate) struct Meta<'a>(pub Option<Schema<'a>>);

/// A field's patch strategy and merge key.
pub(crate) struct FieldMeta<'a> {
    pub sub: Meta<'a>,
    pub strategy: String,
    pub merge_key: String,
}

impl<'a> Meta<'a> {
    fn lookup_struct(&self, key: &str) -> SmpResult<FieldMeta<'a>> {
        let lenient = FieldMeta {
            sub: Meta(None),
            strategy: String::new(),
            merge_key: String::new(),
        };
        let Some(schema) = self.0 else {
            return Ok(lenient);
        };
        let Some(map) = schema.atom().map else {
            return Err(SmpError::Other(format!(
                "merging an object in json but data type is not map or struct, instead is: {}",
                if schema.atom().list.is_some() {
                    "slice"
                } else {
                    "string"
                }
            )));
        };
        let has_properties = schema
            .resolved()
            .and_then(|n| n.get("properties"))
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if let Some(field) = map.field(key) {
            let strategies = field.patch_strategies();
            return Ok(FieldMeta {
                sub: Meta(Some(field)),
                strategy: other_strategy(&strategies)?,
                merge_key: field.patch_merge_key().unwrap_or_default().to_string(),
            });
        }
        match schema.additional_properties() {
            Some(element) if !has_properties => Ok(FieldMeta {
                sub: Meta(Some(element)),
                ..lenient
            }),
            _ if schema.preserves_unknown_fields() => Ok(lenient),
            _ => Err(SmpError::Other(format!(
                "unable to find api field in struct {} for the json field {:?}",
                schema.struct_name(),
                key
            ))),
        }
    }

    pub(crate) fn lookup_slice(&self, key: &str) -> SmpResult<FieldMeta<'a>> {
        let field = self.lookup_struct(key)?;
        let sub = match field.sub.0 {
            None => Meta(None),
            Some(s) => match s.atom().list {
                Some((_, element)) => Meta(Some(element)),
                None => {
                    return Err(SmpError::Other(
                        "expected slice or array type, but got: struct".to_string(),
                    ));
                }
            },
        };
        Ok(FieldMeta { sub, ..field })
    }

    pub(crate) fn name(&self) -> &'static str {
        match self.0 {
            Some(s) if s.atom().map.is_some() && s.has_definitions() => "struct",
            Some(_) => "map",
            None => "interface",
        }
    }
}

/// The strategy besides `retainKeys` (upstream `extractRetainKeysPatchStrategy`).
fn other_strategy(strategies: &[&str]) -> SmpResult<String> {
    match strategies {
        [] => Ok(String::new()),
        ["retainKeys"] => Ok(String::new()),
        [one] => Ok((*one).to_string()),
        ["retainKeys", other] | [other, "retainKeys"] => Ok((*other).to_string()),
        _ => Err(SmpError::Other(format!(
            "unexpected patch strategy: [{}]",
            strategies.join(" ")
        ))),
    }
}

/// Upstream `mergeMap`.
pub(crate) fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    meta: Meta,
) -> SmpResult<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(SmpError::Other(format!(
                "unknown patch type: {} in map: {}",
                go_fmt(directive),
                go_fmt(&Value::Object(patch.clone()))
            ))),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_set_element_order(&mut original, &mut patch, meta)?;
    for (key, patch_value) in patch {
        let (key, is_delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(_) => (extract_key(&key, DELETE_FROM_PRIMITIVE_LIST)?, true),
            None => (key, false),
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(slot) = original.get_mut(&key) else {
            if !is_delete_list {
                let mut value = patch_value;
                discard_nulls(&mut value);
                if let Some(v) = remove_directives(value) {
                    original.insert(key, v);
                }
            }
            continue;
        };
        let current = std::mem::take(slot);
        let merged = match (current, patch_value) {
            (Value::Object(current), Value::Object(p)) => {
                let field = meta.lookup_struct(&key)?;
                if field.strategy == "replace" {
                    Some(Value::Object(p))
                } else {
                    Some(Value::Object(merge_map(current, p, field.sub)?))
                }
            }
            (Value::Array(current), Value::Array(p)) => {
                let field = meta.lookup_slice(&key)?;
                Some(Value::Array(merge_slice_handler(
                    current,
                    p,
                    &field,
                    is_delete_list,
                )?))
            }
            (current, mut p) => {
                if go_type(&current) != go_type(&p) {
                    if is_delete_list {
                        *slot = current;
                        continue;
                    }
                    discard_nulls(&mut p);
                }
                remove_directives(p)
            }
        };
        match merged {
            Some(v) => *slot = v,
            None => {
                original.remove(&key);
            }
        }
    }
    Ok(original)
}

/// Go's dynamic type of a decoded JSON value, for upstream's type comparisons.
pub(crate) fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "nil",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// `$deleteFromPrimitiveList/<key>` and `$setElementOrder/<key>` name `<key>`.
fn extract_key(s: &str, prefix: &str) -> SmpResult<String> {
    match s.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest.to_string()),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST => Err(SmpError::BadPatchFormatForPrimitiveList),
        _ => Err(SmpError::BadPatchFormatForSetElementOrderList),
    }
}

/// `$retainKeys`: keys of the original not listed go; the patch may only set listed keys.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> SmpResult<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(SmpError::BadPatchFormatForRetainKeys);
    };
    let listed = |k: &str| retain.iter().any(|r| r.as_str() == Some(k));
    for (key, value) in patch.iter() {
        if value.is_null()
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !listed(key) {
            return Err(SmpError::BadPatchFormatForRetainKeys);
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// `$setElementOrder/<key>`: merges `<key>` and orders the result like the directive's list,
/// with server-only items kept at their relative positions (upstream `mergePatchIntoOriginal`).
fn merge_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    meta: Meta,
) -> SmpResult<()> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive in directives {
        let Some(order) = patch.remove(&directive) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type("[]interface {}", &order));
        };
        let key = extract_key(&directive, SET_ELEMENT_ORDER)?;
        let original_list = match original.get(&key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
        };
        let patch_list = match patch.get(&key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
        };
        let field = meta.lookup_slice(&key)?;
        validate_set_order(
            patch_list.as_deref().unwrap_or_default(),
            &order,
            &field.merge_key,
        )?;
        let merged = match (&original_list, &patch_list) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                Some(Value::Array(items)) => items,
                _ => continue,
            },
            (Some(o), Some(p)) => merge_slice_handler(o.clone(), p.clone(), &field, false)?,
            (None, None) => continue,
        };
        let (in_order, server_only) = if field.merge_key.is_empty() {
            partition_primitives(&merged, &order)
        } else {
            partition_maps(&merged, &order, &field.merge_key)?
        };
        let server_order = original_list.unwrap_or_default();
        let is_map =
            slice_element_type(&[&server_order, patch_list.as_deref().unwrap_or_default()])?;
        let sorted = normalize_element_order(
            in_order,
            server_only,
            &order,
            &server_order,
            &field.merge_key,
            is_map,
        )?;
        original.insert(key.clone(), Value::Array(sorted));
        patch.remove(&key);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
