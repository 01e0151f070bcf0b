//! Label and field selectors, parsed from their query-string syntax and matched against an
//! object the way the API server does: labels with `=`, `==`, `!=`, `in`, `notin`, existence
//! and `!`; fields with `=`, `==`, `!=` on the fields each kind supports (anything else is
//! refused with the kind's message: `field label not supported: X` where the kind registers
//! its own field labels or is a custom resource, apimachinery's
//! `DefaultMetaV1FieldSelectorConversion` wording elsewhere).

use serde_json::Value;

use crate::status::ApiError;

#[derive(Clone, Debug, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelRequirement>);

/// A parsed `fieldSelector`: (field, wanted, equal?) terms, all of which must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, String, bool)>);

/// How a kind refuses a field it cannot select on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The kind's own conversion (Pods, Events, Secrets, custom resources...):
    /// `field label not supported: spec.x`.
    NotSupported,
    /// `DefaultMetaV1FieldSelectorConversion`:
    /// `"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"`.
    NotKnown,
}

/// Split on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn valid_label_key(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && key.matches('/').count() <= 1
}

fn parse_set(key: &str, rest: &str, selector: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{rest}', expected: '(' for {key} in {selector}"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

// === impl LabelSelector ===

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_terms(selector) {
            let requirement = if let Some(key) = term.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_string())
            } else if let Some((key, value)) = term.split_once("!=") {
                LabelRequirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = term.split_once("==") {
                LabelRequirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = term.split_once('=') {
                LabelRequirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, rest)) = term.split_once(" notin ") {
                LabelRequirement::NotIn(key.trim().into(), parse_set(key, rest, selector)?)
            } else if let Some((key, rest)) = term.split_once(" in ") {
                LabelRequirement::In(key.trim().into(), parse_set(key, rest, selector)?)
            } else {
                LabelRequirement::Exists(term.to_string())
            };
            let key = match &requirement {
                LabelRequirement::Equals(k, _)
                | LabelRequirement::NotEquals(k, _)
                | LabelRequirement::In(k, _)
                | LabelRequirement::NotIn(k, _)
                | LabelRequirement::Exists(k)
                | LabelRequirement::NotExists(k) => k,
            };
            if !valid_label_key(key) {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label key \"{key}\": name part must \
                     consist of alphanumeric characters, '-', '_' or '.'"
                )));
            }
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::NotExists(k) => get(k).is_none(),
        })
    }
}

// === impl FieldSelector ===

impl FieldSelector {
    /// Parse against the fields `kind` supports (`supported` as JSON pointers by field name).
    pub fn parse(
        selector: &str,
        kind: &str,
        supported: &[&str],
        refusal: Refusal,
    ) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in split_terms(selector) {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{selector}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                let message = match refusal {
                    Refusal::NotSupported => format!("field label not supported: {field}"),
                    Refusal::NotKnown => format!(
                        "\"{field}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    ),
                };
                return Err(
                    ApiError::bad_request(message).with_details(serde_json::json!({"kind": kind}))
                );
            }
            terms.push((field.to_string(), value.trim().to_string(), equal));
        }
        Ok(Self(terms))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same selector with each field renamed (a view's field names to the stored form's).
    pub fn rename(self, f: impl Fn(&str) -> String) -> Self {
        Self(
            self.0
                .into_iter()
                .map(|(field, v, eq)| (f(&field), v, eq))
                .collect(),
        )
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, wanted, equal)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            (actual == *wanted) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(labels: Value) -> Value {
        json!({"metadata": {"name": "web-1", "namespace": "shop", "labels": labels},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selectors_follow_the_api_servers_grammar() {
        let obj = pod(json!({"app": "web", "tier": "front", "kubernetes.io/service-name": "web"}));
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("missing in (db)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier=front", true),
            ("app=web,tier in (back)", false),
            ("kubernetes.io/service-name", true),
            ("kubernetes.io/service-name=web", true),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&obj), expected, "{selector}");
        }
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("bad key!=x").is_err());
    }

    #[test]
    fn field_selectors_match_supported_fields_only() {
        let fields = [
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "status.phase",
        ];
        let obj = pod(json!({}));
        for (selector, expected) in [
            ("metadata.name=web-1", true),
            ("metadata.name!=web-1", false),
            ("metadata.namespace==shop,status.phase=Running", true),
            ("spec.nodeName=", false),
            ("status.phase!=Pending", true),
        ] {
            let parsed =
                FieldSelector::parse(selector, "Pod", &fields, Refusal::NotSupported).unwrap();
            assert_eq!(parsed.matches(&obj), expected, "{selector}");
        }
        let e = FieldSelector::parse("spec.replicas=1", "Pod", &fields, Refusal::NotSupported)
            .unwrap_err();
        assert_eq!(e.message, "field label not supported: spec.replicas");
        let e =
            FieldSelector::parse("spec.x=1", "ConfigMap", &fields, Refusal::NotKnown).unwrap_err();
        assert_eq!(
            e.message,
            r#""spec.x" is not a known field selector: only "metadata.name", "metadata.namespace""#
        );
    }
}
