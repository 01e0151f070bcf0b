//! Which pools a verified sidecar may watch (and report on). A pod may watch the pools of its
//! own namespace: the namespace is the boundary Kubernetes RBAC already draws, and a Service's
//! endpoints are visible to that namespace's pods anyway. A pool in another namespace may be
//! watched when RBAC says the pod's ServiceAccount may `get` that BackendPool — a Role and
//! RoleBinding in the pool's namespace, asked with a `SubjectAccessReview` — so cross-namespace
//! access is granted the way every other Kubernetes permission is, by the pool's owners.
//! Answers are cached (a minute when allowed, ten seconds when denied, so a new RoleBinding
//! takes effect soon; least recently used out when full; open streams ask again, `grants`); every review has a timeout, and at
//! most `CONCURRENT_REVIEWS` are in flight over all callers. Without authentication every pool
//! may be watched.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use lru::LruCache;
use parking_lot::Mutex;
use rollcall_api::roster::PoolRef;
use tokio::time::Instant;
use tonic::Status;

use super::auth::{Identity, Mode};
use crate::metrics::Metrics;

const ALLOWED_FOR: Duration = Duration::from_secs(60);
const DENIED_FOR: Duration = Duration::from_secs(10);
/// Answers kept at most.
const CACHE_ENTRIES: usize = 50_000;
/// SubjectAccessReviews in flight at most, over all callers.
const CONCURRENT_REVIEWS: usize = 16;
/// How long one review may take, waiting for a turn included.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// `(namespace, service account)` of the asker, and the pool.
type Question = ((String, String), PoolRef);

/// Decides `may watch`, with a cache of RBAC answers.
pub struct Authorizer {
    client: Option<Client>,
    cache: Mutex<LruCache<Question, (bool, Instant)>>,
    reviews: tokio::sync::Semaphore,
    metrics: Option<Metrics>,
    /// How long an allowed answer is kept.
    allowed_for: Duration,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("rbac", &self.client.is_some())
            .finish()
    }
}

