//! JSON values as CEL sees them under a structural schema, after apiserver
//! `pkg/cel/common/valuesunstructured.go` (`UnstructuredToVal`) and the property-name
//! escaping of `pkg/cel/escaping.go`: objects expose only their declared, non-null properties
//! (resources and embedded resources also `apiVersion`, `kind`, `metadata.name` and
//! `metadata.generateName`), `number` is always a double, int-or-string is an int or a
//! string, and `duration`/`date`/`date-time`/`byte` strings become durations, timestamps and bytes.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value as CelValue;
use cel::objects::Key;
use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime};
use serde_json::Value;

use super::super::schema::Schema;

/// `self` (or `oldSelf`) for a value at a node of the schema.
pub fn to_cel(value: &Value, schema: Option<Schema>, resource: bool) -> CelValue {
    let Some(schema) = schema else {
        return dynamic(value);
    };
    if value.is_null() {
        return CelValue::Null;
    }
    if schema.int_or_string() {
        return match value {
            Value::Number(n) if n.as_i64().is_some() => CelValue::Int(n.as_i64().unwrap_or(0)),
            other => dynamic(other),
        };
    }
    match (schema.type_name(), value) {
        ("object", Value::Object(map)) => {
            object(map, schema, resource || schema.embedded_resource())
        }
        ("array", Value::Array(items)) => {
            let item_schema = schema.items();
            let embedded = item_schema.is_some_and(|s| s.embedded_resource());
            CelValue::List(Arc::new(
                items
                    .iter()
                    .map(|i| to_cel(i, item_schema, embedded))
                    .collect(),
            ))
        }
        ("string", Value::String(text)) => formatted_string(text, schema.format()),
        ("number", Value::Number(n)) => CelValue::Float(n.as_f64().unwrap_or(0.0)),
        ("integer", Value::Number(n)) if n.as_i64().is_some() => {
            CelValue::Int(n.as_i64().unwrap_or(0))
        }
        _ => dynamic(value),
    }
}

fn object(map: &serde_json::Map<String, Value>, schema: Schema, resource: bool) -> CelValue {
    let mut members: HashMap<Key, CelValue> = HashMap::new();
    if resource || schema.properties().is_some() {
        for (key, member) in map {
            if member.is_null() {
                continue; // null-valued properties read as absent
            }
            let converted = match (schema.property(key), key.as_str()) {
                (_, "apiVersion" | "kind") if resource => member
                    .as_str()
                    .map(|s| CelValue::String(Arc::new(s.to_string()))),
                (_, "metadata") if resource => Some(object_meta(member)),
                (Some(property), _) => {
                    Some(to_cel(member, Some(property), property.embedded_resource()))
                }
                (None, _) => None,
            };
            if let (Some(converted), Some(escaped)) = (converted, escape(key)) {
                members.insert(Key::String(Arc::new(escaped)), converted);
            }
        }
    } else if let Some(values) = schema.additional_properties_schema() {
        let embedded = values.embedded_resource();
        for (key, member) in map {
            members.insert(
                Key::String(Arc::new(key.clone())),
                to_cel(member, Some(values), embedded),
            );
        }
    }
    CelValue::Map(members.into())
}

/// `metadata` of a resource: only `name` and `generateName` are visible to rules.
fn object_meta(metadata: &Value) -> CelValue {
    let mut members: HashMap<Key, CelValue> = HashMap::new();
    for field in ["name", "generateName"] {
        if let Some(text) = metadata.get(field).and_then(Value::as_str) {
            members.insert(
                Key::String(Arc::new(field.to_string())),
                CelValue::String(Arc::new(text.to_string())),
            );
        }
    }
    CelValue::Map(members.into())
}

fn formatted_string(text: &str, format: &str) -> CelValue {
    let converted = match format {
        "duration" => super::duration::parse_go_duration(text)
            .ok()
            .map(|nanos| CelValue::Duration(chrono::Duration::nanoseconds(nanos))),
        "date" => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| CelValue::Timestamp(utc(t))),
        "date-time" => DateTime::parse_from_rfc3339(text)
            .ok()
            .or_else(|| {
                NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
                    .ok()
                    .map(utc)
            })
            .map(|t| CelValue::Timestamp(super::time::in_utc(t))),
        "byte" => decode_base64(text).map(|bytes| CelValue::Bytes(Arc::new(bytes))),
        _ => None,
    };
    converted.unwrap_or_else(|| CelValue::String(Arc::new(text.to_string())))
}

fn utc(time: NaiveDateTime) -> DateTime<FixedOffset> {
    time.and_utc().fixed_offset()
}

/// Standard base64 with padding, as `strfmt.Base64` decodes it.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let sextet = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let padding = chunk.iter().rev().take_while(|b| **b == b'=').count();
        if padding > 2 {
            return None;
        }
        let mut word = 0u32;
        for &b in &chunk[..4 - padding] {
            word = (word << 6) | sextet(b)?;
        }
        word <<= 6 * padding as u32;
        let decoded = [(word >> 16) as u8, (word >> 8) as u8, word as u8];
        out.extend_from_slice(&decoded[..3 - padding]);
    }
    Some(out)
}

/// Any JSON value without schema guidance (`x-kubernetes-preserve-unknown-fields` data).
pub fn dynamic(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => CelValue::Int(i),
            (None, Some(u)) => CelValue::UInt(u),
            _ => CelValue::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(dynamic).collect())),
        Value::Object(map) => {
            let members: HashMap<Key, CelValue> = map
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), dynamic(v)))
                .collect();
            CelValue::Map(members.into())
        }
    }
}

const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// `cel.Escape`: the name a property has in CEL (`x-y` is `x__dash__y`), or `None` when it
/// cannot be accessed at all.
pub fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}
