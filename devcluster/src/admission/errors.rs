//! Field errors and the 422 answer built from them, as `field.Error.Error()`
//! (apimachinery `pkg/util/validation/field/errors.go`) and `errors.NewInvalid`
//! (apimachinery `pkg/api/errors/errors.go`) render them in Kubernetes 1.35.

use std::fmt;

use serde_json::{Value, json};

use super::goformat::{json_marshal, quote};
use super::path::FieldPath;

/// `field.ErrorType` (the set Kubernetes 1.35 has): what kind of problem a [`FieldError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl ErrorKind {
    /// The `metav1.CauseType` (the `reason` of a status cause).
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// `ErrorType.String()`.
    pub fn label(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }

    /// Kinds whose message never shows the bad value.
    fn hides_value(self) -> bool {
        matches!(
            self,
            Self::Required | Self::Forbidden | Self::TooLong | Self::Internal
        )
    }
}

/// One field error, formatted exactly like `field.Error.Error()`.
///
/// `value` is the Go `BadValue`: `None` is `field.OmitValueType{}` (no value shown),
/// `Some(Value::Null)` is a Go `nil` (shown as `null`).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub kind: ErrorKind,
    pub field: String,
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    pub fn new(kind: ErrorKind, path: &FieldPath, value: Option<Value>, detail: &str) -> Self {
        Self {
            kind,
            field: path.to_string(),
            value,
            detail: detail.to_string(),
        }
    }

    /// `field.Invalid`.
    pub fn invalid(path: &FieldPath, value: Value, detail: &str) -> Self {
        Self::new(ErrorKind::Invalid, path, Some(value), detail)
    }

    /// `field.Required`.
    pub fn required(path: &FieldPath, detail: &str) -> Self {
        Self::new(ErrorKind::Required, path, Some(json!("")), detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(path: &FieldPath, detail: &str) -> Self {
        Self::new(ErrorKind::Forbidden, path, Some(json!("")), detail)
    }

    /// `field.Duplicate`.
    pub fn duplicate(path: &FieldPath, value: Option<Value>) -> Self {
        Self::new(ErrorKind::Duplicate, path, value, "")
    }

    /// `field.TypeInvalid`.
    pub fn type_invalid(path: &FieldPath, value: Value, detail: &str) -> Self {
        Self::new(ErrorKind::TypeInvalid, path, Some(value), detail)
    }

    /// `field.NotSupported`: `supported values: "a", "b"`.
    pub fn not_supported(path: &FieldPath, value: Value, supported: &[String]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|v| quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorKind::NotSupported, path, Some(value), &detail)
    }

    /// `field.TooLong`: `may not be more than 32 bytes`.
    pub fn too_long(path: &FieldPath, max_length: i64) -> Self {
        let detail = match max_length {
            1 => "may not be more than 1 byte".to_string(),
            n if n >= 0 => format!("may not be more than {n} bytes"),
            _ => "value is too long".to_string(),
        };
        Self::new(
            ErrorKind::TooLong,
            path,
            Some(json!("<value omitted>")),
            &detail,
        )
    }

    /// `field.TooMany`: `must have at most 16 items`.
    pub fn too_many(path: &FieldPath, actual: i64, max: i64) -> Self {
        let detail = match max {
            1 => "must have at most 1 item".to_string(),
            n if n >= 0 => format!("must have at most {n} items"),
            _ => "has too many items".to_string(),
        };
        let value = (actual >= 0).then(|| json!(actual));
        Self::new(ErrorKind::TooMany, path, value, &detail)
    }

    /// `field.InternalError`.
    pub fn internal(path: &FieldPath, detail: &str) -> Self {
        Self::new(ErrorKind::Internal, path, Some(json!(detail)), detail)
    }

    /// The `metav1.CauseType` of this error: `FieldValueInvalid`, `FieldValueRequired`, ...
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// `field.Error.ErrorBody()`: the message without the field, as in a status cause.
    pub fn error_body(&self) -> String {
        let mut body = self.kind.label().to_string();
        if !self.kind.hides_value()
            && let Some(value) = &self.value
        {
            body.push_str(": ");
            body.push_str(&render_bad_value(value));
        }
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

/// How `ErrorBody` prints a bad value: strings `%q`, scalars `%v`, the rest as JSON.
fn render_bad_value(value: &Value) -> String {
    match value {
        Value::String(s) => quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => super::goformat::float_v(n.as_f64().unwrap_or(0.0)),
        Value::Number(n) => n.to_string(),
        other => json_marshal(other),
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.error_body())
    }
}

impl std::error::Error for FieldError {}

/// `schema.GroupKind.String()`: `BackendPool.rollcall.dev`, or just the kind for the core group.
fn group_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// The message of the API server's 422 answer, as `errors.NewInvalid` builds it: one error
/// bare, several as `[err1, err2]`, identical messages once.
pub fn invalid_message(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> String {
    let prefix = format!("{} {} is invalid", group_kind(kind, group), quote(name));
    let mut seen: Vec<String> = Vec::new();
    for error in errors {
        let message = error.to_string();
        if !seen.contains(&message) {
            seen.push(message);
        }
    }
    match seen.len() {
        0 => prefix,
        1 => format!("{prefix}: {}", seen[0]),
        _ => format!("{prefix}: [{}]", seen.join(", ")),
    }
}

/// The whole `metav1.Status` of the 422 answer, causes included (one per error, as upstream).
pub fn invalid_status(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Value {
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.reason(), "message": e.error_body(), "field": e.field}))
        .collect();
    let mut details = json!({"name": name, "kind": kind, "causes": causes});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": invalid_message(kind, group, name, errors),
        "reason": "Invalid",
        "details": details,
        "code": 422,
    })
}

#[cfg(test)]
mod tests;
