//! What every roster request passes before any of its body is read. The caller's token is
//! checked from the request's headers (`auth`); a TokenReview is reserved from its source's
//! budget of refused tokens before it is sent (`throttle`), so a source that keeps sending bad
//! tokens gets no more reviews for a while however many it sends at once (tokens already
//! verified still pass), and its connection is closed; a connection holds a slot among those
//! not yet authenticated until its first request authenticates; one pod may hold only a few
//! connections; and each method's messages may declare only so many bytes (`frame_limit`). A
//! connection that authenticates nothing for a while is closed (`transport`). Without this,
//! tonic read and decoded a whole request (reserving the declared size, up to its limit) before
//! the handler looked at the token: 32 unauthenticated streams declaring 3.9 MiB each grew the
//! controller by over 100 MiB.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::HeaderMap;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Status;

use super::Limits;
use super::auth::{Authenticator, Identity, Refusal};
use super::sessions::PodKey;
use super::throttle::{Crowded, PendingSlot, Reservation, Throttle};
use crate::metrics::Metrics;

/// Connections one pod may hold at once (a sidecar needs one; a reconnect briefly two).
pub const CONNECTIONS_PER_POD: usize = 4;
/// A connection on which nothing authenticates within this time is closed.
pub const UNAUTHENTICATED_CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection lives at most about this long (jittered by up to a tenth either way, so a
/// fleet that connected together does not reconnect together): its streams then end with
/// UNAVAILABLE and the sidecar reconnects, so every stream re-proves its token and its grants
/// at least this often.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(30 * 60);

/// What a stream ends with when its connection reached its maximum age.
pub const CONNECTION_AGED: &str =
    "the connection reached its maximum age; reconnect (each connection re-proves its token)";
/// What a stream ends with when the token it was admitted with expires.
pub const TOKEN_EXPIRED: &str =
    "the ServiceAccount token of this stream expired; reconnect with the current one";

/// Put in a request's extensions once it passed the gate: who the token names (`None` when
/// authentication is off), until when the token is good, and the connection's end.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub identity: Option<Identity>,
    /// When the token expires, as it says (only with authentication on).
    pub token_expires: Option<Instant>,
    connection_ends: watch::Receiver<bool>,
}

impl Admitted {
    /// A request admitted without a gate.
    #[cfg(test)]
    pub fn without_gate(identity: Option<Identity>) -> Self {
        Self {
            identity,
            token_expires: None,
            connection_ends: watch::channel(false).1,
        }
    }

