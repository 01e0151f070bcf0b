//! What the server serves: every resource type (built-in kinds from a fixed table, custom
//! resources added and removed as their CRDs come and go) with the facts discovery, routing,
//! printing and admission need — names, scope, verbs, subresources, schema, printer columns.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// The verbs of an ordinary stored resource, as discovery lists them.
pub const STORED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Review kinds (TokenReview, SubjectAccessReview) are answered, never stored.
pub const REVIEW_VERBS: &[&str] = &["create"];

/// Where a type's schema comes from.
#[derive(Clone, Debug)]
pub enum Schema {
    /// A definition name in the built-in OpenAPI document (`io.k8s.api.core.v1.Pod`).
    Builtin(&'static str),
    /// A CRD version's `openAPIV3Schema`.
    Custom(Arc<Value>),
}

/// How one printer column gets its cell.
#[derive(Clone, Debug)]
pub enum CellSource {
    /// A Kubernetes JSONPath such as `.status.endpoints.healthy`.
    Path(String),
    /// One of the built-in printers' computed cells.
    Builtin(fn(&Value) -> Value),
}

/// One column of `kubectl get` output (a `TableColumnDefinition`).
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub source: CellSource,
}

/// Stored objects, or a review that is answered and forgotten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    Stored,
    Review,
}

/// One resource in one group version.
#[derive(Clone, Debug)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    /// Plural, lower case: `backendpools`.
    pub resource: String,
    pub kind: String,
    pub list_kind: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: &'static [&'static str],
    pub status_subresource: bool,
    /// Objects are shared by every type with the same storage (core and events.k8s.io Events).
    pub storage: String,
    pub behavior: Behavior,
    pub schema: Schema,
    /// Columns after `Name`; built-ins without a printer get `Age`.
    pub columns: Vec<Column>,
    /// The CRD that defines this type, for custom resources.
    pub crd: Option<String>,
    /// The version objects are kept in (custom resources with several versions).
    pub storage_version: String,
}

// === impl ResourceType ===

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `backendpools.rollcall.dev`, `pods`: how messages name the resource.
    pub fn qualified(&self) -> String {
        crate::status::qualified(&self.group, &self.resource)
    }

    /// `BackendPool.rollcall.dev`, `Pod`: how validation messages name the kind.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }

    /// Fields a field selector may name for this kind, in this view (the field label
    /// conversions of `pkg/apis/core/v1/conversion.go`, `pkg/apis/events/v1`, and
    /// apiextensions-apiserver's `crConverter` for custom resources).
    pub fn field_selectors(&self) -> &'static [&'static str] {
        if self.is_custom() {
            return if self.namespaced {
                &["metadata.name", "metadata.namespace"]
            } else {
                &["metadata.name"]
            };
        }
        match (self.group.as_str(), self.kind.as_str()) {
            ("", "Event") => &[
                "metadata.name",
                "metadata.namespace",
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            ("events.k8s.io", "Event") => &[
                "metadata.name",
                "metadata.namespace",
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "regarding.apiVersion",
                "regarding.resourceVersion",
                "regarding.fieldPath",
                "reason",
                "reportingController",
                "type",
            ],
            ("", "Service") => &[
                "metadata.name",
                "metadata.namespace",
                "spec.clusterIP",
                "spec.type",
            ],
            ("", "Pod") => &[
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            ("", "Secret") => &["metadata.name", "metadata.namespace", "type"],
            ("", "Namespace") => &["metadata.name", "status.phase"],
            ("", "Node") => &["metadata.name", "spec.unschedulable"],
            _ => &["metadata.name", "metadata.namespace"],
        }
    }

    /// How a refused field selector is worded for this kind.
    pub fn field_refusal(&self) -> crate::selector::Refusal {
        let own = matches!(
            (self.group.as_str(), self.kind.as_str()),
            ("" | "events.k8s.io", "Event")
                | ("", "Pod" | "Node" | "Namespace" | "Secret" | "Service")
        );
        if own || self.is_custom() {
            crate::selector::Refusal::NotSupported
        } else {
            crate::selector::Refusal::NotKnown
        }
    }
}

/// Every served type, keyed by (group, version, plural).
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    types: BTreeMap<(String, String, String), Arc<ResourceType>>,
}

// === impl Catalog ===

impl Catalog {
    /// The built-in kinds.
    pub fn builtin() -> Self {
        let mut catalog = Self::default();
        for t in crate::builtin::types() {
            catalog.insert(t);
        }
        catalog
    }

    pub fn insert(&mut self, t: ResourceType) {
        self.types.insert(
            (t.group.clone(), t.version.clone(), t.resource.clone()),
            Arc::new(t),
        );
    }

    /// Remove every type a CRD defined.
    pub fn remove_crd(&mut self, crd: &str) {
        self.types.retain(|_, t| t.crd.as_deref() != Some(crd));
    }

    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceType>> {
        self.types
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
            .cloned()
    }

    /// The type serving `kind` in `group`/`version`.
    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types
            .values()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .cloned()
    }

    /// Types of one group version, ordered by plural.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.types
            .values()
            .filter(|t| t.group == group && t.version == version)
            .cloned()
            .collect()
    }

    /// Every group with its versions, newest preferred first, the core group (`""`) first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for t in self.types.values() {
            let versions = groups.entry(&t.group).or_default();
            if !versions.contains(&t.version.as_str()) {
                versions.push(&t.version);
            }
        }
        groups
            .into_iter()
            .map(|(g, mut vs)| {
                vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
                (g.to_string(), vs.into_iter().map(String::from).collect())
            })
            .collect()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
    }
}

/// Kubernetes' version ordering: GA over beta over alpha, higher numbers first within each.
pub fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stability, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stability, major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut versions = vec!["v1alpha1", "v2beta1", "v1", "v1beta2", "v2", "v1beta1"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            versions,
            ["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1"]
        );
    }

    #[test]
    fn builtin_catalog_serves_the_kinds_rollcall_and_its_chart_touch() {
        let catalog = Catalog::builtin();
        for (group, version, resource) in [
            ("", "v1", "namespaces"),
            ("", "v1", "services"),
            ("", "v1", "pods"),
            ("", "v1", "events"),
            ("events.k8s.io", "v1", "events"),
            ("discovery.k8s.io", "v1", "endpointslices"),
            ("coordination.k8s.io", "v1", "leases"),
            ("apps", "v1", "deployments"),
            ("rbac.authorization.k8s.io", "v1", "clusterroles"),
            ("policy", "v1", "poddisruptionbudgets"),
            (
                "admissionregistration.k8s.io",
                "v1",
                "mutatingwebhookconfigurations",
            ),
            ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            ("authentication.k8s.io", "v1", "tokenreviews"),
        ] {
            assert!(
                catalog.get(group, version, resource).is_some(),
                "{group}/{version} {resource}"
            );
        }
        let core = catalog.get("", "v1", "events").unwrap();
        let new = catalog.get("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(core.storage, new.storage);
        assert_eq!(catalog.groups()[0].0, "");
    }
}
