//! The zone a verified sidecar runs in, for zone-aware routing: the Node its pod runs on (bound
//! ServiceAccount tokens name it since Kubernetes 1.30, and TokenReview passes it on) and that
//! Node's `topology.kubernetes.io/zone` label, as the EndpointSlice controller reads it for
//! endpoints. `Watch` hands it to the sidecar in its response metadata, so a pod needs no
//! per-node configuration (the downward API cannot expose node labels).
//!
//! Answers are cached per node (a node does not change zones), and concurrent lookups of one
//! node wait for a single request, so a fleet reconnecting at once costs one GET per node. A
//! lookup that fails or takes longer than `LOOKUP_TIMEOUT` gives no zone (the sidecar routes
//! across every zone, as without zone-aware routing) and is tried again after `FAILED_FOR`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::auth::Identity;

/// The well-known label of a Node's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Its name before Kubernetes 1.17, still set by some providers.
const LEGACY_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
/// Longest a Watch waits for its caller's zone.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an answer is trusted (a Node's zone label does not change while it runs).
const KNOWN_FOR: Duration = Duration::from_secs(600);
/// How long a failed lookup stands before it is tried again.
const FAILED_FOR: Duration = Duration::from_secs(30);
/// Nodes kept at most.
const CACHE_ENTRIES: usize = 20_000;

/// A lookup's answer (`None`: there is none) and until when it stands.
type Answer = (Option<String>, Instant);

/// Looks up and caches sidecars' zones; does nothing without an API client.
#[derive(Default)]
pub struct Zones {
    client: Option<Client>,
    /// By node name.
    cache: Mutex<HashMap<String, Arc<OnceCell<Answer>>>>,
}

impl std::fmt::Debug for Zones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zones")
            .field("enabled", &self.client.is_some())
            .finish()
    }
}

/// The zone a Node's labels name, if any.
pub fn zone_of_node(node: &Node) -> Option<String> {
    let labels = node.metadata.labels.as_ref()?;
    labels
        .get(ZONE_LABEL)
        .or_else(|| labels.get(LEGACY_ZONE_LABEL))
        .filter(|z| !z.is_empty())
        .cloned()
}

impl Zones {
    pub fn new(client: Client) -> Self {
        Self {
            client: Some(client),
            cache: Mutex::default(),
        }
    }

    /// The zone `id`'s pod runs in; `None` when it cannot be told (no client, a token that
    /// names no node, a node without the label, or the API server did not answer in time).
    pub async fn zone_of(&self, id: &Identity) -> Option<String> {
        let client = self.client.as_ref()?;
        let node = id.node.clone()?;
        self.cached(node.clone(), || zone_of_named_node(client, node))
            .await
    }

    /// The answer for `key`: from the cache while it stands, else from `lookup` (one lookup
    /// per key at a time; the others wait for it).
    async fn cached<F, Fut>(&self, key: String, lookup: F) -> Option<String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Answer>,
    {
        let cell = {
            let now = Instant::now();
            let mut cache = self.cache.lock();
            let stale = cache
                .get(&key)
                .and_then(|cell| cell.get())
                .is_some_and(|(_, until)| *until <= now);
            if stale {
                cache.remove(&key);
            }
            if cache.len() >= CACHE_ENTRIES && !cache.contains_key(&key) {
                cache.retain(|_, cell| cell.get().is_none_or(|(_, until)| *until > now));
                if cache.len() >= CACHE_ENTRIES {
                    cache.clear();
                }
            }
            Arc::clone(cache.entry(key).or_default())
        };
        cell.get_or_init(lookup).await.0.clone()
    }
}

/// The zone label of Node `name`.
async fn zone_of_named_node(client: &Client, name: String) -> Answer {
    let nodes: Api<Node> = Api::all(client.clone());
    match tokio::time::timeout(LOOKUP_TIMEOUT, nodes.get_opt(&name)).await {
        Ok(Ok(Some(node))) => {
            let zone = zone_of_node(&node);
            if zone.is_none() {
                tracing::info!(node = %name, "the node has no {ZONE_LABEL} label; its sidecars get no zone");
            }
            (zone, Instant::now() + KNOWN_FOR)
        }
        Ok(Ok(None)) => {
            tracing::warn!(node = %name, "the sidecar's node does not exist; it gets no zone");
            (None, Instant::now() + FAILED_FOR)
        }
        Ok(Err(error)) => {
            tracing::warn!(node = %name, %error, "cannot read the sidecar's node; it gets no zone");
            (None, Instant::now() + FAILED_FOR)
        }
        Err(_) => {
            tracing::warn!(node = %name, "reading the sidecar's node timed out; it gets no zone");
            (None, Instant::now() + FAILED_FOR)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_zone_is_the_well_known_label_else_the_legacy_one() {
        assert_eq!(
            zone_of_node(&node(&[(ZONE_LABEL, "eu-1a"), (LEGACY_ZONE_LABEL, "old")])).as_deref(),
            Some("eu-1a")
        );
        assert_eq!(
            zone_of_node(&node(&[(LEGACY_ZONE_LABEL, "old")])).as_deref(),
            Some("old")
        );
        assert_eq!(zone_of_node(&node(&[(ZONE_LABEL, "")])), None);
        assert_eq!(zone_of_node(&Node::default()), None);
    }

    #[tokio::test]
    async fn without_a_client_nobody_has_a_zone() {
        let id = Identity {
            namespace: "shop".into(),
            service_account: "front".into(),
            pod: "front-1".into(),
            pod_uid: "u".into(),
            node: Some("node-a".into()),
        };
        assert_eq!(Zones::default().zone_of(&id).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_lookups_of_a_key_make_one_request_and_answers_expire() {
        let zones = Zones::default();
        let calls = AtomicUsize::new(0);
        let lookup = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            (Some("eu-1a".to_string()), Instant::now() + KNOWN_FOR)
        };
        let key = || "node-a".to_string();
        let (a, b) = tokio::join!(zones.cached(key(), lookup), zones.cached(key(), lookup));
        assert_eq!((a.as_deref(), b.as_deref()), (Some("eu-1a"), Some("eu-1a")));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Still standing just before it expires, asked again once it has.
        tokio::time::advance(KNOWN_FOR - Duration::from_secs(1)).await;
        zones.cached(key(), lookup).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(2)).await;
        zones.cached(key(), lookup).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // A failure stands for its shorter time only.
        let failing = || async { (None, Instant::now() + FAILED_FOR) };
        let other = || "node-b".to_string();
        assert_eq!(zones.cached(other(), failing).await, None);
        tokio::time::advance(FAILED_FOR + Duration::from_secs(1)).await;
        assert_eq!(
            zones.cached(other(), lookup).await.as_deref(),
            Some("eu-1a")
        );
    }
}