    /// Resolves with the status a stream of this request must end with, and the metric label
    /// of why: the connection is closing (its age, or the gate closed it), or the token expired.
    pub async fn must_end(&self) -> (Status, &'static str) {
        let mut ends = self.connection_ends.clone();
        let connection = async {
            if ends.wait_for(|e| *e).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let expiry = async {
            match self.token_expires {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = connection => (Status::unavailable(CONNECTION_AGED), "max_age"),
            () = expiry => (Status::unauthenticated(TOKEN_EXPIRED), "token_expired"),
        }
    }
}

/// The admission state every connection shares.
#[derive(Debug)]
pub struct Gate {
    auth: Arc<Authenticator>,
    limits: Limits,
    metrics: Metrics,
    throttle: Arc<Throttle>,
    pods: Mutex<HashMap<PodKey, usize>>,
}

impl Gate {
    pub fn new(auth: Arc<Authenticator>, limits: Limits, metrics: Metrics) -> Arc<Self> {
        Arc::new(Self {
            auth,
            limits,
            metrics,
            throttle: Throttle::new(limits.pending),
            pods: Mutex::default(),
        })
    }

    /// A place for a connection just accepted from `peer` (before its TLS handshake) among
    /// those not yet authenticated; `None` (counted) when its source or everyone holds too
    /// many: the caller closes it at once.
    pub fn accept(&self, peer: Option<SocketAddr>) -> Option<PendingSlot> {
        match self.throttle.hold(peer.map(|p| p.ip())) {
            Ok(slot) => Some(slot),
            Err(crowded) => {
                self.refused_connection(crowded);
                None
            }
        }
    }

    fn refused_connection(&self, crowded: Crowded) {
        self.metrics
            .connections_refused
            .with_label_values(&[crowded.label()])
            .inc();
    }

    /// The admission state of one new connection from `peer`, holding `slot` until a request
    /// on it authenticates.
    pub fn connection(
        self: &Arc<Self>,
        peer: Option<SocketAddr>,
        slot: PendingSlot,
    ) -> ConnectionGate {
        let insecure = self.auth.is_insecure();
        ConnectionGate {
            gate: self.clone(),
            peer: peer.map(|p| p.ip()),
            pod: Mutex::new(None),
            close: watch::channel(false).0,
            authenticated: AtomicBool::new(insecure),
            // Without authentication a connection is as good as authenticated once it is up.
            pending: Mutex::new((!insecure).then_some(slot)),
        }
    }

    /// The largest message a request to `path` may declare.
    pub fn message_limit(&self, path: &str) -> usize {
        self.limits.message_limit(path)
    }

    fn count(&self, result: &str) {
        self.metrics
            .authentications
            .with_label_values(&[result])
            .inc();
    }
}

/// One connection's admission state: the pod it belongs to, and a signal that it should close.
#[derive(Debug)]
pub struct ConnectionGate {
    gate: Arc<Gate>,
    peer: Option<IpAddr>,
    /// The pod this connection counts against: the first one that authenticated on it.
    pod: Mutex<Option<PodKey>>,
    close: watch::Sender<bool>,
    authenticated: AtomicBool,
    /// Its place among the connections not yet authenticated, until one of its requests is.
    pending: Mutex<Option<PendingSlot>>,
}

impl ConnectionGate {
    /// Admit a request with these headers, or say why not. Called before its body is touched.
    /// A token refused costs its source one review from its budget of refused tokens; once it
    /// has had one refused, each further review is reserved when it is sent and given back
    /// unless the token is refused; a source with none left is refused without a review and its
    /// connection closed, while tokens already verified (a real sidecar's behind the same
    /// address) still pass.
    pub async fn admit(&self, headers: &HeaderMap) -> Result<Admitted, Status> {
        let now = Instant::now();
        let reserved = AtomicBool::new(false);
        let reserve = || match self.peer {
            None => true,
            Some(source) => match self.gate.throttle.reserve(source, Instant::now()) {
                Reservation::Free => true,
                Reservation::Reserved => {
                    reserved.store(true, Ordering::Relaxed);
                    true
                }
                Reservation::Denied => false,
            },
        };
        let outcome = self.gate.auth.authenticate(headers, reserve).await;
        if let Some(source) = self.peer {
            let refused = matches!(&outcome, Err(r) if r.was_reviewed());
            match (reserved.load(Ordering::Relaxed), refused) {
                // The review it paid for refused the token: spent.
                (true, true) => {}
                // Good, or the API server could not say: not the caller's fault.
                (true, false) => self.gate.throttle.refund(source, Instant::now()),
                // Refused with nothing reserved (a clean source's review, or the cache's
                // answer): charged, so repeating a bad token throttles.
                (false, true) => self.gate.throttle.charge(source, Instant::now()),
                (false, false) => {}
            }
        }
        let identity = match outcome {
            Ok(identity) => identity,
            Err(refusal) => {
                self.gate.count(refusal.label());
                if refusal == Refusal::Throttled {
                    self.close();
                }
                return Err(refusal.into());
            }
        };
        if let Some(id) = &identity
            && !self.bind((id.namespace.clone(), id.pod.clone()))
        {
            self.gate.count("too_many_connections");
            self.close();
            return Err(Status::resource_exhausted(format!(
                "pod {}/{} already holds {CONNECTIONS_PER_POD} connections to the controller; \
                 one is enough",
                id.namespace, id.pod
            )));
        }
        self.authenticated.store(true, Ordering::Relaxed);
        self.pending.lock().take();
        self.gate.count("accepted");
        let token_expires = identity
            .as_ref()
            .and(super::auth::token_expiry(headers))
            .map(|exp| now + Duration::from_secs(exp.saturating_sub(super::auth::unix_now())));
        Ok(Admitted {
            identity,
            token_expires,
            connection_ends: self.close.subscribe(),
        })
    }

    /// Count this connection against `pod` (once: later identities on it count nothing).
    /// False when the pod holds too many already.
    fn bind(&self, pod: PodKey) -> bool {
        let mut bound = self.pod.lock();
        if bound.is_some() {
            return true;
        }
        let mut pods = self.gate.pods.lock();
        let held = pods.entry(pod.clone()).or_default();
        if *held >= CONNECTIONS_PER_POD {
            return false;
        }
        *held += 1;
        *bound = Some(pod);
        true
    }

    /// Whether anything authenticated on this connection yet.
    pub fn authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Relaxed)
    }

    /// Ask the connection to close: it stops taking streams, and those it has end.
    pub fn close(&self) {
        self.close.send_replace(true);
    }