/// The review that asks whether `who` may `get` BackendPool `pool`.
pub fn review_for(who: &Identity, pool: &PoolRef) -> SubjectAccessReview {
    let mut extra = BTreeMap::new();
    extra.insert(
        "authentication.kubernetes.io/pod-name".to_string(),
        vec![who.pod.clone()],
    );
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!(
                "system:serviceaccount:{}:{}",
                who.namespace, who.service_account
            )),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{}", who.namespace),
                "system:authenticated".into(),
            ]),
            extra: Some(extra),
            resource_attributes: Some(ResourceAttributes {
                group: Some("rollcall.dev".into()),
                resource: Some("backendpools".into()),
                verb: Some("get".into()),
                namespace: Some(pool.namespace.clone()),
                name: Some(pool.name.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

// === impl Authorizer ===

impl Authorizer {
    pub fn new(mode: &Mode) -> Self {
        let client = match mode {
            Mode::TokenReview { client, .. } => Some(client.clone()),
            Mode::Insecure => None,
        };
        Self {
            client,
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(CACHE_ENTRIES).unwrap_or(NonZeroUsize::MIN),
            )),
            reviews: tokio::sync::Semaphore::new(CONCURRENT_REVIEWS),
            metrics: None,
            allowed_for: ALLOWED_FOR,
        }
    }

    /// Keep allowed answers for `lifetime` instead of a minute (`Limits::grant_recheck`).
    pub fn allowing_for(self, lifetime: Duration) -> Self {
        Self {
            allowed_for: lifetime,
            ..self
        }
    }

    /// The same, counting reviews and cache hits in `metrics`.
    pub fn with_metrics(mode: &Mode, metrics: Metrics) -> Self {
        Self {
            metrics: Some(metrics),
            ..Self::new(mode)
        }
    }

    fn count_review(&self, result: &str) {
        if let Some(m) = &self.metrics {
            m.access_reviews.with_label_values(&[result]).inc();
        }
    }

    fn count_cache(&self, result: &str) {
        if let Some(m) = &self.metrics {
            m.review_cache.with_label_values(&["access", result]).inc();
        }
    }

    fn cached(&self, question: &Question, now: Instant) -> Option<bool> {
        let found = match self.cache.lock().get(question) {
            Some((allowed, until)) if *until > now => Some(*allowed),
            _ => None,
        };
        self.count_cache(if found.is_some() { "hit" } else { "miss" });
        found
    }

    /// Whether `who` (a verified identity; `None` when authentication is off) may watch
    /// `pool`. Fails only when RBAC cannot be asked right now.
    pub async fn may_watch(&self, who: Option<&Identity>, pool: &PoolRef) -> Result<bool, Status> {
        let (Some(who), Some(client)) = (who, &self.client) else {
            return Ok(true);
        };
        if who.namespace == pool.namespace {
            return Ok(true);
        }
        let question = (
            (who.namespace.clone(), who.service_account.clone()),
            pool.clone(),
        );
        if let Some(allowed) = self.cached(&question, Instant::now()) {
            return Ok(allowed);
        }
        let unavailable = || {
            Status::unavailable(
                "cannot check access to the pool right now (SubjectAccessReview failed); retry",
            )
        };
        let review = async {
            let _turn = self.reviews.acquire().await.map_err(|_| unavailable())?;
            if let Some(allowed) = self.cached(&question, Instant::now()) {
                return Ok(allowed);
            }
            let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
            let started = Instant::now();
            let answer = reviews
                .create(&PostParams::default(), &review_for(who, pool))
                .await;
            if let Some(m) = &self.metrics {
                m.access_review_seconds
                    .observe(started.elapsed().as_secs_f64());
            }
            match answer {
                Ok(answer) => {
                    let allowed = answer.status.is_some_and(|s| s.allowed);
                    self.count_review(if allowed { "allowed" } else { "denied" });
                    Ok(allowed)
                }
                Err(e) => {
                    self.count_review("error");
                    tracing::warn!(error = %e, %pool, "SubjectAccessReview failed");
                    Err(unavailable())
                }
            }
        };
        let allowed = match tokio::time::timeout(REVIEW_TIMEOUT, review).await {
            Ok(answer) => answer?,
            Err(_) => {
                self.count_review("timeout");
                tracing::warn!(%pool, "SubjectAccessReview timed out");
                return Err(unavailable());
            }
        };
        let now = Instant::now();
        let mut cache = self.cache.lock();
        let lifetime = if allowed {
            self.allowed_for
        } else {
            DENIED_FOR.min(self.allowed_for)
        };
        cache.put(question, (allowed, now + lifetime));
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front() -> Identity {
        Identity {
            namespace: "shop".into(),
            service_account: "front".into(),
            pod: "front-1".into(),
            pod_uid: "u".into(),
            node: None,
        }
    }

    #[test]
    fn the_review_asks_rbac_about_the_service_account_and_the_one_pool() {
        let review = review_for(&front(), &PoolRef::new("billing", "ledger"));
        let spec = review.spec;
        assert_eq!(
            spec.user.as_deref(),
            Some("system:serviceaccount:shop:front")
        );
        assert!(
            spec.groups
                .unwrap()
                .contains(&"system:serviceaccounts:shop".to_string())
        );
        let attrs = spec.resource_attributes.unwrap();
        assert_eq!(
            (
                attrs.group.as_deref(),
                attrs.resource.as_deref(),
                attrs.verb.as_deref(),
                attrs.namespace.as_deref(),
                attrs.name.as_deref()
            ),
            (
                Some("rollcall.dev"),
                Some("backendpools"),
                Some("get"),
                Some("billing"),
                Some("ledger")
            )
        );
    }

    #[tokio::test]
    async fn without_authentication_every_pool_may_be_watched() {
        let authz = Authorizer::new(&Mode::Insecure);
        assert!(
            authz
                .may_watch(Some(&front()), &PoolRef::new("billing", "x"))
                .await
                .unwrap()
        );
        assert!(
            authz
                .may_watch(None, &PoolRef::new("billing", "x"))
                .await
                .unwrap()
        );
    }
}
