//! What every roster request passes before any of its body is read. The caller's token is
//! checked from the request's headers (`auth`); a source address that keeps sending refused
//! tokens gets no more reviews for a while (tokens already verified still pass), and its
//! connection is closed; one pod
//! may hold only a few connections; and each method's messages may declare only so many bytes,
//! refused on the gRPC length prefix as it arrives, before tonic reserves room for the message
//! it announces. A connection that authenticates nothing for a while is closed (`transport`).
//! Without this, tonic read and decoded a whole request (reserving the declared size, up to its
//! limit) before the handler looked at the token: 32 unauthenticated streams declaring 3.9 MiB
//! each grew the controller by over 100 MiB.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Status;

use super::Limits;
use super::auth::{Authenticator, Identity, Refusal};
use super::sessions::PodKey;
use crate::metrics::Metrics;

/// A source may have this many tokens refused by TokenReview in a burst...
const FAILURE_BURST: f64 = 20.0;
/// ...and then this many a second. A sidecar with a stale token is refused once per
/// reconnect; only a client sending garbage runs out. So a source costs the API server at most
/// this many reviews a second for bad tokens, however fast it sends them.
const FAILURES_PER_SECOND: f64 = 2.0;
/// Sources whose failures are remembered at most. When full, the one that failed longest ago
/// is forgotten.
const SOURCES: usize = 10_000;
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

/// A source's failed authentications, as a token bucket.
#[derive(Clone, Copy, Debug)]
struct Budget {
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn full(now: Instant) -> Self {
        Self {
            tokens: FAILURE_BURST,
            at: now,
        }
    }

    fn refilled(self, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        (self.tokens + elapsed * FAILURES_PER_SECOND).min(FAILURE_BURST)
    }
}

/// The admission state every connection shares.
#[derive(Debug)]
pub struct Gate {
    auth: Arc<Authenticator>,
    limits: Limits,
    metrics: Metrics,
    failures: Mutex<HashMap<IpAddr, Budget>>,
    pods: Mutex<HashMap<PodKey, usize>>,
}

impl Gate {
    pub fn new(auth: Arc<Authenticator>, limits: Limits, metrics: Metrics) -> Arc<Self> {
        Arc::new(Self {
            auth,
            limits,
            metrics,
            failures: Mutex::default(),
            pods: Mutex::default(),
        })
    }

    /// The admission state of one new connection from `peer`.
    pub fn connection(self: &Arc<Self>, peer: Option<SocketAddr>) -> ConnectionGate {
        ConnectionGate {
            gate: self.clone(),
            peer: peer.map(|p| p.ip()),
            pod: Mutex::new(None),
            close: watch::channel(false).0,
            authenticated: AtomicBool::new(self.auth.is_insecure()),
        }
    }

    /// The largest message a request to `path` may declare.
    pub fn message_limit(&self, path: &str) -> usize {
        self.limits.message_limit(path)
    }

    /// Whether `source` has no failures left to spend.
    fn throttled(&self, source: IpAddr, now: Instant) -> bool {
        self.failures
            .lock()
            .get(&source)
            .is_some_and(|b| b.refilled(now) < 1.0)
    }

    /// Charge one failed authentication to `source`.
    fn failed(&self, source: IpAddr, now: Instant) {
        let mut failures = self.failures.lock();
        if failures.len() >= SOURCES && !failures.contains_key(&source) {
            failures.retain(|_, b| b.refilled(now) < FAILURE_BURST);
            if failures.len() >= SOURCES
                && let Some(oldest) = failures.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| *k)
            {
                failures.remove(&oldest);
            }
        }
        let budget = failures.entry(source).or_insert_with(|| Budget::full(now));
        *budget = Budget {
            tokens: (budget.refilled(now) - 1.0).max(0.0),
            at: now,
        };
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
}