    /// Resolves once the connection should close.
    pub async fn closing(&self) {
        let mut rx = self.close.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// The largest message a request to `path` may declare.
    pub fn message_limit(&self, path: &str) -> usize {
        self.gate.message_limit(path)
    }

    /// Count a message refused before it was read.
    pub fn refused_message(&self) {
        self.gate
            .metrics
            .messages_refused
            .with_label_values(&["too_large"])
            .inc();
    }
}

impl Drop for ConnectionGate {
    fn drop(&mut self) {
        if let Some(pod) = self.pod.get_mut().take() {
            let mut pods = self.gate.pods.lock();
            if let Some(held) = pods.get_mut(&pod) {
                *held = held.saturating_sub(1);
                if *held == 0 {
                    pods.remove(&pod);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::auth::CONCURRENT_REVIEWS;
    use super::super::throttle::{FAILURE_BURST, FAILURES_PER_SECOND};
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stream_must_end_when_its_token_expires_or_its_connection_closes() {
        let gate = Gate::new(
            Arc::new(Authenticator::insecure()),
            Limits::default(),
            Metrics::new().unwrap(),
        );
        let connection = gate.connection(None, PendingSlot::unbounded());
        let admitted = Admitted {
            identity: None,
            token_expires: Some(Instant::now() + Duration::from_secs(90)),
            connection_ends: connection.close.subscribe(),
        };
        let started = Instant::now();
        let (status, why) = admitted.must_end().await;
        assert_eq!(started.elapsed(), Duration::from_secs(90));
        assert_eq!(
            (status.code(), status.message(), why),
            (tonic::Code::Unauthenticated, TOKEN_EXPIRED, "token_expired")
        );

        let forever = Admitted {
            token_expires: None,
            ..admitted.clone()
        };
        let ending = tokio::spawn(async move { forever.must_end().await });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!ending.is_finished(), "no expiry, connection open: goes on");
        connection.close();
        let (status, why) = ending.await.unwrap();
        assert_eq!((status.code(), why), (tonic::Code::Unavailable, "max_age"));
        // Without a gate, nothing ends it.
        let alone = Admitted::without_gate(None);
        assert!(
            tokio::time::timeout(Duration::from_secs(86_400), alone.must_end())
                .await
                .is_err()
        );
    }

    /// A gate whose TokenReviews go to a mock API server that refuses every token (after
    /// `delay`, so callers pile up), and the number of reviews it was sent.
    fn refusing_gate(delay: Duration) -> (Arc<Gate>, Arc<std::sync::atomic::AtomicUsize>) {
        mock_gate(delay, |_| None)
    }

    /// A gate whose mock API server answers each TokenReview (after `delay`) with `verdict` of
    /// the token: the pod it is bound to, or `None` to refuse it.
    fn mock_gate(
        delay: Duration,
        verdict: fn(&str) -> Option<String>,
    ) -> (Arc<Gate>, Arc<std::sync::atomic::AtomicUsize>) {
        use http::{Request, Response};
        use kube::client::Body;
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let reviews = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = reviews.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                assert!(
                    request.uri().path().ends_with("/tokenreviews"),
                    "{request:?}"
                );
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    use http_body_util::BodyExt;
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let asked: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    let token = asked["spec"]["token"].as_str().unwrap_or_default();
                    let status = match verdict(token) {
                        None => serde_json::json!({
                            "authenticated": false, "error": "invalid bearer token"}),
                        Some(pod) => serde_json::json!({
                            "authenticated": true, "audiences": ["rollcall"],
                            "user": {"username": "system:serviceaccount:shop:client",
                                     "extra": {"authentication.kubernetes.io/pod-name": [pod],
                                               "authentication.kubernetes.io/pod-uid": ["u"]}}}),
                    };
                    tokio::time::sleep(delay).await;
                    let answer = serde_json::json!({
                        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "status": status});
                    send.send_response(
                        Response::builder()
                            .body(Body::from(answer.to_string().into_bytes()))
                            .unwrap(),
                    );
                });
            }
        });
        let mode = super::super::auth::Mode::TokenReview {
            client: kube::Client::new(svc, "default"),
            audience: "rollcall".into(),
        };
        let gate = Gate::new(
            Arc::new(Authenticator::new(mode)),
            Limits::default(),
            Metrics::new().unwrap(),
        );
        (gate, reviews)
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        headers
    }

    #[tokio::test(start_paused = true)]
    async fn bad_tokens_sent_at_once_from_one_source_cost_the_reviews_in_flight_then_nothing() {
        let (gate, reviews) = refusing_gate(Duration::from_millis(200));
        let peer: SocketAddr = "10.0.0.9:40000".parse().unwrap();
        // 20 connections x 5 requests, all in flight before any review is answered.
        let connections: Vec<_> = (0..20)
            .map(|_| gate.connection(Some(peer), PendingSlot::unbounded()))
            .collect();
        let admits = connections.iter().enumerate().flat_map(|(c, connection)| {
            (0..5).map(move |r| async move {
                connection.admit(&bearer(&format!("forged-{c}-{r}"))).await
            })
        });
        let outcomes = futures_util::future::join_all(admits).await;
        let codes: Vec<tonic::Code> = outcomes
            .iter()
            .map(|o| o.as_ref().map_or_else(Status::code, |_| tonic::Code::Ok))
            .collect();
        let count = |code| codes.iter().filter(|c| **c == code).count();
        // The first wave (as many as may be in flight) is reviewed: the source had no refusal
        // yet. Their refusals spend its burst, and every caller queued behind them is refused
        // without a review when its turn comes.
        let wave = CONCURRENT_REVIEWS;
        assert!(wave > FAILURE_BURST as usize);
        assert_eq!(reviews.load(Ordering::SeqCst), wave);
        assert_eq!(count(tonic::Code::Unauthenticated), wave);
        assert_eq!(count(tonic::Code::ResourceExhausted), 100 - wave);
        // Another source still gets its reviews; this one earns one back per half second.
        let other: SocketAddr = "10.0.0.10:40000".parse().unwrap();
        let fresh = gate.connection(Some(other), PendingSlot::unbounded());
        let refused = fresh.admit(&bearer("forged-other")).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        tokio::time::sleep(Duration::from_secs_f64(1.0 / FAILURES_PER_SECOND)).await;
        let again = gate.connection(Some(peer), PendingSlot::unbounded());
        let refused = again.admit(&bearer("forged-later")).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        assert_eq!(reviews.load(Ordering::SeqCst), wave + 2);
    }

    #[tokio::test(start_paused = true)]
    async fn good_tokens_sent_at_once_from_one_source_are_all_admitted() {
        // Many pods behind one address (SNAT, or a fleet reconnecting to a new leader): no
        // refusal, so nothing is reserved and nobody is throttled for being many.
        let (gate, reviews) =
            mock_gate(Duration::from_millis(200), |token| Some(token.to_string()));
        let peer: SocketAddr = "10.0.0.9:40000".parse().unwrap();
        let connections: Vec<_> = (0..200)
            .map(|_| gate.connection(Some(peer), PendingSlot::unbounded()))
            .collect();
        let admits =
            connections
                .iter()
                .enumerate()
                .map(|(i, connection)| async move {
                    connection.admit(&bearer(&format!("pod-{i}"))).await
                });
        let outcomes = futures_util::future::join_all(admits).await;
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        assert_eq!(reviews.load(Ordering::SeqCst), 200);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_gives_back_its_pending_place_when_a_request_on_it_authenticates() {
        let gate = Gate::new(
            Arc::new(Authenticator::insecure()),
            Limits::default(),
            Metrics::new().unwrap(),
        );
        let peer: SocketAddr = "10.0.0.9:40000".parse().unwrap();
        let slot = gate.accept(Some(peer)).unwrap();
        assert_eq!(gate.throttle.pending(), 1);
        // Without authentication a connection holds no place once it is up.
        let connection = gate.connection(Some(peer), slot);
        assert_eq!(gate.throttle.pending(), 0);
        drop(connection);

        let (gate, _) = refusing_gate(Duration::ZERO);
        let slot = gate.accept(Some(peer)).unwrap();
        let connection = gate.connection(Some(peer), slot);
        assert!(connection.admit(&bearer("forged")).await.is_err());
        assert_eq!(
            gate.throttle.pending(),
            1,
            "a refused request does not free it"
        );
        drop(connection);
        assert_eq!(gate.throttle.pending(), 0, "closing does");
        let limits = gate.limits.pending;
        let held: Vec<_> = (0..limits.per_source)
            .map(|_| gate.accept(Some(peer)).unwrap())
            .collect();
        assert!(gate.accept(Some(peer)).is_none());
        let crowded = gate
            .metrics
            .connections_refused
            .with_label_values(&["source_unauthenticated"])
            .get();
        assert_eq!(crowded, 1);
        drop(held);
    }

    #[test]
    fn a_pod_holds_a_bounded_number_of_connections_and_gets_them_back_when_they_close() {
        let gate = Gate::new(
            Arc::new(Authenticator::insecure()),
            Limits::default(),
            Metrics::new().unwrap(),
        );
        let pod: PodKey = ("shop".into(), "client-a".into());
        let mut open: Vec<ConnectionGate> = (0..CONNECTIONS_PER_POD)
            .map(|_| {
                let c = gate.connection(None, PendingSlot::unbounded());
                assert!(c.bind(pod.clone()));
                assert!(c.bind(pod.clone()), "binding twice counts once");
                c
            })
            .collect();
        let extra = gate.connection(None, PendingSlot::unbounded());
        assert!(!extra.bind(pod.clone()));
        assert!(
            gate.connection(None, PendingSlot::unbounded())
                .bind(("shop".into(), "client-b".into())),
            "another pod is not charged"
        );
        open.pop();
        assert!(extra.bind(pod.clone()));
        drop(open);
        drop(extra);
        assert!(gate.pods.lock().is_empty());
    }
}
