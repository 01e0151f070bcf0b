//! Admission of every write: metadata checks all kinds share (names), unknown fields handled
//! per `fieldValidation` (Strict refuses, Warn warns, Ignore drops — the server's own default
//! is Warn), and for custom resources the CRD schema's defaults, structural validation and CEL
//! rules. Refusals carry the API server's wording: `400 strict decoding error` for unknown
//! fields, `422 Kind "name" is invalid: field: ...` for invalid values.

use serde_json::{Value, json};

use crate::admission;
use crate::catalog::{ResourceType, Schema};
use crate::meta::{NameRule, name_problems};
use crate::schemas;
use crate::status::{ApiError, ApiResult};

/// The `fieldValidation` query option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    pub fn parse(value: Option<&str>) -> ApiResult<Self> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}. Only Ignore, Warn, and Strict are supported"
            ))),
        }
    }
}

fn metadata_errors(t: &ResourceType, object: &Value) -> Vec<admission::FieldError> {
    let mut errors = Vec::new();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    for problem in name_problems(NameRule::for_kind(&t.group, &t.kind), name) {
        errors.push(admission::FieldError {
            kind: admission::ErrorKind::Invalid,
            field: "metadata.name".into(),
            value: Some(json!(name)),
            detail: problem,
        });
    }
    errors
}

fn refuse(t: &ResourceType, name: &str, errors: &[admission::FieldError]) -> ApiError {
    let status = admission::invalid_status(&t.kind, &t.group, name, errors);
    ApiError::invalid(
        &t.kind,
        &t.group,
        name,
        status["message"].as_str().unwrap_or("").to_string(),
        status["details"]["causes"].clone(),
    )
}

/// Check `object` (as written through `t`) before it is stored; `old` on updates. Returns the
/// warnings to send back.
pub fn admit(
    t: &ResourceType,
    object: &mut Value,
    old: Option<&Value>,
    validation: FieldValidation,
) -> ApiResult<Vec<String>> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let unknown = match &t.schema {
        Schema::Builtin(definition) => schemas::builtin().prune_unknown(definition, object),
        Schema::Custom(schema) => {
            let pruned = admission::prune(schema, object);
            admission::apply_defaults(schema, object);
            pruned
        }
    };
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        let listed: Vec<String> = unknown
            .iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect();
        match validation {
            FieldValidation::Strict => {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                    t.kind,
                    t.version,
                    t.kind,
                    listed.join(", ")
                )));
            }
            FieldValidation::Warn => warnings = listed,
            FieldValidation::Ignore => {}
        }
    }
    let mut errors = metadata_errors(t, object);
    if let Schema::Custom(schema) = &t.schema {
        errors.extend(admission::validate(schema, object, old));
    }
    if !errors.is_empty() {
        return Err(refuse(t, &name, &errors));
    }
    Ok(warnings)
}
