//! Field paths: the path elements of structured-merge-diff (`f:` field, `k:` list-map key,
//! `v:` set value, `i:` index), their total order, their `FieldsV1` key form and the
//! human-readable form conflicts print (`.spec.containers[name="app"].image`).

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

use super::error::go_number;

/// One step of a [`Path`].
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A field of an object (`f:name`).
    Field(String),
    /// A list-map element, by its key fields sorted by name (`k:{"name":"app"}`).
    Key(Vec<(String, Value)>),
    /// A set element, by value (`v:"x"`).
    Value(Value),
    /// An element of an atomic list, by index (`i:0`); rare in practice.
    Index(usize),
}

/// A path from the object root.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    pub fn new(elements: Vec<PathElement>) -> Self {
        Path(elements)
    }

    /// A path of field names, e.g. `Path::fields(&["spec", "replicas"])`.
    pub fn fields(names: &[&str]) -> Self {
        Path(
            names
                .iter()
                .map(|n| PathElement::Field((*n).to_string()))
                .collect(),
        )
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for element in &self.0 {
            write!(f, "{element}")?;
        }
        Ok(())
    }
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's `PathElement.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", smd_string(v)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", smd_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// structured-merge-diff's `value.ToString`.
fn smd_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(smd_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", smd_string(v)))
            .collect(),
    }
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The `FieldsV1` key: `f:name`, `k:{"a":1}`, `v:"x"`, `i:0`.
    pub fn to_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| {
                        let key = serde_json::to_string(k).unwrap_or_default();
                        format!("{key}:{}", compact_json(v))
                    })
                    .collect();
                format!("k:{{{}}}", parts.join(","))
            }
            PathElement::Value(v) => format!("v:{}", compact_json(v)),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key. `Ok(None)` is an element type this version does not know
    /// (upstream drops those); `Err` is a malformed key.
    pub fn from_key(key: &str) -> Result<Option<PathElement>, String> {
        let Some((kind, rest)) = key.split_once(':') else {
            return Err(format!("missing colon: {key}"));
        };
        match kind {
            "f" => Ok(Some(PathElement::Field(rest.to_string()))),
            "v" => serde_json::from_str(rest)
                .map(|v| Some(PathElement::Value(v)))
                .map_err(|e| e.to_string()),
            "k" => {
                let map: Map<String, Value> =
                    serde_json::from_str(rest).map_err(|e| e.to_string())?;
                let mut fields: Vec<(String, Value)> = map.into_iter().collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Some(PathElement::Key(fields)))
            }
            "i" => rest
                .parse::<usize>()
                .map(|i| Some(PathElement::Index(i)))
                .map_err(|e| e.to_string()),
            _ => Ok(None),
        }
    }
}

/// Compact JSON with object keys sorted, as Go's encoder writes maps.
pub(crate) fn compact_json(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    let key = serde_json::to_string(k).unwrap_or_default();
                    format!("{key}:{}", map.get(k).map(compact_json).unwrap_or_default())
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(compact_json).collect();
            format!("[{}]", parts.join(","))
        }
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PathElement {
    /// structured-merge-diff's order: fields, then keys, then values, then indexes.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((ka, va), (kb, vb)) in a.iter().zip(b.iter()) {
                    let c = ka.cmp(kb).then_with(|| value_cmp(va, vb));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => value_cmp(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// structured-merge-diff's total order over values: numbers (ints and floats compared
/// numerically), strings, booleans, lists, maps, null.
pub(crate) fn value_cmp(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let float = |n: &serde_json::Number| !(n.is_i64() || n.is_u64());
            if float(x) || float(y) {
                let (fx, fy) = (
                    x.as_f64().unwrap_or_default(),
                    y.as_f64().unwrap_or_default(),
                );
                fx.partial_cmp(&fy).unwrap_or(Ordering::Equal)
            } else if let (Some(ix), Some(iy)) = (x.as_i64(), y.as_i64()) {
                ix.cmp(&iy)
            } else {
                x.as_u64().cmp(&y.as_u64())
            }
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (vx, vy) in x.iter().zip(y.iter()) {
                let c = value_cmp(vx, vy);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut kx: Vec<&String> = x.keys().collect();
            let mut ky: Vec<&String> = y.keys().collect();
            kx.sort();
            ky.sort();
            for (a, b) in kx.iter().zip(ky.iter()) {
                let c = a
                    .cmp(b)
                    .then_with(|| value_cmp(&x[a.as_str()], &y[b.as_str()]));
                if c != Ordering::Equal {
                    return c;
                }
            }
            kx.len().cmp(&ky.len())
        }
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Value equality as structured-merge-diff has it (`1` equals `1.0`).
pub(crate) fn value_eq(a: &Value, b: &Value) -> bool {
    value_cmp(a, b) == Ordering::Equal
}
