//! [`TestBackend`]: one listening server and its life cycle. Every task of one "life" (the
//! accept loop, each connection, each HTTP/2 stream) lives in one `JoinSet`, so `kill` can abort
//! them all and wait until their sockets are closed, and dropping the backend stops everything.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Duration;

use http::HeaderValue;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::behavior::{Action, Behavior};
use crate::stats::{Counters, Stats};
use crate::{Error, Result, service};

/// How long `revive` retries binding a port the kernel still holds.
const REBIND_FOR: Duration = Duration::from_secs(5);

/// A real HTTP/1.1 and h2c server on `127.0.0.1` that fails on demand. Stops when dropped.
pub struct TestBackend {
    shared: Arc<Shared>,
    life: Mutex<Option<Tasks>>,
}

/// State shared by the handle and every connection.
pub(crate) struct Shared {
    addr: SocketAddr,
    addr_header: HeaderValue,
    behavior: Mutex<BehaviorState>,
    healthz: AtomicBool,
    pub(crate) counters: Counters,
}

struct BehaviorState {
    behavior: Behavior,
    /// Traffic requests since the behaviour was set: the index `Behavior::decide` gets.
    seen: u64,
}

/// The tasks of one life. Closed sets refuse new tasks, so nothing outlives `kill`.
#[derive(Clone)]
struct Tasks(Arc<Mutex<TaskSet>>);

struct TaskSet {
    set: JoinSet<()>,
    closed: bool,
}

/// Decrements the open-connection count however the connection task ends (aborts included).
struct OpenConnection(Arc<Shared>);

// === impl TestBackend ===

impl TestBackend {
    /// Starts a backend on a free port of 127.0.0.1.
    pub async fn spawn(behavior: Behavior) -> Result<Self> {
        Self::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), behavior).await
    }

    /// Starts a backend on `addr` (the demo backend binary uses a fixed port).
    pub async fn bind(addr: SocketAddr, behavior: Behavior) -> Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let addr_header = HeaderValue::try_from(addr.to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown"));
        let shared = Arc::new(Shared {
            addr,
            addr_header,
            behavior: Mutex::new(BehaviorState { behavior, seen: 0 }),
            healthz: AtomicBool::new(true),
            counters: Counters::new(),
        });
        let backend = Self {
            shared,
            life: Mutex::new(None),
        };
        backend.start(listener);
        tracing::debug!(%addr, ?behavior, "test backend listening");
        Ok(backend)
    }

    /// The address it listens on (kept across `kill` and `revive`).
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.shared.addr)
    }

    /// Changes how traffic is answered from the next request on; restarts the fail-ratio count.
    /// Requests already black-holed stay unanswered.
    pub fn set_behavior(&self, behavior: Behavior) {
        *self.shared.behavior.lock() = BehaviorState { behavior, seen: 0 };
    }

    /// The current behaviour.
    pub fn behavior(&self) -> Behavior {
        self.shared.behavior()
    }

    /// `/healthz` answers 200 when `true` (the default), 503 when `false`.
    pub fn set_healthz(&self, healthy: bool) {
        self.shared.healthz.store(healthy, SeqCst);
    }

    /// Closes the listener and aborts every open connection; returns once they are all closed,
    /// so a connect right after is refused and pooled keep-alive connections are dead.
    pub async fn kill(&self) {
        let Some(tasks) = self.life.lock().take() else {
            return;
        };
        let mut set = tasks.close();
        set.shutdown().await;
        tracing::debug!(addr = %self.shared.addr, "test backend killed");
    }

    /// Listens again on the same port, retrying for a few seconds while the kernel still
    /// holds it. Does nothing when the backend is alive.
    pub async fn revive(&self) -> Result<()> {
        if self.is_alive() {
            return Ok(());
        }
        let addr = self.shared.addr;
        let deadline = tokio::time::Instant::now() + REBIND_FOR;
        let listener = loop {
            match TcpListener::bind(addr).await {
                Ok(listener) => break listener,
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(source) => return Err(Error::Bind { addr, source }),
            }
        };
        if !self.is_alive() {
            self.start(listener);
        }
        tracing::debug!(%addr, "test backend revived");
        Ok(())
    }

    /// Whether it is listening (not killed).
    pub fn is_alive(&self) -> bool {
        self.life.lock().is_some()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    /// Traffic requests that arrived (everything but `/healthz`).
    pub fn requests(&self) -> u64 {
        self.stats().requests
    }

    /// `/healthz` requests that arrived.
    pub fn health_checks(&self) -> u64 {
        self.stats().health_checks
    }

    /// Zeroes the counters (not the open-connection gauge).
    /// The `x-request-id` of every traffic request that carried one since the last reset, in
    /// arrival order (a request that arrived twice is there twice).
    pub fn request_ids(&self) -> Vec<String> {
        self.shared.counters.request_ids()
    }

    pub fn reset_counters(&self) {
        self.shared.counters.reset();
    }

    /// Resolves once `done` holds for the counters. Wrap it in a timeout in tests.
    pub async fn wait_until(&self, done: impl Fn(&Stats) -> bool) {
        self.shared.counters.wait_until(done).await;
    }

    /// Resolves once at least `n` traffic requests have arrived.
    pub async fn wait_for_requests(&self, n: u64) {
        self.wait_until(|s| s.requests >= n).await;
    }

    /// Resolves once at least `n` `/healthz` requests have arrived.
    pub async fn wait_for_health_checks(&self, n: u64) {
        self.wait_until(|s| s.health_checks >= n).await;
    }

    /// Resolves once at least `n` connections have been accepted.
    pub async fn wait_for_connections(&self, n: u64) {
        self.wait_until(|s| s.connections >= n).await;
    }

    fn start(&self, listener: TcpListener) {
        let tasks = Tasks::new();
        tasks.spawn(accept_loop(listener, self.shared.clone(), tasks.clone()));
        *self.life.lock() = Some(tasks);
    }
}