impl ConnectionGate {
    /// Admit a request with these headers, or say why not. Called before its body is touched.
    /// A source that keeps sending refused tokens is throttled: a token the cache does not
    /// know is then refused without a review and the connection closed, while tokens already
    /// verified (a real sidecar's behind the same address) still pass.
    pub async fn admit(&self, headers: &HeaderMap) -> Result<Admitted, Status> {
        let now = Instant::now();
        let may_review = self
            .peer
            .is_none_or(|source| !self.gate.throttled(source, now));
        let identity = match self.gate.auth.authenticate(headers, may_review).await {
            Ok(identity) => identity,
            Err(refusal) => {
                self.gate.count(refusal.label());
                if refusal.was_reviewed()
                    && let Some(source) = self.peer
                {
                    self.gate.failed(source, now);
                }
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

/// Where the reader of a gRPC body stands: inside a 5-byte length prefix, or inside a message
/// with so many bytes left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Prefix { read: usize, len: [u8; 4] },
    Message { left: usize },
}

/// A request body whose gRPC messages may declare at most `limit` bytes each: the first
/// prefix that declares more ends the body with OUT_OF_RANGE, which tonic passes on to the
/// caller, before it has reserved anything for the message.
pub struct SizeGuarded {
    inner: UnsyncBoxBody<Bytes, hyper::Error>,
    limit: usize,
    framing: Framing,
    on_refusal: Option<Box<dyn FnOnce() + Send>>,
}

impl SizeGuarded {
    pub fn new(
        inner: UnsyncBoxBody<Bytes, hyper::Error>,
        limit: usize,
        on_refusal: impl FnOnce() + Send + 'static,
    ) -> Self {
        Self {
            inner,
            limit,
            framing: Framing::Prefix {
                read: 0,
                len: [0; 4],
            },
            on_refusal: Some(Box::new(on_refusal)),
        }
    }

    /// Follow the framing over `data`; the size a prefix declared when it is over the limit.
    pub(crate) fn check(&mut self, mut data: &[u8]) -> Result<(), usize> {
        while !data.is_empty() {
            match &mut self.framing {
                Framing::Message { left } => {
                    let n = (*left).min(data.len());
                    *left -= n;
                    data.advance(n);
                    if *left == 0 {
                        self.framing = Framing::Prefix {
                            read: 0,
                            len: [0; 4],
                        };
                    }
                }
                Framing::Prefix { read, len } => {
                    // Byte 0 is the compression flag, bytes 1-4 the length, big-endian.
                    if *read > 0 {
                        len[*read - 1] = data[0];
                    }
                    *read += 1;
                    data.advance(1);
                    if *read == 5 {
                        let declared = u32::from_be_bytes(*len) as usize;
                        if declared > self.limit {
                            return Err(declared);
                        }
                        self.framing = if declared == 0 {
                            Framing::Prefix {
                                read: 0,
                                len: [0; 4],
                            }
                        } else {
                            Framing::Message { left: declared }
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

impl Body for SizeGuarded {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(data) = frame.data_ref()
            && let Err(declared) = self.check(data)
        {
            if let Some(count) = self.on_refusal.take() {
                count();
            }
            let limit = self.limit;
            return Poll::Ready(Some(Err(Box::new(Status::out_of_range(format!(
                "a message of {declared} bytes is over this method's limit of {limit} bytes"
            ))))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Full};

    use super::*;

    fn prefix(len: u32) -> Vec<u8> {
        let mut p = vec![0];
        p.extend_from_slice(&len.to_be_bytes());
        p
    }

    fn guarded(chunks: Vec<Vec<u8>>, limit: usize) -> SizeGuarded {
        let stream = futures_util::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, hyper::Error>(Frame::data(Bytes::from(c)))),
        );
        let body = http_body_util::StreamBody::new(stream);
        SizeGuarded::new(UnsyncBoxBody::new(body), limit, || {})
    }

    async fn read_all(mut body: SizeGuarded) -> Result<Vec<u8>, Status> {
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => out.extend_from_slice(f.data_ref().map_or(&[][..], |d| d)),
                Err(e) => return Err(*e.downcast::<Status>().unwrap()),
            }
        }
        Ok(out)
    }

    #[tokio::test]
    async fn messages_within_the_limit_pass_whole_however_the_bytes_are_cut() {
        let mut wire = prefix(3);
        wire.extend_from_slice(b"abc");
        wire.extend(prefix(0));
        wire.extend(prefix(8));
        wire.extend_from_slice(b"12345678");
        // Every way of cutting the bytes in two, and one byte at a time.
        for cut in 0..=wire.len() {
            let chunks = vec![wire[..cut].to_vec(), wire[cut..].to_vec()];
            assert_eq!(read_all(guarded(chunks, 8)).await.unwrap(), wire);
        }
        let bytes = wire.iter().map(|b| vec![*b]).collect();
        assert_eq!(read_all(guarded(bytes, 8)).await.unwrap(), wire);
    }

    #[tokio::test]
    async fn a_prefix_declaring_more_than_the_limit_ends_the_body_before_its_message() {
        let mut wire = prefix(2);
        wire.extend_from_slice(b"ok");
        wire.extend(prefix(4_000_000));
        // The prefix split across pieces, and no byte of the message sent.
        let chunks = vec![wire[..9].to_vec(), wire[9..].to_vec()];
        let refused = std::sync::Arc::new(AtomicBool::new(false));
        let seen = refused.clone();
        let stream = futures_util::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, hyper::Error>(Frame::data(Bytes::from(c)))),
        );
        let body = SizeGuarded::new(
            UnsyncBoxBody::new(http_body_util::StreamBody::new(stream)),
            65_536,
            move || seen.store(true, Ordering::Relaxed),
        );
        let status = read_all(body).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::OutOfRange);
        assert!(status.message().contains("4000000 bytes"), "{status:?}");
        assert!(status.message().contains("65536"), "{status:?}");
        assert!(refused.load(Ordering::Relaxed));
        // A message exactly at the limit passes.
        let mut exact = prefix(4);
        exact.extend_from_slice(b"abcd");
        let body = SizeGuarded::new(
            UnsyncBoxBody::new(Full::new(Bytes::from(exact.clone())).map_err(|n| match n {})),
            4,
            || {},
        );
        assert_eq!(read_all(body).await.unwrap(), exact);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_must_end_when_its_token_expires_or_its_connection_closes() {
        let gate = Gate::new(
            Arc::new(Authenticator::insecure()),
            Limits::default(),
            Metrics::new().unwrap(),
        );
        let connection = gate.connection(None);
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

    #[test]
    fn a_source_runs_out_of_failures_and_earns_them_back_over_time() {
        let gate = Gate::new(
            Arc::new(Authenticator::insecure()),
            Limits::default(),
            Metrics::new().unwrap(),
        );
        let source: IpAddr = [10, 0, 0, 9].into();
        let other: IpAddr = [10, 0, 0, 10].into();
        let t0 = Instant::now();
        for _ in 0..FAILURE_BURST as usize {
            assert!(!gate.throttled(source, t0));
            gate.failed(source, t0);
        }
        assert!(gate.throttled(source, t0), "the burst is spent");
        assert!(!gate.throttled(other, t0), "another source is not charged");
        let half = Duration::from_secs_f64(0.4 / FAILURES_PER_SECOND);
        assert!(
            gate.throttled(source, t0 + half),
            "less than one failure earned"
        );
        let one = Duration::from_secs_f64(1.0 / FAILURES_PER_SECOND);
        assert!(!gate.throttled(source, t0 + one), "one failure earned back");
        gate.failed(source, t0 + one);
        assert!(gate.throttled(source, t0 + one));
    }

    #[test]
    fn the_failure_table_stays_bounded_and_forgets_the_oldest() {
        let gate = Gate::new(
            Arc::new(Authenticator::insecure()),
            Limits::default(),
            Metrics::new().unwrap(),
        );
        let t0 = Instant::now();
        let first: IpAddr = [10, 1, 0, 0].into();
        for _ in 0..FAILURE_BURST as usize {
            gate.failed(first, t0);
        }
        for i in 1..SOURCES as u32 + 5 {
            let ip = IpAddr::from((0x0a00_0000u32 + i).to_be_bytes());
            gate.failed(ip, t0 + Duration::from_millis(u64::from(i)));
        }
        assert!(gate.failures.lock().len() <= SOURCES);
        assert!(!gate.failures.lock().contains_key(&first));
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
                let c = gate.connection(None);
                assert!(c.bind(pod.clone()));
                assert!(c.bind(pod.clone()), "binding twice counts once");
                c
            })
            .collect();
        let extra = gate.connection(None);
        assert!(!extra.bind(pod.clone()));
        assert!(
            gate.connection(None)
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
