//! The built-in kinds the server serves — those Rollcall and its chart touch, plus the few a
//! workload manifest commonly carries — with their discovery facts and the printer columns a
//! real API server's built-in table printers give them (a few kinds; the rest get Name and Age).

use serde_json::{Value, json};

use crate::catalog::{
    Behavior, CellSource, Column, REVIEW_VERBS, ResourceType, STORED_VERBS, Schema,
};
use crate::table::age_of;

struct Def {
    group: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    schema: &'static str,
}

const fn def(
    group: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    schema: &'static str,
) -> Def {
    Def {
        group,
        resource,
        kind,
        namespaced,
        short,
        status,
        schema,
    }
}

const NS: bool = true;
const CLUSTER: bool = false;

const DEFS: &[Def] = &[
    def(
        "",
        "namespaces",
        "Namespace",
        CLUSTER,
        &["ns"],
        true,
        "io.k8s.api.core.v1.Namespace",
    ),
    def(
        "",
        "services",
        "Service",
        NS,
        &["svc"],
        true,
        "io.k8s.api.core.v1.Service",
    ),
    def(
        "",
        "pods",
        "Pod",
        NS,
        &["po"],
        true,
        "io.k8s.api.core.v1.Pod",
    ),
    def(
        "",
        "events",
        "Event",
        NS,
        &["ev"],
        false,
        "io.k8s.api.core.v1.Event",
    ),
    def(
        "",
        "serviceaccounts",
        "ServiceAccount",
        NS,
        &["sa"],
        false,
        "io.k8s.api.core.v1.ServiceAccount",
    ),
    def(
        "",
        "secrets",
        "Secret",
        NS,
        &[],
        false,
        "io.k8s.api.core.v1.Secret",
    ),
    def(
        "",
        "configmaps",
        "ConfigMap",
        NS,
        &["cm"],
        false,
        "io.k8s.api.core.v1.ConfigMap",
    ),
    def(
        "",
        "endpoints",
        "Endpoints",
        NS,
        &["ep"],
        false,
        "io.k8s.api.core.v1.Endpoints",
    ),
    def(
        "",
        "nodes",
        "Node",
        CLUSTER,
        &["no"],
        true,
        "io.k8s.api.core.v1.Node",
    ),
    def(
        "discovery.k8s.io",
        "endpointslices",
        "EndpointSlice",
        NS,
        &[],
        false,
        "io.k8s.api.discovery.v1.EndpointSlice",
    ),
    def(
        "events.k8s.io",
        "events",
        "Event",
        NS,
        &["ev"],
        false,
        "io.k8s.api.events.v1.Event",
    ),
    def(
        "coordination.k8s.io",
        "leases",
        "Lease",
        NS,
        &[],
        false,
        "io.k8s.api.coordination.v1.Lease",
    ),
    def(
        "apps",
        "deployments",
        "Deployment",
        NS,
        &["deploy"],
        true,
        "io.k8s.api.apps.v1.Deployment",
    ),
    def(
        "apps",
        "replicasets",
        "ReplicaSet",
        NS,
        &["rs"],
        true,
        "io.k8s.api.apps.v1.ReplicaSet",
    ),
    def(
        "apps",
        "statefulsets",
        "StatefulSet",
        NS,
        &["sts"],
        true,
        "io.k8s.api.apps.v1.StatefulSet",
    ),
    def(
        "apps",
        "daemonsets",
        "DaemonSet",
        NS,
        &["ds"],
        true,
        "io.k8s.api.apps.v1.DaemonSet",
    ),
    def(
        "rbac.authorization.k8s.io",
        "roles",
        "Role",
        NS,
        &[],
        false,
        "io.k8s.api.rbac.v1.Role",
    ),
    def(
        "rbac.authorization.k8s.io",
        "rolebindings",
        "RoleBinding",
        NS,
        &[],
        false,
        "io.k8s.api.rbac.v1.RoleBinding",
    ),
    def(
        "rbac.authorization.k8s.io",
        "clusterroles",
        "ClusterRole",
        CLUSTER,
        &[],
        false,
        "io.k8s.api.rbac.v1.ClusterRole",
    ),
    def(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "ClusterRoleBinding",
        CLUSTER,
        &[],
        false,
        "io.k8s.api.rbac.v1.ClusterRoleBinding",
    ),
    def(
        "policy",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        NS,
        &["pdb"],
        true,
        "io.k8s.api.policy.v1.PodDisruptionBudget",
    ),
    def(
        "networking.k8s.io",
        "networkpolicies",
        "NetworkPolicy",
        NS,
        &["netpol"],
        false,
        "io.k8s.api.networking.v1.NetworkPolicy",
    ),
    def(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        CLUSTER,
        &[],
        false,
        "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration",
    ),
    def(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        CLUSTER,
        &[],
        false,
        "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration",
    ),
    def(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        CLUSTER,
        &["crd", "crds"],
        true,
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    ),
];

/// Kinds that are answered, not stored.
const REVIEWS: &[Def] = &[
    def(
        "authentication.k8s.io",
        "tokenreviews",
        "TokenReview",
        CLUSTER,
        &[],
        false,
        "io.k8s.api.authentication.v1.TokenReview",
    ),
    def(
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        CLUSTER,
        &[],
        false,
        "io.k8s.api.authorization.v1.SubjectAccessReview",
    ),
    def(
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        CLUSTER,
        &[],
        false,
        "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
    ),
];

/// Kinds in the `all` category, as `kubectl get all` expects.
const ALL: &[&str] = &[
    "pods",
    "services",
    "deployments",
    "replicasets",
    "statefulsets",
    "daemonsets",
];

