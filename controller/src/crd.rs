//! The `BackendPool` custom resource: its spec (a Service reference plus the shared
//! `PoolPolicy`), its status, and the CRD generated from them. What the JSON schema of the
//! shared policy cannot say by itself (upper bounds, cross-field rules) is added here as bounds
//! and CEL rules (`rules.rs`), so bad input is refused at admission with a readable message.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, CustomResourceExt};
use rollcall_api::policy::PoolPolicy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod object;
mod rules;

pub use object::{InvalidSpec, PoolObject};

/// A pool of backends behind a Service, with the policy every sidecar applies to it.
// Printer columns repeat `type_ = ..` and `json_path` prefixes, which is not duplication.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "rollcall.dev",
    version = "v1alpha1",
    kind = "BackendPool",
    namespaced,
    shortname = "bp",
    status = "BackendPoolStatus",
    derive = "PartialEq",
    doc = "A pool of backends behind a Service and the policy every sidecar routing to it applies.",
    printcolumn(name = "Service", type_ = "string", json_path = ".spec.service.name"),
    printcolumn(
        name = "Healthy",
        type_ = "integer",
        json_path = ".status.endpoints.healthy"
    ),
    printcolumn(
        name = "Ejected",
        type_ = "integer",
        json_path = ".status.endpoints.ejected"
    ),
    printcolumn(
        name = "Panic",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Panic\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BackendPoolSpec {
    /// The Service whose endpoints make up the pool.
    pub service: ServiceRef,
    /// Routing policy; every field has a safe default.
    #[serde(flatten)]
    pub policy: PoolPolicy,
}

/// A Service in the pool's namespace and one of its ports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "type(self.port) == int ? (self.port >= 1 && self.port <= 65535) : self.port.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
    "message": "service.port must be a port number 1-65535 or the name of a Service port (lowercase letters, digits and '-')"
}]))]
pub struct ServiceRef {
    /// Name of the Service, in the pool's namespace.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// Service port, by name (`http`) or number (`80`).
    pub port: IntOrString,
}

/// What the controller and the sidecars observe about the pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackendPoolStatus {
    /// The spec generation this status describes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Degraded` and `Panic`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Version of the roster the controller serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roster_version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<EndpointCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidecars: Option<SidecarCounts>,
    /// Endpoints that at least one sidecar has ejected.
    #[serde(default)]
    pub ejections: Vec<Ejection>,
    /// Fleet health: how the endpoints' health checks are shared out, when sidecars take part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_health: Option<FleetHealthStatus>,
}

/// How a pool's endpoints are checked when sidecars share the health checks (fleet health).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetHealthStatus {
    /// Checkers per endpoint (`healthCheck.checkers`).
    pub checkers: u32,
    /// Sidecars taking part.
    pub sidecars: u32,
    /// Every sidecar probes every endpoint: checkers is 0, or there are no more sidecars.
    pub probe_all: bool,
    /// Endpoints all of whose checkers give a verdict.
    pub fully_checked: u32,
    /// Endpoints some of whose checkers give a verdict.
    pub partly_checked: u32,
    /// Endpoints whose checkers have not given a verdict yet.
    pub pending: u32,
    /// Endpoints no checker has given a verdict on for two probe intervals: every sidecar
    /// probes them itself.
    pub unchecked: u32,
    /// Endpoints most of their checkers fail, with how many agree (the first 20 by address).
    #[serde(default)]
    pub failing: Vec<FleetFailing>,
    /// Failing endpoints kept in by `maxEjectionPercent`.
    pub capped: u32,
}

/// One endpoint the fleet's checkers fail.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetFailing {
    pub address: String,
    /// Checkers whose probes fail it.
    pub failing: u32,
    /// Checkers that give a verdict.
    pub of: u32,
}

/// Endpoints by the state most sidecars report for them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointCounts {
    pub total: u32,
    pub healthy: u32,
    pub ejected: u32,
    pub probation: u32,
    pub draining: u32,
}

/// Sidecars watching this pool and sidecars that reported on it recently.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SidecarCounts {
    pub connected: u32,
    pub reporting: u32,
}

/// One endpoint ejected by at least one sidecar.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ejection {
    /// `ip:port`.
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The most common reason among the sidecars that eject it.
    pub reason: String,
    /// Earliest ejection among those sidecars, RFC 3339.
    pub since: String,
    /// How many sidecars report it ejected ...
    pub ejected_by: u32,
    /// ... of how many that report on the pool.
    pub of: u32,
    /// The latest error an ejecting sidecar reported, quoted, in its words, never checked.
    ///
    /// Marked `reported by a sidecar:`; at most 256 characters, control characters removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The CRD as installed: the derived definition plus bounds and CEL rules.
pub fn definition() -> CustomResourceDefinition {
    let mut crd = BackendPool::crd();
    rules::apply(&mut crd);
    crd
}

/// The CRD as YAML, exactly what `rollcall-controller crd` prints and `crds/` holds.
pub fn yaml() -> Result<String> {
    serde_saphyr::to_string(&definition()).map_err(|e| Error::Yaml(e.to_string()))
}

#[cfg(test)]
mod cel_tests;
#[cfg(test)]
mod tests;
