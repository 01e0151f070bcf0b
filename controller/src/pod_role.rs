//! The leader marks its own Pod `rollcall.dev/role: leader`, so the chart's Service selects the
//! leader by label while every replica is Ready (Patroni's way of running a primary behind a
//! Service). That is what lets a rolling update and a PodDisruptionBudget work: a standby is
//! Ready when it can take over, not only the leader. The label is removed when the lead ends
//! and when a replica starts (a container restarted after a crash must not keep a stale
//! label). Every change is best effort with a bound: a failure is logged, never fatal, since a
//! stale label only sends sidecars to a replica that refuses them with UNAVAILABLE and they
//! reconnect.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// The label, and its value on the leader.
pub const LABEL: &str = "rollcall.dev/role";
pub const LEADER: &str = "leader";
/// How long one label change may take.
const PATCH_TIMEOUT: Duration = Duration::from_secs(3);

/// This replica's Pod.
#[derive(Clone)]
pub struct PodRole {
    pods: Api<Pod>,
    name: String,
}

/// The merge patch that marks (or unmarks) the leader.
pub fn patch(leader: bool) -> Value {
    let value = if leader { json!(LEADER) } else { Value::Null };
    json!({"metadata": {"labels": {LABEL: value}}})
}

// === impl PodRole ===

impl PodRole {
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            pods: Api::namespaced(client, namespace),
            name: name.to_owned(),
        }
    }

    /// Mark this Pod as the leader (`true`) or not; logs the outcome.
    pub async fn mark(&self, leader: bool) {
        let params = PatchParams::default();
        let body = patch(leader);
        let result = tokio::time::timeout(
            PATCH_TIMEOUT,
            self.pods.patch(&self.name, &params, &Patch::Merge(&body)),
        )
        .await;
        match result {
            Ok(Ok(_)) => tracing::info!(pod = %self.name, leader, "pod role label set"),
            Ok(Err(error)) => {
                tracing::warn!(pod = %self.name, leader, %error, "cannot set the pod role label; the Service may send sidecars to the wrong replica until it is set")
            }
            Err(_) => {
                tracing::warn!(pod = %self.name, leader, "setting the pod role label timed out")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_sets_or_removes_only_the_role_label() {
        assert_eq!(
            patch(true),
            json!({"metadata": {"labels": {"rollcall.dev/role": "leader"}}})
        );
        assert_eq!(
            patch(false),
            json!({"metadata": {"labels": {"rollcall.dev/role": null}}})
        );
    }
}
