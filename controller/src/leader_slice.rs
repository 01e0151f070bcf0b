//! How sidecars find the leader: the chart's `rollcall-controller` Service has no selector, and
//! the leader writes its own Pod address into the Service's one EndpointSlice while it leads
//! (what Kubernetes' own control-plane Services and Patroni-style primaries do). This replaces
//! labelling the leader's Pod, which needed `patch` on every Pod in the namespace — a grant a
//! compromised controller could turn into running code as any pod there. Now the controller
//! may patch one named EndpointSlice and nothing else.
//!
//! Every write is best effort with a bound: a failure is logged, never fatal, because a stale
//! slice only sends sidecars to a replica that refuses them with UNAVAILABLE until they
//! reconnect. The leader re-asserts its entry every `REASSERT` (a `helm upgrade` re-applying
//! the chart, or a person, may have emptied it), and clears it on stepping down only if it
//! still names this Pod (a JSON Patch `test`), so a replica never erases another's lead.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// How long one write may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the leader writes its entry again while it leads.
pub const REASSERT: Duration = Duration::from_secs(10);

/// The slice this replica writes itself into while it leads.
#[derive(Clone, Debug)]
pub struct LeaderSlice {
    slices: Api<EndpointSlice>,
    /// The EndpointSlice's name.
    name: String,
    /// This replica's Pod and address.
    pod: String,
    namespace: String,
    ip: IpAddr,
}

/// The merge patch naming this Pod as the slice's one ready endpoint (the slice's ports,
/// written by the chart, stay as they are).
pub fn leading(ip: IpAddr, pod: &str, namespace: &str) -> Value {
    json!({"endpoints": [{
        "addresses": [ip.to_string()],
        "conditions": {"ready": true, "serving": true, "terminating": false},
        "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace},
    }]})
}

/// The JSON Patch emptying the slice if, and only if, its first endpoint is this Pod.
pub fn stepping_down(pod: &str) -> json_patch::Patch {
    let ops = json!([
        {"op": "test", "path": "/endpoints/0/targetRef/name", "value": pod},
        {"op": "replace", "path": "/endpoints", "value": []},
    ]);
    // The literal above is a valid patch; an empty one (a no-op) is the safe fallback.
    serde_json::from_value(ops).unwrap_or(json_patch::Patch(Vec::new()))
}

// === impl LeaderSlice ===

impl LeaderSlice {
    pub fn new(client: Client, namespace: &str, name: &str, pod: &str, ip: IpAddr) -> Self {
        Self {
            slices: Api::namespaced(client, namespace),
            name: name.to_owned(),
            pod: pod.to_owned(),
            namespace: namespace.to_owned(),
            ip,
        }
    }

    /// Name this Pod as the leader in the slice; logs a failure.
    pub async fn lead(&self) -> bool {
        let body = Patch::Merge(leading(self.ip, &self.pod, &self.namespace));
        let params = PatchParams::default();
        let write = self.slices.patch(&self.name, &params, &body);
        match tokio::time::timeout(WRITE_TIMEOUT, write).await {
            Ok(Ok(_)) => true,
            Ok(Err(error)) => {
                tracing::warn!(slice = %self.name, pod = %self.pod, %error, "cannot name this replica in the leader EndpointSlice; sidecars may reach the wrong replica until it is written");
                false
            }
            Err(_) => {
                tracing::warn!(slice = %self.name, pod = %self.pod, "writing the leader EndpointSlice timed out");
                false
            }
        }
    }

    /// Hold the slice while leading: write it now, then again every `REASSERT`. Never returns;
    /// drop (abort) it when the lead ends.
    pub async fn hold(self) {
        if self.lead().await {
            tracing::info!(slice = %self.name, pod = %self.pod, ip = %self.ip, "leader EndpointSlice names this replica");
        }
        let mut every = tokio::time::interval(REASSERT);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            self.lead().await;
        }
    }

    /// Empty the slice if it still names this Pod; logs the outcome.
    pub async fn step_down(&self) {
        let body = Patch::<()>::Json(stepping_down(&self.pod));
        let params = PatchParams::default();
        let write = self.slices.patch(&self.name, &params, &body);
        match tokio::time::timeout(WRITE_TIMEOUT, write).await {
            Ok(Ok(_)) => {
                tracing::info!(slice = %self.name, pod = %self.pod, "leader EndpointSlice emptied")
            }
            // The test failed: the slice is empty or names another replica. Nothing to undo.
            Ok(Err(kube::Error::Api(status))) if status.code == 422 => {
                tracing::debug!(slice = %self.name, pod = %self.pod, "leader EndpointSlice does not name this replica")
            }
            Ok(Err(error)) => {
                tracing::warn!(slice = %self.name, pod = %self.pod, %error, "cannot empty the leader EndpointSlice")
            }
            Err(_) => {
                tracing::warn!(slice = %self.name, pod = %self.pod, "emptying the leader EndpointSlice timed out")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_is_the_one_ready_endpoint_and_the_ports_are_left_alone() {
        let patch = leading(
            "10.1.2.3".parse().unwrap(),
            "rollcall-controller-0",
            "rollcall",
        );
        assert_eq!(
            patch,
            json!({"endpoints": [{
                "addresses": ["10.1.2.3"],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "name": "rollcall-controller-0", "namespace": "rollcall"},
            }]})
        );
        assert!(patch.get("ports").is_none());
    }

    #[test]
    fn stepping_down_empties_the_slice_only_where_it_names_this_pod() {
        let patch = stepping_down("rollcall-controller-0");
        let mut ours = json!({"endpoints": [{"addresses": ["10.1.2.3"],
            "targetRef": {"kind": "Pod", "name": "rollcall-controller-0"}}], "ports": [{"name": "grpc"}]});
        json_patch::patch(&mut ours, &patch).unwrap();
        assert_eq!(ours, json!({"endpoints": [], "ports": [{"name": "grpc"}]}));

        let mut theirs = json!({"endpoints": [{"addresses": ["10.1.2.4"],
            "targetRef": {"kind": "Pod", "name": "rollcall-controller-1"}}]});
        let before = theirs.clone();
        assert!(json_patch::patch(&mut theirs, &patch).is_err());
        assert_eq!(theirs, before, "another replica's lead is left alone");

        let mut empty = json!({"endpoints": []});
        assert!(json_patch::patch(&mut empty, &patch).is_err());
    }
}
