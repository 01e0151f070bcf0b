//! Object metadata as the API server owns it: names (with their RFC 1123 / 1035 checks and
//! `generateName`), uid, creation time, `generation` (bumped on spec changes only), and the
//! fields a client may not change after creation.

use rand::Rng;
use serde_json::{Map, Value, json};

use crate::status::ApiError;

fn since_epoch() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Now, in Unix seconds.
pub fn now_unix() -> i64 {
    since_epoch().as_secs() as i64
}

/// Unix seconds as RFC 3339 (`2026-12-01T06:42:41Z`).
pub fn rfc3339(seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Now, as the API server writes timestamps (RFC 3339, seconds, UTC).
pub fn now_rfc3339() -> String {
    rfc3339(now_unix())
}

/// Now with microseconds, as `MicroTime` fields (`eventTime`, Lease renew times) carry it.
pub fn now_micro() -> String {
    let now = since_epoch();
    let seconds = rfc3339(now.as_secs() as i64);
    let stem = seconds.trim_end_matches('Z');
    format!("{stem}.{:06}Z", now.subsec_micros())
}

pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The five characters `generateName` appends (consonants and digits, as the API server picks).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub fn name(object: &Value) -> Option<&str> {
    object.pointer("/metadata/name").and_then(Value::as_str)
}

pub fn namespace(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
}

pub fn resource_version(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

pub fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

/// `metadata`, created when missing (an object that is not a JSON object gets none).
pub fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let obj = object.as_object_mut()?;
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut()
}

pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// Mark `object` as being deleted, as the registry's `markAsDeleting` does for an object that
/// finalizers hold: `deletionTimestamp` now (kept if already set), a zero grace period, and
/// `generation` bumped the first time (controllers that watch generations see the deletion).
pub fn mark_deleting(object: &mut Value) {
    let first = !is_deleting(object);
    let Some(meta) = metadata_mut(object) else {
        return;
    };
    if first {
        if let Some(generation) = meta.get("generation").and_then(Value::as_i64)
            && generation > 0
        {
            meta.insert("generation".into(), json!(generation + 1));
        }
        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
    }
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
}

/// Which naming rule a kind's names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain: most kinds.
    Subdomain,
    /// RFC 1123 label: Namespaces.
    Label,
    /// RFC 1035 label: Services.
    Label1035,
    /// Path segment only: RBAC kinds, Events.
    PathSegment,
}

impl NameRule {
    pub fn for_kind(group: &str, kind: &str) -> Self {
        match (group, kind) {
            ("", "Namespace") => Self::Label,
            ("", "Service") => Self::Label1035,
            ("rbac.authorization.k8s.io", _) => Self::PathSegment,
            _ => Self::Subdomain,
        }
    }
}

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Problems with a name, as `metadata.name` field errors would describe them.
pub fn name_problems(rule: NameRule, name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                problems.push("must be no more than 253 characters".to_string());
            }
            if !name.split('.').all(is_label) {
                problems.push(SUBDOMAIN_MSG.to_string());
            }
        }
        NameRule::Label | NameRule::Label1035 => {
            if name.len() > 63 {
                problems.push("must be no more than 63 characters".to_string());
            }
            let starts_alpha = name.starts_with(|c: char| c.is_ascii_lowercase());
            if !is_label(name) {
                problems.push(
                    if rule == NameRule::Label {
                        LABEL_MSG
                    } else {
                        LABEL_1035_MSG
                    }
                    .to_string(),
                );
            } else if rule == NameRule::Label1035 && !starts_alpha {
                problems.push(LABEL_1035_MSG.to_string());
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                problems.push(format!("may not be '{name}'"));
            } else if name.contains('/') || name.contains('%') {
                problems.push("may not contain '/'".to_string());
            }
        }
    }
    problems
}

/// Everything in an object but `metadata` and `status`: what a `generation` counts changes of.
pub fn spec_part(object: &Value) -> Map<String, Value> {
    object
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Carry what a client may not change from the stored object into its replacement.
pub fn keep_system_fields(old: &Value, new: &mut Value) -> Result<(), ApiError> {
    let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
    let Some(meta) = metadata_mut(new) else {
        return Err(ApiError::bad_request("the object is not a JSON object"));
    };
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "selfLink",
    ] {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    Ok(())
}

/// Bump `generation` when anything but metadata and status changed.
pub fn bump_generation(old: &Value, new: &mut Value) {
    let old_generation = old.pointer("/metadata/generation").and_then(Value::as_i64);
    let Some(generation) = old_generation else {
        return;
    };
    let changed = spec_part(old) != spec_part(new);
    if let Some(meta) = metadata_mut(new) {
        meta.insert(
            "generation".into(),
            json!(if changed { generation + 1 } else { generation }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_per_kind() {
        assert!(name_problems(NameRule::Subdomain, "web.shop-1").is_empty());
        assert_eq!(name_problems(NameRule::Subdomain, "Web_1"), [SUBDOMAIN_MSG]);
        assert!(name_problems(NameRule::Label, "a.b").len() == 1);
        assert!(name_problems(NameRule::Label1035, "1abc").len() == 1);
        assert!(name_problems(NameRule::Label1035, "abc-1").is_empty());
        assert!(name_problems(NameRule::PathSegment, "system:controller:x").is_empty());
        assert!(!name_problems(NameRule::PathSegment, "a/b").is_empty());
        assert_eq!(name_suffix().len(), 5);
    }

    #[test]
    fn generation_counts_spec_changes_only() {
        let old = json!({"metadata": {"generation": 2}, "spec": {"a": 1}, "status": {"x": 1}});
        let mut same =
            json!({"metadata": {"labels": {"l": "1"}}, "spec": {"a": 1}, "status": {"x": 2}});
        keep_system_fields(&old, &mut same).unwrap();
        bump_generation(&old, &mut same);
        assert_eq!(same["metadata"]["generation"], 2);
        let mut changed = json!({"metadata": {}, "spec": {"a": 2}});
        keep_system_fields(&old, &mut changed).unwrap();
        bump_generation(&old, &mut changed);
        assert_eq!(changed["metadata"]["generation"], 3);
    }
}