impl Drop for TestBackend {
    fn drop(&mut self) {
        if let Some(tasks) = self.life.lock().take() {
            // Dropping the set aborts every task.
            drop(tasks.close());
        }
    }
}

impl std::fmt::Debug for TestBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestBackend")
            .field("addr", &self.shared.addr)
            .field("behavior", &self.behavior())
            .field("alive", &self.is_alive())
            .finish()
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tasks: Tasks) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "test backend accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "set_nodelay failed");
        }
        shared.counters.connection_opened();
        let guard = OpenConnection(shared.clone());
        let executor = tasks.clone();
        tasks.spawn(async move {
            let shared = guard.0.clone();
            let service = service_fn(move |req| service::handle(shared.clone(), req));
            let served = auto::Builder::new(executor)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "test backend connection ended with an error");
            }
            drop(guard);
        });
    }
}

// === impl Shared ===

impl Shared {
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(crate) fn addr_header(&self) -> &HeaderValue {
        &self.addr_header
    }

    pub(crate) fn behavior(&self) -> Behavior {
        self.behavior.lock().behavior
    }

    pub(crate) fn healthz(&self) -> bool {
        self.healthz.load(SeqCst)
    }

    /// Decides the next traffic request's fate and counts it.
    pub(crate) fn next_action(&self) -> Action {
        let mut state = self.behavior.lock();
        let index = state.seen;
        state.seen += 1;
        state.behavior.decide(index)
    }
}

// === impl Tasks ===

impl Tasks {
    fn new() -> Self {
        Self(Arc::new(Mutex::new(TaskSet {
            set: JoinSet::new(),
            closed: false,
        })))
    }

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F) {
        let mut tasks = self.0.lock();
        if tasks.closed {
            return;
        }
        while tasks.set.try_join_next().is_some() {}
        tasks.set.spawn(task);
    }

    /// Refuses new tasks and hands over the running ones.
    fn close(&self) -> JoinSet<()> {
        let mut tasks = self.0.lock();
        tasks.closed = true;
        std::mem::take(&mut tasks.set)
    }
}

impl<F: Future<Output = ()> + Send + 'static> hyper::rt::Executor<F> for Tasks {
    fn execute(&self, task: F) {
        self.spawn(task);
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.counters.connection_closed();
    }
}
