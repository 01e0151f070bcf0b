//! Who a caller of the roster API is. A sidecar sends its projected ServiceAccount token
//! (audience `rollcall`) as `authorization: Bearer <token>`; the controller asks the API server
//! (`TokenReview`) and takes the pod's namespace, ServiceAccount and name/uid from the answer,
//! which must name the audience it asked for. Answers are cached by the token's SHA-256 until
//! the token expires (at most ten minutes; a refusal ten seconds), least recently used first
//! out when the cache is full, so a fleet's reconnects cost a review each, not one per message,
//! and a flood of garbage tokens cannot push the fleet's answers out all at once. Every review
//! has a timeout, and at most `CONCURRENT_REVIEWS` are in flight. This runs on the request's
//! headers alone (`gate`), before any of its body is read. Local development may switch it off
//! (`Insecure`): then the identity a caller claims in its metadata is taken at its word.

use std::num::NonZeroUsize;
use std::time::Duration;

use base64::Engine as _;
use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use lru::LruCache;
use parking_lot::Mutex;
use tokio::time::Instant;
use tonic::Status;

use crate::metrics::Metrics;

/// The audience sidecar tokens are requested for (the projected volume's `audience`).
pub const AUDIENCE: &str = "rollcall";
/// Longest a review is trusted without asking again.
const CACHE_FOR: Duration = Duration::from_secs(600);
/// How long a refused token stays refused without asking again (a client retrying a bad
/// token, or sending garbage, costs the API server one review per this period).
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Reviews kept at most (a fleet of pods, each with one current token).
const CACHE_ENTRIES: usize = 50_000;
/// TokenReviews in flight at most; further callers wait their turn.
pub(super) const CONCURRENT_REVIEWS: usize = 32;
/// How long one TokenReview may take, waiting for a turn included, before the caller is told
/// to retry.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// A verified caller: a pod running as a ServiceAccount.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub namespace: String,
    pub service_account: String,
    pub pod: String,
    pub pod_uid: String,
    /// The node the pod runs on, when the token says (Kubernetes 1.30+ puts it in bound
    /// tokens); the zone lookup asks the Pod otherwise.
    pub node: Option<String>,
}

/// How callers are authenticated.
#[derive(Clone)]
pub enum Mode {
    /// `TokenReview` against the API server, for tokens with this audience.
    TokenReview { client: Client, audience: String },
    /// Local development only: every caller is who it says it is.
    Insecure,
}

/// A review's answer: who the token names, or why it was refused.
type Verdict = Result<Identity, String>;

/// Why a caller is not authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The call carries no bearer token.
    NoToken,
    /// The API server does not vouch for the token (or it names no pod); why, for a person.
    Refused(String),
    /// The token could not be checked right now (the API server failed or was too slow): not
    /// the caller's fault.
    Unavailable,
    /// The token is not known, and its source has used up its reviews for now.
    Throttled,
}

impl Refusal {
    /// The metric label of this outcome.
    pub fn label(&self) -> &'static str {
        match self {
            Self::NoToken => "no_token",
            Self::Refused(_) => "refused",
            Self::Unavailable => "unavailable",
            Self::Throttled => "throttled",
        }
    }

    /// Whether a review refused the token: what a source's review budget is charged for (a
    /// missing token costs the API server nothing).
    pub fn was_reviewed(&self) -> bool {
        matches!(self, Self::Refused(_))
    }
}

impl From<Refusal> for Status {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NoToken => Status::unauthenticated(
                "no ServiceAccount token: send `authorization: Bearer <token>` with a projected \
                 token whose audience is rollcall",
            ),
            Refusal::Refused(why) => {
                Status::unauthenticated(format!("the token was refused: {why}"))
            }
            Refusal::Unavailable => {
                Status::unavailable("cannot verify the token right now (TokenReview failed); retry")
            }
            Refusal::Throttled => Status::resource_exhausted(
                "too many refused tokens from this address: slow down, and send a valid projected \
                 ServiceAccount token (audience rollcall)",
            ),
        }
    }
}

/// Verifies tokens, with a cache of recent reviews.
pub struct Authenticator {
    mode: Mode,
    /// By SHA-256 of the token: who it is, or why it was refused, and until when.
    cache: Mutex<LruCache<[u8; 32], (Verdict, Instant)>>,
    reviews: tokio::sync::Semaphore,
    metrics: Option<Metrics>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.mode {
            Mode::TokenReview { .. } => "TokenReview",
            Mode::Insecure => "Insecure",
        };
        f.debug_struct("Authenticator")
            .field("mode", &mode)
            .finish()
    }
}

/// The bearer token of a call, if it sent one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// The `exp` claim of a JWT, read without verifying it (the review verifies; this only bounds
/// how long its answer is cached).
fn expires(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice::<serde_json::Value>(&raw).ok()?["exp"].as_u64()
}

