//! Server-side printing: `meta.k8s.io/v1` `Table` answers for `kubectl get`, built from a
//! type's printer columns the way the API server builds them (a CRD's
//! `additionalPrinterColumns` evaluated as Kubernetes JSONPath, `date` cells as ages, missing
//! values as null), with each row carrying the object's metadata or the object itself.

use jsonpath_rust::JsonPath;
use serde_json::{Value, json};

use crate::catalog::{CellSource, Column, ResourceType};

/// `includeObject`: what each row carries besides its cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// How long ago an RFC 3339 time was, as `kubectl get` prints ages (apimachinery's
/// `HumanDuration`: `45s`, `3m20s`, `12m`, `5h10m`, `3d4h`, `2y30d`).
pub fn human_age(rfc3339: &str) -> String {
    let Ok(then) = rfc3339.parse::<k8s_openapi::jiff::Timestamp>() else {
        return "<invalid>".into();
    };
    human_duration(crate::meta::now_unix() - then.as_second())
}

pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let years = hours / 24 / 365;
        return match (hours / 24) % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The `Age` cell of any object.
pub fn age_of(object: &Value) -> Value {
    match object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
    {
        Some(t) => json!(human_age(t)),
        None => json!("<unknown>"),
    }
}

/// The first value a Kubernetes JSONPath (`.status.x`, `.items[?(@.type=="A")].status`) finds.
pub fn first_match<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let trimmed = path.trim().trim_start_matches('{').trim_end_matches('}');
    let query = format!("${}", trimmed.trim_start_matches('$'));
    object.query(&query).ok()?.into_iter().next()
}

/// A cell as apiextensions' table convertor makes it for a column of `type_`.
fn typed_cell(type_: &str, value: &Value) -> Value {
    match (type_, value) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(s)) => json!(s),
        ("string", Value::Number(_) | Value::Bool(_)) => json!(value.to_string()),
        ("string", other) => json!(other.to_string()),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(s)) => json!(human_age(s)),
        _ => Value::Null,
    }
}

fn cell(column: &Column, object: &Value) -> Value {
    match &column.source {
        CellSource::Builtin(f) => f(object),
        CellSource::Path(path) => {
            first_match(object, path).map_or(Value::Null, |v| typed_cell(&column.type_, v))
        }
    }
}

fn definitions(t: &ResourceType) -> Value {
    Value::Array(
        t.columns
            .iter()
            .map(|c| {
                let description = if c.description.is_empty() && c.name == "Name" {
                    "Name must be unique within a namespace.".to_string()
                } else {
                    c.description.clone()
                };
                json!({"name": c.name, "type": c.type_, "format": c.format,
                       "description": description, "priority": c.priority})
            })
            .collect(),
    )
}

fn row(t: &ResourceType, object: &Value, include: IncludeObject) -> Value {
    let cells: Vec<Value> = t.columns.iter().map(|c| cell(c, object)).collect();
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = object.clone(),
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
            })
        }
    }
    row
}

/// A `Table` of `objects`; `list_meta` is the list's metadata (resourceVersion, continue).
pub fn table(
    t: &ResourceType,
    objects: &[&Value],
    list_meta: Value,
    include: IncludeObject,
    no_headers: bool,
) -> Value {
    let mut table = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "rows": objects.iter().map(|o| row(t, o, include)).collect::<Vec<_>>(),
    });
    if !no_headers {
        table["columnDefinitions"] = definitions(t);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_print_like_kubectl() {
        for (seconds, text) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (9 * 86400, "9d"),
            (3 * 365 * 86400 + 10 * 86400, "3y10d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human_duration(seconds), text, "{seconds}s");
        }
    }

    #[test]
    fn kubernetes_jsonpath_filters_find_condition_status() {
        let pool = json!({"status": {"endpoints": {"healthy": 3},
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Panic", "status": "False"}]}});
        assert_eq!(
            first_match(&pool, ".status.conditions[?(@.type==\"Panic\")].status"),
            Some(&json!("False"))
        );
        assert_eq!(
            first_match(&pool, ".status.endpoints.healthy"),
            Some(&json!(3))
        );
        assert_eq!(first_match(&pool, ".status.endpoints.ejected"), None);
        assert_eq!(typed_cell("integer", &json!(3.0)), json!(3));
        assert_eq!(typed_cell("string", &json!(3)), json!("3"));
        assert_eq!(typed_cell("integer", &json!("x")), Value::Null);
    }
}
