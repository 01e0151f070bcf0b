//! `ListOptions` of a list or watch, read from the query and checked as apimachinery's
//! `internalversion/validation` (`ValidateListOptions`, `validateWatchOptions`) checks them
//! after `SetListOptionsDefaults`: `resourceVersionMatch` only with a resourceVersion (list)
//! or with `sendInitialEvents` (watch), `sendInitialEvents` only on a watch and only with
//! `resourceVersionMatch=NotOlderThan`. Refusals are the server's
//! `422 ListOptions.meta.k8s.io "" is invalid: ...`.

use serde_json::{Value, json};

use crate::admission::{ErrorKind, FieldError, invalid_status};
use crate::request::Query;
use crate::status::{ApiError, ApiResult};

const EXACT: &str = "Exact";
const NOT_OLDER_THAN: &str = "NotOlderThan";

/// The options the list and watch handlers act on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `resourceVersion`, empty when unset.
    pub resource_version: String,
    pub resource_version_match: String,
    /// `sendInitialEvents` when given (after defaulting, for a watch).
    pub send_initial_events: Option<bool>,
    pub allow_bookmarks: bool,
}

/// Go's `strconv.ParseBool`, as query booleans are decoded.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn forbidden(detail: &str) -> FieldError {
    FieldError {
        kind: ErrorKind::Forbidden,
        field: "resourceVersionMatch".into(),
        value: Some(json!("")),
        detail: detail.into(),
    }
}

fn not_supported(value: &str, supported: &[&str]) -> FieldError {
    let quoted: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
    FieldError {
        kind: ErrorKind::NotSupported,
        field: "resourceVersionMatch".into(),
        value: Some(Value::String(value.into())),
        detail: format!("supported values: {}", quoted.join(", ")),
    }
}

fn refuse(errors: &[FieldError]) -> ApiError {
    let status = invalid_status("ListOptions", "meta.k8s.io", "", errors);
    ApiError::invalid(
        "ListOptions",
        "meta.k8s.io",
        "",
        status["message"].as_str().unwrap_or("").to_string(),
        status["details"]["causes"].clone(),
    )
}

// === impl ListOptions ===

impl ListOptions {
    /// Read and check the options of a list (`watch: false`) or watch.
    pub fn parse(query: &Query, watch: bool) -> ApiResult<Self> {
        let send_initial_events = match query.get("sendInitialEvents") {
            None | Some("") => None,
            Some(v) => Some(parse_bool(v).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "sendInitialEvents: invalid value {v:?}: not a boolean"
                ))
            })?),
        };
        let mut options = Self {
            resource_version: query.get("resourceVersion").unwrap_or("").to_string(),
            resource_version_match: query.get("resourceVersionMatch").unwrap_or("").to_string(),
            send_initial_events,
            allow_bookmarks: query.flag("allowWatchBookmarks"),
        };
        let continued = query.get("continue").is_some_and(|c| !c.is_empty());
        let mut errors = Vec::new();
        if watch {
            options.default_watch();
            let matched = options.resource_version_match.as_str();
            if options.send_initial_events.is_some() && matched != NOT_OLDER_THAN {
                errors.push(forbidden(
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !matched.is_empty() {
                if options.send_initial_events.is_none() {
                    errors.push(forbidden(
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if matched != NOT_OLDER_THAN {
                    errors.push(not_supported(matched, &[NOT_OLDER_THAN]));
                }
                if continued {
                    errors.push(forbidden(
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            let matched = options.resource_version_match.as_str();
            if !matched.is_empty() {
                if options.resource_version.is_empty() {
                    errors.push(forbidden(
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if continued {
                    errors.push(forbidden(
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if matched != EXACT && matched != NOT_OLDER_THAN {
                    errors.push(not_supported(matched, &[EXACT, NOT_OLDER_THAN, ""]));
                }
                if matched == EXACT && options.resource_version == "0" {
                    errors.push(forbidden(
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if options.send_initial_events.is_some() {
                errors.push(FieldError {
                    kind: ErrorKind::Forbidden,
                    field: "sendInitialEvents".into(),
                    value: Some(json!("")),
                    detail: "sendInitialEvents is forbidden for list".into(),
                });
            }
        }
        if errors.is_empty() {
            Ok(options)
        } else {
            Err(refuse(&errors))
        }
    }

    /// `SetListOptionsDefaults` with the WatchList feature on: a watch from "now" or "any"
    /// that says nothing else is a watch that sends the initial state.
    fn default_watch(&mut self) {
        let legacy = self.resource_version.is_empty() || self.resource_version == "0";
        if self.send_initial_events.is_none() && self.resource_version_match.is_empty() && legacy {
            self.send_initial_events = Some(true);
            self.resource_version_match = NOT_OLDER_THAN.into();
        }
    }

    /// `resourceVersionMatch=Exact`.
    pub fn exact(&self) -> bool {
        self.resource_version_match == EXACT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_watch_is_defaulted_to_initial_events() {
        let options = ListOptions::parse(&Query::parse(Some("watch=1")), true).unwrap();
        assert_eq!(options.send_initial_events, Some(true));
        let from = ListOptions::parse(&Query::parse(Some("resourceVersion=7")), true).unwrap();
        assert_eq!(from.send_initial_events, None);
    }

    #[test]
    fn unsupported_matches_name_the_supported_values() {
        let e = ListOptions::parse(
            &Query::parse(Some("resourceVersion=5&resourceVersionMatch=Newest")),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
    }
}