/// When the bearer token of these headers expires, as the token says (unverified: used only
/// to end a stream no later than that, after the token was verified), Unix seconds.
pub fn token_expiry(headers: &HeaderMap) -> Option<u64> {
    expires(bearer(headers)?)
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The identity a successful review names, or why it names none. `audience` must be among
/// the audiences the API server says the token is valid for (an API server that ignores the
/// requested audiences would otherwise let any token of the cluster in).
pub fn identity_of(review: &TokenReview, audience: &str) -> Result<Identity, String> {
    let status = review
        .status
        .as_ref()
        .ok_or("the TokenReview has no status")?;
    if status.authenticated != Some(true) {
        return Err(status
            .error
            .clone()
            .unwrap_or_else(|| "the token is not valid".into()));
    }
    if !status
        .audiences
        .as_ref()
        .is_some_and(|a| a.iter().any(|a| a == audience))
    {
        return Err(format!(
            "the token is not valid for the audience {audience}: request it with \
             `audience: {audience}` in the projected volume"
        ));
    }
    let user = status.user.as_ref().ok_or("the review names no user")?;
    let username = user.username.as_deref().unwrap_or("");
    let Some(rest) = username.strip_prefix("system:serviceaccount:") else {
        return Err(format!("{username} is not a ServiceAccount"));
    };
    let (namespace, service_account) = rest
        .split_once(':')
        .ok_or_else(|| format!("cannot read the ServiceAccount of {username}"))?;
    let extra = |key: &str| {
        user.extra
            .as_ref()
            .and_then(|e| e.get(key))
            .and_then(|v| v.first())
            .cloned()
    };
    let pod = extra("authentication.kubernetes.io/pod-name").ok_or(
        "the token is not bound to a Pod: mount a projected ServiceAccount token (audience rollcall)",
    )?;
    Ok(Identity {
        namespace: namespace.into(),
        service_account: service_account.into(),
        pod,
        pod_uid: extra("authentication.kubernetes.io/pod-uid").unwrap_or_default(),
        node: extra("authentication.kubernetes.io/node-name").filter(|n| !n.is_empty()),
    })
}

// === impl Authenticator ===

impl Authenticator {
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(CACHE_ENTRIES).unwrap_or(NonZeroUsize::MIN),
            )),
            reviews: tokio::sync::Semaphore::new(CONCURRENT_REVIEWS),
            metrics: None,
        }
    }

    /// The same, counting reviews and cache hits in `metrics`.
    pub fn with_metrics(mode: Mode, metrics: Metrics) -> Self {
        Self {
            metrics: Some(metrics),
            ..Self::new(mode)
        }
    }

    pub fn insecure() -> Self {
        Self::new(Mode::Insecure)
    }

    /// Whether callers are taken at their word (local development).
    pub fn is_insecure(&self) -> bool {
        matches!(self.mode, Mode::Insecure)
    }

    /// Who sent a call with these headers; `None` in insecure mode (the caller's claims stand).
    /// A token not in the cache is reviewed only when `may_review()` says so, asked when its
    /// turn among the reviews in flight comes (the caller's source may have to reserve one
    /// review of its budget of refused tokens; it is not asked when the cache answers).
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        may_review: impl FnOnce() -> bool,
    ) -> Result<Option<Identity>, Refusal> {
        let Mode::TokenReview { client, audience } = &self.mode else {
            return Ok(None);
        };
        let token = bearer(headers).ok_or(Refusal::NoToken)?;
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .map_err(|_| Refusal::Unavailable)?;
        if let Some(known) = self.cached(&key) {
            return known.map(Some).map_err(Refusal::Refused);
        }
        let review = async {
            let _turn = self
                .reviews
                .acquire()
                .await
                .map_err(|_| Refusal::Unavailable)?;
            // Whoever waited for a turn may find the answer another caller got meanwhile.
            if let Some(known) = self.cached(&key) {
                return Ok::<_, Refusal>(Some(known));
            }
            // Asked only now, at the moment of sending: callers queued behind the turns see the
            // refusals of those ahead of them.
            if !may_review() {
                return Err(Refusal::Throttled);
            }
            Ok(self.review(client, audience, token).await)
        };
        let verdict = match tokio::time::timeout(REVIEW_TIMEOUT, review).await {
            Ok(Ok(Some(verdict))) => verdict,
            Ok(Err(refusal)) => return Err(refusal),
            Ok(Ok(None)) => return Err(Refusal::Unavailable),
            Err(_) => {
                self.count_review("timeout");
                tracing::warn!(timeout = ?REVIEW_TIMEOUT, "TokenReview timed out");
                return Err(Refusal::Unavailable);
            }
        };
        let lifetime = match &verdict {
            Ok(_) => expires(token)
                .map(|exp| Duration::from_secs(exp.saturating_sub(unix_now())))
                .unwrap_or(CACHE_FOR)
                .min(CACHE_FOR),
            Err(_) => REFUSED_FOR,
        };
        self.cache
            .lock()
            .put(key, (verdict.clone(), Instant::now() + lifetime));
        verdict.map(Some).map_err(Refusal::Refused)
    }

    /// One TokenReview: the verdict, or `None` when the API server could not answer.
    async fn review(&self, client: &Client, audience: &str, token: &str) -> Option<Verdict> {
        let reviews: Api<TokenReview> = Api::all(client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: Some(vec![audience.to_string()]),
            },
            ..Default::default()
        };
        let started = Instant::now();
        let answer = reviews.create(&PostParams::default(), &review).await;
        if let Some(m) = &self.metrics {
            m.token_review_seconds
                .observe(started.elapsed().as_secs_f64());
        }
        match answer {
            Ok(answer) => {
                let verdict = identity_of(&answer, audience);
                self.count_review(if verdict.is_ok() {
                    "authenticated"
                } else {
                    "refused"
                });
                Some(verdict)
            }
            Err(error) => {
                self.count_review("error");
                tracing::warn!(%error, "TokenReview failed");
                None
            }
        }
    }

    fn count_review(&self, result: &str) {
        if let Some(m) = &self.metrics {
            m.token_reviews.with_label_values(&[result]).inc();
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Verdict> {
        let now = Instant::now();
        let found = {
            let mut cache = self.cache.lock();
            match cache.get(key) {
                Some((verdict, until)) if *until > now => Some(verdict.clone()),
                Some(_) => {
                    cache.pop(key);
                    None
                }
                None => None,
            }
        };
        if let Some(m) = &self.metrics {
            let result = if found.is_some() { "hit" } else { "miss" };
            m.review_cache.with_label_values(&["token", result]).inc();
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};

    use super::*;

    fn reviewed(authenticated: bool, username: &str, pod: Option<&str>) -> TokenReview {
        let mut extra = BTreeMap::new();
        if let Some(pod) = pod {
            extra.insert(
                "authentication.kubernetes.io/pod-name".to_string(),
                vec![pod.to_string()],
            );
            extra.insert(
                "authentication.kubernetes.io/pod-uid".to_string(),
                vec!["u-1".to_string()],
            );
        }
        TokenReview {
            status: Some(TokenReviewStatus {
                authenticated: Some(authenticated),
                audiences: Some(vec![AUDIENCE.into()]),
                error: (!authenticated).then(|| "[invalid bearer token, token has expired]".into()),
                user: Some(UserInfo {
                    username: Some(username.into()),
                    extra: Some(extra),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_bound_service_account_token_names_the_pod() {
        let id = identity_of(
            &reviewed(true, "system:serviceaccount:shop:front", Some("front-1")),
            AUDIENCE,
        )
        .unwrap();
        assert_eq!(
            id,
            Identity {
                namespace: "shop".into(),
                service_account: "front".into(),
                pod: "front-1".into(),
                pod_uid: "u-1".into(),
                node: None,
            }
        );
    }

    #[test]
    fn a_token_that_names_its_node_gives_the_node() {
        let mut review = reviewed(true, "system:serviceaccount:shop:front", Some("front-1"));
        let user = review
            .status
            .as_mut()
            .and_then(|s| s.user.as_mut())
            .unwrap();
        user.extra.as_mut().unwrap().insert(
            "authentication.kubernetes.io/node-name".into(),
            vec!["node-a".into()],
        );
        assert_eq!(
            identity_of(&review, AUDIENCE).unwrap().node.as_deref(),
            Some("node-a")
        );
    }

    #[test]
    fn refusals_say_why() {
        let expired = identity_of(&reviewed(false, "", None), AUDIENCE).unwrap_err();
        assert!(expired.contains("expired"), "{expired}");
        let user = identity_of(&reviewed(true, "alice", None), AUDIENCE).unwrap_err();
        assert!(user.contains("not a ServiceAccount"), "{user}");
        let unbound = identity_of(
            &reviewed(true, "system:serviceaccount:shop:front", None),
            AUDIENCE,
        )
        .unwrap_err();
        assert!(unbound.contains("not bound to a Pod"), "{unbound}");
    }

    #[test]
    fn a_review_that_does_not_name_our_audience_is_a_refusal() {
        let mut review = reviewed(true, "system:serviceaccount:shop:front", Some("front-1"));
        let status = review.status.as_mut().unwrap();
        status.audiences = Some(vec!["https://kubernetes.default.svc".into()]);
        let wrong = identity_of(&review, AUDIENCE).unwrap_err();
        assert!(wrong.contains("audience rollcall"), "{wrong}");
        review.status.as_mut().unwrap().audiences = None;
        assert!(identity_of(&review, AUDIENCE).is_err());
    }

    #[test]
    fn the_expiry_of_a_jwt_is_read_without_trusting_it() {
        let claims =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"exp":4102444800}"#);
        assert_eq!(expires(&format!("h.{claims}.sig")), Some(4_102_444_800));
        assert_eq!(expires("not a jwt"), None);
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert("authorization", "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&headers), Some("abc"));
    }

    #[tokio::test]
    async fn insecure_mode_takes_callers_at_their_word() {
        let auth = Authenticator::insecure();
        assert_eq!(
            auth.authenticate(&HeaderMap::new(), || true).await.unwrap(),
            None
        );
    }
}
