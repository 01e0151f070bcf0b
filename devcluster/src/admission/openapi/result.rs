//! kube-openapi's validation result (`pkg/validation/validate/result.go`, errors of
//! `pkg/validation/errors/schema.go`) and its conversion to field errors
//! (`kubeOpenAPIResultToFieldErrors` in apiextensions-apiserver `pkg/apiserver/validation/validation.go`).

use serde_json::{Value, json};

use super::super::errors::FieldError;
use super::super::goformat::json_marshal;
use super::super::path::FieldPath;

/// The `errors.Validation` codes the validators produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    InvalidType,
    Required,
    TooLong,
    TooShort,
    Pattern,
    Enum,
    MultipleOf,
    Maximum,
    Minimum,
    Unique,
    MaxItems,
    MinItems,
    TooFewProperties,
    TooManyProperties,
    UnallowedProperty,
    MultipleOfMustBePositive,
}

/// One kube-openapi error.
#[derive(Clone, Debug)]
pub enum Issue {
    /// An `*errors.Validation`: `name` is the kube-openapi path, `value` Go's `Value`.
    Validation {
        code: Code,
        name: String,
        value: Option<Value>,
        /// `Valid` (the limit) for length and count errors.
        limit: Option<i64>,
        /// `Values` of an enum failure.
        allowed: Vec<Value>,
        message: String,
    },
    /// Any other error (composite `anyOf`/`oneOf`/`allOf`/`not` failures, range checks).
    Other(String),
}

impl Issue {
    pub fn new(code: Code, name: &str, value: Option<Value>, message: String) -> Self {
        Issue::Validation {
            code,
            name: name.to_string(),
            value,
            limit: None,
            allowed: Vec::new(),
            message,
        }
    }

    pub fn with_limit(mut self, valid: i64) -> Self {
        if let Issue::Validation { limit, .. } = &mut self {
            *limit = Some(valid);
        }
        self
    }

    pub fn message(&self) -> &str {
        match self {
            Issue::Validation { message, .. } | Issue::Other(message) => message,
        }
    }
}

/// `validate.Result`: errors (deduplicated by message, as `AddErrors` does) and the match
/// count `anyOf`/`oneOf` use to pick the "best" failing branch.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub errors: Vec<Issue>,
    pub match_count: usize,
}

impl Outcome {
    pub fn failed(issue: Issue) -> Self {
        let mut outcome = Outcome::default();
        outcome.add(issue);
        outcome
    }

    pub fn add(&mut self, issue: Issue) {
        if !self.errors.iter().any(|e| e.message() == issue.message()) {
            self.errors.push(issue);
        }
    }

    pub fn merge(&mut self, other: Outcome) {
        for issue in other.errors {
            self.add(issue);
        }
        self.match_count += other.match_count;
    }

    pub fn inc(&mut self) {
        self.match_count += 1;
    }

    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// `kubeOpenAPIResultToFieldErrors(nil, result)`.
pub fn to_field_errors(outcome: Outcome) -> Vec<FieldError> {
    outcome.errors.into_iter().map(to_field_error).collect()
}

fn to_field_error(issue: Issue) -> FieldError {
    let (code, name, value, limit, allowed, message) = match issue {
        Issue::Other(message) => {
            return FieldError::invalid(&FieldPath::root(), json!(""), &message);
        }
        Issue::Validation {
            code,
            name,
            value,
            limit,
            allowed,
            message,
        } => (code, name, value, limit, allowed, message),
    };
    let path = if name.is_empty() || name == "." {
        FieldPath::root()
    } else {
        FieldPath::root().child(name.strip_prefix('.').unwrap_or(&name))
    };
    let count = |v: &Option<Value>| v.as_ref().and_then(Value::as_i64).unwrap_or(-1);
    match code {
        Code::Required => FieldError::required(&path, ""),
        Code::Enum => {
            let supported: Vec<String> = allowed
                .iter()
                .map(|v| v.as_str().map_or_else(|| json_marshal(v), str::to_string))
                .collect();
            FieldError::not_supported(&path, value.unwrap_or(Value::Null), &supported)
        }
        Code::TooLong => FieldError::too_long(&path, limit.unwrap_or(-1)),
        Code::MaxItems | Code::TooManyProperties => {
            FieldError::too_many(&path, count(&value), limit.unwrap_or(-1))
        }
        Code::InvalidType => FieldError::type_invalid(&path, value.unwrap_or(json!("")), &message),
        _ => FieldError::invalid(&path, value.unwrap_or(json!("")), &message),
    }
}
