//! Who a caller of the roster API is. A sidecar sends its projected ServiceAccount token
//! (audience `rollcall`) as `authorization: Bearer <token>`; the controller asks the API server
//! (`TokenReview`) and takes the pod's namespace, ServiceAccount and name/uid from the answer,
//! caching it until the token expires (at most ten minutes), so a fleet's reconnects cost a
//! review each, not one per message. Local development may switch this off (`Insecure`): then
//! the identity a caller claims in its metadata is taken at its word, as before.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio::time::Instant;
use tonic::Status;
use tonic::metadata::MetadataMap;

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
const CONCURRENT_REVIEWS: usize = 32;

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

/// Verifies tokens, with a cache of recent reviews.
pub struct Authenticator {
    mode: Mode,
    /// By SHA-256 of the token: who it is, or why it was refused, and until when.
    cache: Mutex<HashMap<Vec<u8>, (Verdict, Instant)>>,
    reviews: tokio::sync::Semaphore,
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
fn bearer(metadata: &MetadataMap) -> Option<&str> {
    metadata
        .get("authorization")
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

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The identity a successful review names, or why it names none.
pub fn identity_of(review: &TokenReview) -> Result<Identity, String> {
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
            cache: Mutex::new(HashMap::new()),
            reviews: tokio::sync::Semaphore::new(CONCURRENT_REVIEWS),
        }
    }

    pub fn insecure() -> Self {
        Self::new(Mode::Insecure)
    }

    /// Who sent this call; `None` in insecure mode (the caller's claims stand).
    pub async fn authenticate(&self, metadata: &MetadataMap) -> Result<Option<Identity>, Status> {
        let Mode::TokenReview { client, audience } = &self.mode else {
            return Ok(None);
        };
        let token = bearer(metadata).ok_or_else(|| {
            Status::unauthenticated(
                "no ServiceAccount token: send `authorization: Bearer <token>` with a projected \
                 token whose audience is rollcall",
            )
        })?;
        let key = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .to_vec();
        if let Some(known) = self.cached(&key) {
            return known.map(Some).map_err(refused);
        }
        let _turn = self
            .reviews
            .acquire()
            .await
            .map_err(|_| Status::unavailable("shutting down"))?;
        // Whoever waited for a turn may find the answer another caller got meanwhile.
        if let Some(known) = self.cached(&key) {
            return known.map(Some).map_err(refused);
        }
        let reviews: Api<TokenReview> = Api::all(client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: Some(vec![audience.clone()]),
            },
            ..Default::default()
        };
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "TokenReview failed");
                Status::unavailable("cannot verify the token right now (TokenReview failed); retry")
            })?;
        let verdict = identity_of(&answer);
        let lifetime = match &verdict {
            Ok(_) => expires(token)
                .map(|exp| Duration::from_secs(exp.saturating_sub(unix_now())))
                .unwrap_or(CACHE_FOR)
                .min(CACHE_FOR),
            Err(_) => REFUSED_FOR,
        };
        let now = Instant::now();
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (_, until)| *until > now);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(key, (verdict.clone(), now + lifetime));
        verdict.map(Some).map_err(refused)
    }

    fn cached(&self, key: &[u8]) -> Option<Verdict> {
        let cache = self.cache.lock();
        let (verdict, until) = cache.get(key)?;
        (*until > Instant::now()).then(|| verdict.clone())
    }
}

fn refused(why: String) -> Status {
    Status::unauthenticated(format!("the token was refused: {why}"))
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
                error: (!authenticated).then(|| "[invalid bearer token, token has expired]".into()),
                user: Some(UserInfo {
                    username: Some(username.into()),
                    extra: Some(extra),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_bound_service_account_token_names_the_pod() {
        let id = identity_of(&reviewed(
            true,
            "system:serviceaccount:shop:front",
            Some("front-1"),
        ))
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
            identity_of(&review).unwrap().node.as_deref(),
            Some("node-a")
        );
    }

    #[test]
    fn refusals_say_why() {
        let expired = identity_of(&reviewed(false, "", None)).unwrap_err();
        assert!(expired.contains("expired"), "{expired}");
        let user = identity_of(&reviewed(true, "alice", None)).unwrap_err();
        assert!(user.contains("not a ServiceAccount"), "{user}");
        let unbound =
            identity_of(&reviewed(true, "system:serviceaccount:shop:front", None)).unwrap_err();
        assert!(unbound.contains("not bound to a Pod"), "{unbound}");
    }

    #[test]
    fn the_expiry_of_a_jwt_is_read_without_trusting_it() {
        let claims =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"exp":4102444800}"#);
        assert_eq!(expires(&format!("h.{claims}.sig")), Some(4_102_444_800));
        assert_eq!(expires("not a jwt"), None);
        let mut md = MetadataMap::new();
        assert_eq!(bearer(&md), None);
        md.insert("authorization", "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&md), Some("abc"));
    }

    #[tokio::test]
    async fn insecure_mode_takes_callers_at_their_word() {
        let auth = Authenticator::insecure();
        assert_eq!(auth.authenticate(&MetadataMap::new()).await.unwrap(), None);
    }
}
