//! The injection decision, pure: a pod (as the API server sends it at CREATE), its namespace
//! and the sidecar settings in; skip, refuse with a message, or a JSON patch out.
//!
//! - No `rollcall.dev/pools` annotation, the `rollcall.dev/inject: disabled` label, or a
//!   `rollcall-sidecar` container already there: skipped, the pod is not touched.
//! - A malformed annotation, a local port the pod already uses (or the sidecar's admin port),
//!   `hostNetwork` (the loopback listeners would be the node's), or a volume name taken:
//!   refused with a message naming the problem. Refusing, not ignoring: a pod that asked for
//!   pools and started without them would fail every request it sends.
//! - Otherwise: the sidecar first among the init containers (so later init containers can use
//!   the pools), its volumes appended, and the `rollcall.dev/injected=true` label.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::annotation::{self, PoolPort, SidecarOptions};
use crate::config::SidecarSettings;
use crate::sidecar;

/// The label that opts one pod out in a namespace labelled for injection.
pub const INJECT_LABEL: &str = "rollcall.dev/inject";

/// What to do with one pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Leave the pod as it is, for this reason.
    Skip(String),
    /// Refuse the pod, with this message for whoever created it.
    Refuse(String),
    /// Apply this JSON patch (RFC 6902 operations).
    Inject {
        pools: Vec<PoolPort>,
        patch: Vec<Value>,
    },
}

/// `/` and `~` escaped for a JSON pointer.
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Ports the pod's containers already declare.
fn declared_ports(pod: &Pod) -> BTreeSet<i32> {
    let Some(spec) = &pod.spec else {
        return BTreeSet::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| p.container_port)
        .collect()
}

fn has_sidecar(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|spec| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|c| c.name == sidecar::CONTAINER_NAME)
    })
}

/// Decide what to do with `pod`, created in `namespace`.
pub fn decide(pod: &Pod, namespace: &str, settings: &SidecarSettings) -> Decision {
    let meta = &pod.metadata;
    let Some(value) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotation::POOLS))
    else {
        return Decision::Skip(format!("no {} annotation", annotation::POOLS));
    };
    if meta
        .labels
        .as_ref()
        .and_then(|l| l.get(INJECT_LABEL))
        .map(String::as_str)
        == Some("disabled")
    {
        return Decision::Skip(format!("labelled {INJECT_LABEL}=disabled"));
    }
    if has_sidecar(pod) {
        return Decision::Skip(format!(
            "already has a {} container",
            sidecar::CONTAINER_NAME
        ));
    }
    let pools = match annotation::parse(value, namespace) {
        Ok(pools) => pools,
        Err(message) => return Decision::Refuse(message),
    };
    let annotated = |name: &str| meta.annotations.as_ref().and_then(|a| a.get(name));
    let mut options = SidecarOptions::default();
    if let Some(value) = annotated(annotation::THREADS) {
        match annotation::parse_threads(value) {
            Ok(threads) => options.threads = Some(threads),
            Err(message) => return Decision::Refuse(message),
        }
    }
    if let Some(value) = annotated(annotation::MAX_IDLE_CONNECTIONS) {
        match annotation::parse_max_idle_connections(value) {
            Ok(budget) => options.max_idle_connections = Some(budget),
            Err(message) => return Decision::Refuse(message),
        }
    }
    if let Some(value) = annotated(annotation::HTTP1_ENGINE) {
        match annotation::parse_http1_engine(value) {
            Ok(engine) => options.http1_engine = Some(engine),
            Err(message) => return Decision::Refuse(message),
        }
    }
    let Some(spec) = &pod.spec else {
        return Decision::Refuse("the pod has no spec".into());
    };
    if spec.host_network == Some(true) {
        return Decision::Refuse(format!(
            "{}: a hostNetwork pod cannot get the sidecar (its listeners on 127.0.0.1 and its admin port {} would be the node's); remove hostNetwork or the annotation",
            annotation::POOLS,
            settings.admin_port
        ));
    }
    let declared = declared_ports(pod);
    if let Some(p) = pools.iter().find(|p| p.port == settings.admin_port) {
        return Decision::Refuse(format!(
            "{}: local port {} of pool {}/{} is the sidecar's admin port; pick another",
            annotation::POOLS,
            p.port,
            p.namespace,
            p.name
        ));
    }
    if let Some(p) = pools.iter().find(|p| declared.contains(&i32::from(p.port))) {
        return Decision::Refuse(format!(
            "{}: local port {} of pool {}/{} is already a containerPort of this pod; pick another",
            annotation::POOLS,
            p.port,
            p.namespace,
            p.name
        ));
    }
    if declared.contains(&i32::from(settings.admin_port)) {
        return Decision::Refuse(format!(
            "the sidecar's admin port {} is already a containerPort of this pod; change the container's port or the chart's sidecar.adminPort",
            settings.admin_port
        ));
    }
    let volumes = sidecar::volumes(settings);
    let taken: BTreeSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    if let Some(v) = volumes.iter().find(|v| taken.contains(v.name.as_str())) {
        return Decision::Refuse(format!(
            "the pod already has a volume named {}, which the sidecar needs; rename it",
            v.name
        ));
    }
    let container = sidecar::container(settings, &pools, &options);
    let mut patch = Vec::new();
    match &meta.labels {
        None => patch.push(json!({"op": "add", "path": "/metadata/labels",
                                  "value": {sidecar::INJECTED_LABEL: "true"}})),
        Some(_) => patch.push(json!({"op": "add",
                                     "path": format!("/metadata/labels/{}", pointer_escape(sidecar::INJECTED_LABEL)),
                                     "value": "true"})),
    }
    match &spec.init_containers {
        None => {
            patch.push(json!({"op": "add", "path": "/spec/initContainers", "value": [container]}))
        }
        Some(_) => {
            patch.push(json!({"op": "add", "path": "/spec/initContainers/0", "value": container}))
        }
    }
    match &spec.volumes {
        None => patch.push(json!({"op": "add", "path": "/spec/volumes", "value": volumes})),
        Some(_) => patch.extend(
            volumes
                .iter()
                .map(|v| json!({"op": "add", "path": "/spec/volumes/-", "value": v})),
        ),
    }
    Decision::Inject { pools, patch }
}