/// Every built-in type.
pub fn types() -> Vec<ResourceType> {
    let stored = DEFS.iter().map(|d| (d, Behavior::Stored));
    let reviews = REVIEWS.iter().map(|d| (d, Behavior::Review));
    stored
        .chain(reviews)
        .map(|(d, behavior)| ResourceType {
            group: d.group.into(),
            version: "v1".into(),
            resource: d.resource.into(),
            kind: d.kind.into(),
            list_kind: format!("{}List", d.kind),
            singular: d.kind.to_lowercase(),
            namespaced: d.namespaced,
            short_names: d.short.iter().map(|s| s.to_string()).collect(),
            categories: if ALL.contains(&d.resource) {
                vec!["all".into()]
            } else {
                vec![]
            },
            verbs: if behavior == Behavior::Stored {
                STORED_VERBS
            } else {
                REVIEW_VERBS
            },
            status_subresource: d.status,
            // Core and events.k8s.io Events are one store seen through two APIs.
            storage: if d.kind == "Event" {
                "events".into()
            } else {
                crate::status::qualified(d.group, d.resource)
            },
            behavior,
            schema: Schema::Builtin(d.schema),
            columns: columns(d.group, d.kind),
            crd: None,
            storage_version: "v1".into(),
        })
        .collect()
}

fn col(name: &str, type_: &str, priority: i64, source: CellSource) -> Column {
    Column {
        name: name.into(),
        type_: type_.into(),
        format: if name == "Name" {
            "name".into()
        } else {
            String::new()
        },
        description: String::new(),
        priority,
        source,
    }
}

fn path(p: &str) -> CellSource {
    CellSource::Path(p.into())
}

fn computed(f: fn(&Value) -> Value) -> CellSource {
    CellSource::Builtin(f)
}

/// The columns of `kubectl get <kind>` (Name included).
pub fn columns(group: &str, kind: &str) -> Vec<Column> {
    let name = || col("Name", "string", 0, path(".metadata.name"));
    let age = || col("Age", "string", 0, computed(age_of));
    match (group, kind) {
        ("", "Namespace") => vec![
            name(),
            col("Status", "string", 0, path(".status.phase")),
            age(),
        ],
        ("", "Service") => vec![
            name(),
            col("Type", "string", 0, path(".spec.type")),
            col("Cluster-IP", "string", 0, path(".spec.clusterIP")),
            col("External-IP", "string", 0, computed(|_| json!("<none>"))),
            col("Port(s)", "string", 0, computed(service_ports)),
            age(),
            col("Selector", "string", 1, computed(service_selector)),
        ],
        ("", "Pod") => vec![
            name(),
            col("Ready", "string", 0, computed(pod_ready)),
            col(
                "Status",
                "string",
                0,
                computed(|p| {
                    json!(
                        p.pointer("/status/phase")
                            .and_then(Value::as_str)
                            .unwrap_or("Pending")
                    )
                }),
            ),
            col("Restarts", "string", 0, computed(|_| json!("0"))),
            age(),
        ],
        ("" | "events.k8s.io", "Event") => crate::event_printer::columns(),
        ("discovery.k8s.io", "EndpointSlice") => vec![
            name(),
            col("AddressType", "string", 0, path(".addressType")),
            col("Ports", "string", 0, computed(slice_ports)),
            col("Endpoints", "string", 0, computed(slice_endpoints)),
            age(),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            name(),
            col("Holder", "string", 0, path(".spec.holderIdentity")),
            age(),
        ],
        ("apps", "Deployment") => vec![
            name(),
            col(
                "Ready",
                "string",
                0,
                computed(|d| {
                    let ready = d
                        .pointer("/status/readyReplicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    let want = d
                        .pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1);
                    json!(format!("{ready}/{want}"))
                }),
            ),
            col("Up-to-date", "integer", 0, path(".status.updatedReplicas")),
            col("Available", "integer", 0, path(".status.availableReplicas")),
            age(),
        ],
        ("apiextensions.k8s.io", "CustomResourceDefinition") => vec![
            name(),
            col(
                "Created At",
                "date",
                0,
                computed(|crd| {
                    crd.pointer("/metadata/creationTimestamp")
                        .cloned()
                        .unwrap_or(Value::Null)
                }),
            ),
        ],
        _ => vec![name(), age()],
    }
}

fn service_ports(svc: &Value) -> Value {
    let ports: Vec<String> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let port = p.get("port").map(Value::to_string).unwrap_or_default();
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    format!("{port}/{proto}")
                })
                .collect()
        })
        .unwrap_or_default();
    json!(if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    })
}

fn service_selector(svc: &Value) -> Value {
    let selector: Vec<String> = svc
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    json!(if selector.is_empty() {
        "<none>".to_string()
    } else {
        selector.join(",")
    })
}

fn pod_ready(pod: &Value) -> Value {
    let total = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(0, |s| {
            s.iter().filter(|c| c["ready"] == json!(true)).count()
        });
    json!(format!("{ready}/{total}"))
}

fn slice_ports(slice: &Value) -> Value {
    let ports: Vec<String> = slice
        .get("ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p.get("port").map(Value::to_string))
                .collect()
        })
        .unwrap_or_default();
    json!(if ports.is_empty() {
        "<unset>".to_string()
    } else {
        ports.join(",")
    })
}

fn slice_endpoints(slice: &Value) -> Value {
    let addresses: Vec<&str> = slice
        .get("endpoints")
        .and_then(Value::as_array)
        .map(|eps| {
            eps.iter()
                .filter_map(|e| e.pointer("/addresses/0").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let shown = addresses
        .iter()
        .take(3)
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    json!(match addresses.len() {
        0 => "<unset>".to_string(),
        n if n > 3 => format!("{shown} + {} more...", n - 3),
        _ => shown,
    })
}
