//! The errors a patch or apply request ends in, each shaped as the `Status` a kube-apiserver
//! answers with (code, reason, message, causes), plus Go `%v` formatting for the messages that
//! upstream builds with it.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

/// One `details.causes` entry of a `Status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// `reason` of the cause, e.g. `FieldManagerConflict` or `FieldValueRequired`.
    pub reason: String,
    pub message: String,
    /// `field`, e.g. `.spec.replicas` for conflicts or `fieldManager` for validation.
    pub field: String,
}

/// A failed patch or apply, as the API server reports it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// 400 `BadRequest`: a malformed patch body or directive.
    #[error("{0}")]
    BadRequest(String),
    /// 422 `Invalid` built like `errors.NewInvalid` (kind, group and name go to `details`).
    #[error("{message}")]
    Invalid {
        group: String,
        kind: String,
        name: String,
        message: String,
        causes: Vec<Cause>,
    },
    /// 422 `Invalid` built like `errors.NewGenericServerResponse(422, ...)`: upstream hides the
    /// cause behind a fixed message; `detail` says what went wrong, for logs only.
    #[error("the server rejected our request due to an error in our request")]
    Unprocessable { detail: String },
    /// 415 `UnsupportedMediaType`, e.g. a strategic merge patch sent to a custom resource.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 409 `Conflict`: server-side apply conflicts, one cause per field and manager.
    #[error("{message}")]
    Conflict { message: String, causes: Vec<Cause> },
    /// 413 `RequestEntityTooLarge`.
    #[error("Request entity too large: {0}")]
    RequestEntityTooLarge(String),
    /// 500 with an empty reason: upstream returns a plain Go error here.
    #[error("{0}")]
    Internal(String),
}

/// The patch types a custom resource accepts (CBOR apply is off by default in 1.35).
pub const CUSTOM_RESOURCE_PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

impl PatchError {
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) => 400,
            PatchError::Invalid { .. } | PatchError::Unprocessable { .. } => 422,
            PatchError::UnsupportedMediaType(_) => 415,
            PatchError::Conflict { .. } => 409,
            PatchError::RequestEntityTooLarge(_) => 413,
            PatchError::Internal(_) => 500,
        }
    }

    /// The `Status.reason`; empty for [`PatchError::Internal`] (upstream's `StatusReasonUnknown`).
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::Invalid { .. } | PatchError::Unprocessable { .. } => "Invalid",
            PatchError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            PatchError::Conflict { .. } => "Conflict",
            PatchError::RequestEntityTooLarge(_) => "RequestEntityTooLarge",
            PatchError::Internal(_) => "",
        }
    }

    /// The `details.causes` of the Status.
    pub fn causes(&self) -> &[Cause] {
        match self {
            PatchError::Invalid { causes, .. } | PatchError::Conflict { causes, .. } => causes,
            _ => &[],
        }
    }

    /// The answer for a strategic merge patch on a kind without Go types (custom resources).
    pub fn unsupported_patch_type(accepted: &[&str]) -> Self {
        PatchError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ))
    }

    /// The whole `Status` object the API server would write.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.status_code(),
        });
        let mut details = Map::new();
        if let PatchError::Invalid {
            group, kind, name, ..
        } = self
        {
            for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
                if !value.is_empty() {
                    details.insert(key.into(), Value::String(value.clone()));
                }
            }
        }
        let causes: Vec<Value> = self
            .causes()
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        if !causes.is_empty() {
            details.insert("causes".into(), Value::Array(causes));
        }
        if !details.is_empty() || matches!(self, PatchError::Conflict { .. }) {
            status["details"] = Value::Object(details);
        }
        if let (true, Some(map)) = (self.reason().is_empty(), status.as_object_mut()) {
            map.remove("reason");
        }
        status
    }
}

/// Go's `fmt` `%v` of a decoded JSON value (`map[a:1 b:[x y]]`, `<nil>`), as upstream error
/// messages print patch fragments.
pub(crate) fn go_fmt(value: &Value) -> String {
    let mut out = String::new();
    write_go(&mut out, value);
    out
}

fn write_go(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_go(out, v);
                }
            }
            out.push(']');
        }
    }
}

/// A number as Go prints an `int64` or a `float64` (`%v`, shortest form).
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    let exp = if f == 0.0 {
        0
    } else {
        f.abs().log10().floor() as i32
    };
    if !(-4..21).contains(&exp) {
        let s = format!("{f:e}");
        // Rust writes `1e21`, Go `1e+21`.
        match s.split_once('e') {
            Some((mantissa, e)) if !e.starts_with('-') => format!("{mantissa}e+{e:0>2}"),
            Some((mantissa, e)) => format!("{mantissa}e-{:0>2}", &e[1..]),
            None => s,
        }
    } else {
        format!("{f}")
    }
}

/// A Go-quoted string (`%q`), close enough for ASCII field values.
pub(crate) fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}
