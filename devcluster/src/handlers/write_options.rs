//! The options of a write — `CreateOptions`, `UpdateOptions`, `PatchOptions` — read from the
//! query and checked as apimachinery's `ValidateCreateOptions`, `ValidateUpdateOptions` and
//! `ValidatePatchOptions` check them (`fieldManager` at most 128 bytes of printable
//! characters and required for apply, `force` only for apply, `dryRun` only `All`,
//! `fieldValidation` one of its three values); a refusal is the server's
//! `422 PatchOptions.meta.k8s.io "" is invalid: ...`. A write that names no manager gets the
//! User-Agent's first segment, as upstream defaults it.

use http::header;
use serde_json::{Value, json};

use super::Call;
use crate::admission::{ErrorKind, FieldError, invalid_status};
use crate::admit::FieldValidation;
use crate::status::{ApiError, ApiResult};

/// `FieldManagerMaxLength`.
const MAX_MANAGER_LENGTH: usize = 128;

/// What a write was asked to do besides its body.
pub struct Options {
    pub dry_run: bool,
    pub validation: FieldValidation,
    pub manager: String,
    /// `force` (server-side apply only).
    pub force: bool,
}

/// The field manager of a write that names none: the User-Agent up to its first `/`.
pub fn default_manager(headers: &http::HeaderMap) -> String {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    let manager = agent.split('/').next().unwrap_or(agent);
    manager.chars().take(MAX_MANAGER_LENGTH).collect()
}

/// Go's `unicode.IsPrint`, near enough: graphic characters and the ASCII space.
fn is_print(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace() || is_format(c))
}

/// Unicode format characters (category Cf) that commonly slip into strings.
fn is_format(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

fn error(kind: ErrorKind, field: &str, value: Option<Value>, detail: &str) -> FieldError {
    FieldError {
        kind,
        field: field.into(),
        value,
        detail: detail.into(),
    }
}

fn manager_errors(manager: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if manager.len() > MAX_MANAGER_LENGTH {
        errors.push(error(
            ErrorKind::TooLong,
            "fieldManager",
            Some(json!("<value omitted>")),
            &format!("may not be more than {MAX_MANAGER_LENGTH} bytes"),
        ));
    }
    for (i, c) in manager.char_indices().filter(|(_, c)| !is_print(*c)) {
        let shown = format!("U+{:04X}", c as u32);
        errors.push(error(
            ErrorKind::Invalid,
            "fieldManager",
            Some(json!(manager)),
            &format!("invalid character {shown} (at position {i})"),
        ));
    }
    errors
}

/// Read and check the options of `call` (a create, update or patch; `apply` for a
/// server-side apply patch).
pub fn parse(call: &Call, apply: bool) -> ApiResult<Options> {
    let kind = match call.verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        _ => "PatchOptions",
    };
    let query = &call.query;
    let given = query.get("fieldManager").unwrap_or("");
    let mut errors = Vec::new();
    if call.verb == "patch" && !apply && query.get("force").is_some() {
        errors.push(error(
            ErrorKind::Forbidden,
            "force",
            Some(json!("")),
            "may not be specified for non-apply patch",
        ));
    }
    if apply && given.is_empty() {
        errors.push(error(
            ErrorKind::Required,
            "fieldManager",
            Some(json!("")),
            "is required for apply patch",
        ));
    }
    errors.extend(manager_errors(given));
    let dry_run = query.get("dryRun").unwrap_or("");
    if !dry_run.is_empty() && dry_run != "All" {
        errors.push(error(
            ErrorKind::NotSupported,
            "dryRun",
            Some(json!([dry_run])),
            "supported values: \"All\"",
        ));
    }
    let validation = query.get("fieldValidation").unwrap_or("");
    if !matches!(validation, "" | "Ignore" | "Strict" | "Warn") {
        errors.push(error(
            ErrorKind::NotSupported,
            "fieldValidation",
            Some(json!(validation)),
            "supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
        ));
    }
    if !errors.is_empty() {
        let status = invalid_status(kind, "meta.k8s.io", "", &errors);
        return Err(ApiError::invalid(
            kind,
            "meta.k8s.io",
            "",
            status["message"].as_str().unwrap_or("").to_string(),
            status["details"]["causes"].clone(),
        ));
    }
    Ok(Options {
        dry_run: dry_run == "All",
        validation: FieldValidation::parse(Some(validation))?,
        manager: if given.is_empty() {
            default_manager(&call.headers)
        } else {
            given.to_string()
        },
        force: query.flag("force"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_must_be_printable_and_short() {
        assert!(manager_errors("kubectl-client-side-apply").is_empty());
        assert_eq!(
            manager_errors("a\u{7}b")[0].to_string(),
            "fieldManager: Invalid value: \"a\\ab\": invalid character U+0007 (at position 1)"
        );
        assert_eq!(
            manager_errors(&"m".repeat(129))[0].to_string(),
            "fieldManager: Too long: may not be more than 128 bytes"
        );
    }
}
