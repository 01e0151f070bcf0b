//! A `BackendPool` as the watch delivers it, before the controller trusts it: metadata typed,
//! spec and status as JSON. One pool the controller cannot read (written through a CRD without
//! its schema, or by a newer version) must never fail the list and watch of all the others, so
//! the watch and the cache hold this form, and each reconcile parses its own pool — a spec that
//! does not parse or validate becomes that pool's `InvalidSpec` condition, not an error loop.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use rollcall_api::policy::PoolPolicy;

use super::{BackendPool, BackendPoolSpec, BackendPoolStatus, ServiceRef};

/// A BackendPool whose spec and status have not been parsed yet.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(inherit = "BackendPool")]
pub struct PoolObject {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// Why a pool's spec cannot be used; the message names the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSpec(pub String);

impl std::fmt::Display for InvalidSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

// === impl PoolObject ===

impl PoolObject {
    /// The pool's service name, even when the rest of the spec does not parse (so slice and
    /// Service events still find it).
    pub fn service_name(&self) -> Option<&str> {
        self.spec.pointer("/service/name").and_then(Value::as_str)
    }

    /// The status as last written, if it still reads as one (a status someone else mangled
    /// reads as none, and is rewritten).
    pub fn status(&self) -> Option<BackendPoolStatus> {
        self.status
            .clone()
            .and_then(|s| serde_json::from_value(s).ok())
    }

    /// Parse and validate the spec.
    pub fn parse(&self) -> Result<BackendPool, InvalidSpec> {
        let spec: BackendPoolSpec = serde_json::from_value(self.spec.clone())
            .map_err(|e| InvalidSpec(locate(&self.spec).unwrap_or_else(|| format!("spec: {e}"))))?;
        if let Err(errors) = spec.policy.validate() {
            let listed: Vec<String> = errors
                .iter()
                .map(|e| format!("spec.{}: {}", e.field, e.message))
                .collect();
            return Err(InvalidSpec(listed.join("; ")));
        }
        Ok(BackendPool {
            metadata: self.metadata.clone(),
            spec,
            status: self.status(),
        })
    }
}

/// Where in `spec` a parse fails, as `spec.a.b: what is wrong`. The spec flattens the policy
/// into it, which hides paths from serde, so its two parts are parsed apart here.
fn locate(spec: &Value) -> Option<String> {
    let at = |prefix: &str, path: String, inner: serde_json::Error| {
        let path = if path == "." {
            String::new()
        } else {
            format!(".{path}")
        };
        format!("{prefix}{path}: {inner}")
    };
    let Some(service) = spec.get("service") else {
        return Some("spec.service: Required value".into());
    };
    if let Err(e) = serde_path_to_error::deserialize::<_, ServiceRef>(service) {
        return Some(at("spec.service", e.path().to_string(), e.into_inner()));
    }
    let mut policy = spec.clone();
    if let Some(map) = policy.as_object_mut() {
        map.remove("service");
    }
    serde_path_to_error::deserialize::<_, PoolPolicy>(&policy)
        .err()
        .map(|e| at("spec", e.path().to_string(), e.into_inner()))
}

impl From<&BackendPool> for PoolObject {
    fn from(pool: &BackendPool) -> Self {
        Self {
            metadata: pool.metadata.clone(),
            spec: serde_json::to_value(&pool.spec).unwrap_or_default(),
            status: pool
                .status
                .as_ref()
                .and_then(|s| serde_json::to_value(s).ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(spec: Value) -> PoolObject {
        PoolObject {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec,
            status: Some(json!({"conditions": "not a list"})),
        }
    }

    #[test]
    fn a_valid_spec_parses_and_a_mangled_status_reads_as_none() {
        let pool = object(json!({"service": {"name": "web", "port": 80}}))
            .parse()
            .unwrap();
        assert_eq!(pool.spec.service.name, "web");
        assert_eq!(pool.status, None);
    }

    #[test]
    fn an_unreadable_spec_names_its_field() {
        let bad = object(json!({"service": {"name": "web", "port": 80},
                                "healthCheck": {"unhealthyThreshold": -1}}));
        let err = bad.parse().unwrap_err();
        assert!(
            err.0.starts_with("spec.healthCheck.unhealthyThreshold: "),
            "{err}"
        );
        assert_eq!(bad.service_name(), Some("web"));
        let err = object(json!({"service": {"name": "web"}}))
            .parse()
            .unwrap_err();
        assert!(err.0.contains("port"), "{err}");
    }

    #[test]
    fn a_spec_that_parses_but_does_not_validate_is_invalid_too() {
        let bad = object(json!({"service": {"name": "web", "port": 80},
                                "healthCheck": {"interval": "1s", "timeout": "5s"}}));
        let err = bad.parse().unwrap_err();
        assert!(err.0.contains("spec.healthCheck.timeout"), "{err}");
    }
}
