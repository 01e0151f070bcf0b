//! Temporary stand-in for structural-schema and CEL admission (being written separately).
#![allow(dead_code)]
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Invalid,
    Required,
    NotSupported,
    Duplicate,
    TooLong,
    TooMany,
    Forbidden,
    TypeInvalid,
}

#[derive(Clone, Debug)]
pub struct FieldError {
    pub kind: ErrorKind,
    pub field: String,
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    pub fn reason(&self) -> &'static str {
        "FieldValueInvalid"
    }
}
impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: Invalid value: {}", self.field, self.detail)
    }
}
pub fn apply_defaults(_schema: &Value, _object: &mut Value) {}
pub fn prune(_schema: &Value, _object: &mut Value) -> Vec<String> {
    Vec::new()
}
pub fn validate(_schema: &Value, _object: &Value, _old: Option<&Value>) -> Vec<FieldError> {
    Vec::new()
}
pub fn invalid_message(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> String {
    let _ = group;
    let joined: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    if joined.len() == 1 {
        format!("{kind} \"{name}\" is invalid: {}", joined[0])
    } else {
        format!("{kind} \"{name}\" is invalid: [{}]", joined.join(", "))
    }
}
