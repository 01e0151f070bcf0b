//! RFC 6902 JSON Patch and RFC 7386 merge patch with the API server's answers: the body checks
//! and status codes of `handlers/patch.go`, and the semantics of the `evanphx/json-patch` v4
//! library it uses where they differ from the RFCs (`replace` of a missing object key adds it,
//! negative array indexes, `add` without a value adds null, nulls inside arrays are pruned).

use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use serde_json::{Map, Value};

use super::error::PatchError;

const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

fn parse_body(patch: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(patch).map_err(|_| PatchError::BadRequest("invalid JSON patch".into()))
}

fn unprocessable(detail: impl Into<String>) -> PatchError {
    PatchError::Unprocessable {
        detail: detail.into(),
    }
}

/// The 422 upstream answers when the patched document does not decode as an object.
fn not_an_object(result: &Value) -> PatchError {
    PatchError::Invalid {
        group: String::new(),
        kind: String::new(),
        name: String::new(),
        message: format!(
            " \"\" is invalid: patch: Invalid value: {}: couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
            serde_json::to_string(&result.to_string()).unwrap_or_default(),
            if result.is_array() { "array" } else { "string" },
        ),
        causes: vec![super::error::Cause {
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: the patched document is not an object".into(),
            field: "patch".into(),
        }],
    }
}

/// Applies an RFC 6902 JSON Patch (`application/json-patch+json`) to `object`.
pub fn json_patch(object: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let body = parse_body(patch)?;
    let Value::Array(ops) = body else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            go_json_kind(&body)
        )));
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object()) {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            go_json_kind(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::RequestEntityTooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let mut doc = object.clone();
    for op in ops.iter().filter_map(Value::as_object) {
        apply_operation(&mut doc, op)?;
    }
    if !doc.is_object() {
        return Err(not_an_object(&doc));
    }
    Ok(doc)
}

fn go_json_kind(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

fn apply_operation(doc: &mut Value, op: &Map<String, Value>) -> Result<(), PatchError> {
    let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
    if !matches!(
        kind,
        "add" | "remove" | "replace" | "move" | "copy" | "test"
    ) {
        return Err(unprocessable(format!("Unexpected kind: {kind}")));
    }
    let path = match op.get("path").and_then(Value::as_str) {
        Some(p) => normalize_index(doc, p),
        None => {
            return Err(unprocessable(format!(
                "{kind} operation failed to decode path: missing value"
            )));
        }
    };
    let value = op.get("value").cloned().unwrap_or(Value::Null);
    let mut normalized = Map::new();
    normalized.insert("op".into(), Value::String(kind.into()));
    normalized.insert("path".into(), Value::String(path.clone()));
    match kind {
        "add" | "replace" | "test" => {
            normalized.insert("value".into(), value.clone());
        }
        "move" | "copy" => {
            let from = op.get("from").and_then(Value::as_str).ok_or_else(|| {
                unprocessable(format!(
                    "{kind} operation failed to decode from: missing value"
                ))
            })?;
            normalized.insert("from".into(), Value::String(normalize_index(doc, from)));
        }
        _ => {}
    }
    let parsed: PatchOperation = serde_json::from_value(Value::Object(normalized))
        .map_err(|e| unprocessable(e.to_string()))?;
    let parsed = match parsed {
        // evanphx v4: replacing a missing key of an object sets it.
        PatchOperation::Replace(ReplaceOperation { path, value })
            if missing_object_key(doc, path.as_str()) =>
        {
            PatchOperation::Add(AddOperation { path, value })
        }
        // evanphx v4: testing a missing key for null passes.
        PatchOperation::Test(t)
            if t.value.is_null() && missing_object_key(doc, t.path.as_str()) =>
        {
            return Ok(());
        }
        other => other,
    };
    json_patch::patch(doc, std::slice::from_ref(&parsed))
        .map_err(|e| unprocessable(format!("{kind} operation does not apply: {e}")))
}

/// Whether `pointer` names an absent key of an existing object.
fn missing_object_key(doc: &Value, pointer: &str) -> bool {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return false;
    };
    match doc.pointer(parent) {
        Some(Value::Object(map)) => !map.contains_key(&key.replace("~1", "/").replace("~0", "~")),
        _ => false,
    }
}

/// Rewrites a negative last index (evanphx v4 counts it from the end) to a plain one.
fn normalize_index(doc: &Value, pointer: &str) -> String {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return pointer.to_string();
    };
    let (Ok(index), Some(Value::Array(items))) = (last.parse::<i64>(), doc.pointer(parent)) else {
        return pointer.to_string();
    };
    if index >= 0 {
        return pointer.to_string();
    }
    let resolved = items.len() as i64 + index;
    if resolved < 0 {
        return pointer.to_string();
    }
    format!("{parent}/{resolved}")
}

/// Applies an RFC 7386 merge patch (`application/merge-patch+json`) to `object`.
pub fn merge_patch(object: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let mut body = parse_body(patch)?;
    match &body {
        Value::Object(_) => {
            prune_nulls_in_arrays(&mut body);
            let mut doc = object.clone();
            json_patch::merge(&mut doc, &body);
            Ok(doc)
        }
        Value::Array(_) => {
            prune_nulls_in_arrays(&mut body);
            Err(not_an_object(&body))
        }
        _ => Err(PatchError::BadRequest("Invalid JSON Patch".into())),
    }
}

/// evanphx prunes null-valued keys of objects inside arrays a merge patch sets.
fn prune_nulls_in_arrays(value: &mut Value) {
    match value {
        Value::Object(map) => map.values_mut().for_each(prune_nulls_in_arrays),
        Value::Array(items) => items.iter_mut().for_each(prune_object_nulls),
        _ => {}
    }
}

fn prune_object_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(prune_object_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_object_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
