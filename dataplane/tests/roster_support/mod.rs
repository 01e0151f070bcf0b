//! A fake controller for the roster tests: a real tonic `Roster` server on 127.0.0.1 that
//! serves whatever rosters the test pushes (snapshot of the current ones first, then each push)
//! and records every health report. `ReportChanges` is UNIMPLEMENTED (an older controller)
//! unless the test turns it on. It can be killed (every stream ends, the listener closes)
//! and restarted on the same port. It knows nothing of the controller crate.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rollcall_api::proto::v1 as pb;
use rollcall_api::proto::v1::roster_server::{Roster, RosterServer};
use rollcall_api::roster::SidecarId;
use rollcall_dataplane::roster::{Backoff, PoolBinding, RosterOptions};
use rollcall_dataplane::sidecar::{self, ControlledOptions, Sidecar};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

/// How long a wait may take before the test fails with what it saw. Only a hang trips it.
pub const PATIENCE: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Shared {
    current: Mutex<BTreeMap<(String, String), pb::RosterUpdate>>,
    updates: Mutex<Option<broadcast::Sender<pb::RosterUpdate>>>,
    reports: Mutex<Vec<pb::HealthReport>>,
    watches: Mutex<Vec<pb::WatchRequest>>,
    /// Serve `ReportChanges` (otherwise it is UNIMPLEMENTED, as from an older controller).
    changes: std::sync::atomic::AtomicBool,
    /// Feedback to the open `ReportChanges` stream.
    feedback: Mutex<Option<mpsc::Sender<Result<pb::ReportFeedback, Status>>>>,
    /// Which RPC each report came on: `true` for `ReportChanges`.
    report_kinds: Mutex<Vec<bool>>,
}

struct Service {
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
}

pub struct FakeController {
    addr: SocketAddr,
    shared: Arc<Shared>,
    running: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

impl FakeController {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared::default());
        *shared.updates.lock() = Some(broadcast::channel(64).0);
        let mut fake = Self {
            addr,
            shared,
            running: None,
        };
        fake.serve(listener);
        fake
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn serve(&mut self, listener: TcpListener) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let service = Service {
            shared: Arc::clone(&self.shared),
            stop: stop_rx.clone(),
        };
        let mut stop = stop_rx;
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(RosterServer::new(service))
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
                    stopped(&mut stop).await;
                })
                .await;
        });
        self.running = Some((stop_tx, task));
    }

    /// End every stream and close the listener.
    pub async fn kill(&mut self) {
        if let Some((stop, mut task)) = self.running.take() {
            let _ = stop.send(true);
            if tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }

    /// Listen again on the same port, serving the current rosters.
    pub async fn restart(&mut self) {
        let listener = TcpListener::bind(self.addr).await.expect("rebind");
        self.serve(listener);
    }

    /// Make `update` the pool's current roster and send it to every watcher.
    pub fn push(&self, update: pb::RosterUpdate) {
        let key = update
            .pool
            .as_ref()
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .unwrap_or_default();
        self.shared.current.lock().insert(key, update.clone());
        if let Some(tx) = self.shared.updates.lock().as_ref() {
            let _ = tx.send(update);
        }
    }

    /// Make `update` what a new stream's snapshot sends, without sending it to anyone.
    pub fn set_current(&self, update: pb::RosterUpdate) {
        let key = update
            .pool
            .as_ref()
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .unwrap_or_default();
        self.shared.current.lock().insert(key, update);
    }

    /// Send `update` to every watcher without making it the snapshot (a delta, a part).
    pub fn broadcast(&self, update: pb::RosterUpdate) {
        if let Some(tx) = self.shared.updates.lock().as_ref() {
            let _ = tx.send(update);
        }
    }

    pub fn watches(&self) -> Vec<pb::WatchRequest> {
        self.shared.watches.lock().clone()
    }

    /// Wait for a report that satisfies `check`.
    pub async fn wait_for_report(
        &self,
        what: &str,
        check: impl Fn(&pb::HealthReport) -> bool,
    ) -> pb::HealthReport {
        wait(what, || {
            self.shared
                .reports
                .lock()
                .iter()
                .find(|r| check(r))
                .cloned()
        })
        .await
    }

    /// Serve `ReportChanges` from now on (new streams).
    pub fn accept_changes(&self) {
        self.shared
            .changes
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Ask the open `ReportChanges` stream for a complete report of `shop/web`.
    pub async fn ask_resend(&self) {
        let tx = self
            .shared
            .feedback
            .lock()
            .clone()
            .expect("a ReportChanges stream");
        let resend = pb::ReportFeedback {
            resend: vec![pb::PoolRef {
                namespace: "shop".into(),
                name: "web".into(),
            }],
            summary: None,
        };
        tx.send(Ok(resend)).await.expect("stream open");
    }

    /// For each report so far, whether it came on `ReportChanges`.
    pub fn report_kinds(&self) -> Vec<bool> {
        self.shared.report_kinds.lock().clone()
    }

    pub fn reports(&self) -> Vec<pb::HealthReport> {
        self.shared.reports.lock().clone()
    }
}

#[tonic::async_trait]
impl Roster for Service {
    type WatchStream = ReceiverStream<Result<pb::RosterUpdate, Status>>;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let request = request.into_inner();
        self.shared.watches.lock().push(request.clone());
        let wanted: Vec<(String, String)> = request
            .pools
            .iter()
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .collect();
        let mut updates = match self.shared.updates.lock().as_ref() {
            Some(tx) => tx.subscribe(),
            None => return Err(Status::unavailable("no updates")),
        };
        let snapshot: Vec<pb::RosterUpdate> = {
            let current = self.shared.current.lock();
            wanted
                .iter()
                .filter_map(|k| current.get(k).cloned())
                .collect()
        };
        let (tx, rx) = mpsc::channel(64);
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            for update in snapshot {
                if tx.send(Ok(update)).await.is_err() {
                    return;
                }
            }
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => return,
                    update = updates.recv() => {
                        let Ok(update) = update else { return };
                        let key = update.pool.as_ref().map(|p| (p.namespace.clone(), p.name.clone()));
                        if key.is_some_and(|k| wanted.contains(&k)) && tx.send(Ok(update)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    type ReportChangesStream = ReceiverStream<Result<pb::ReportFeedback, Status>>;

    async fn report_changes(
        &self,
        request: Request<Streaming<pb::HealthReport>>,
    ) -> Result<Response<Self::ReportChangesStream>, Status> {
        self.changes(request).await
    }

    async fn report(
        &self,
        request: Request<Streaming<pb::HealthReport>>,
    ) -> Result<Response<pb::ReportSummary>, Status> {
        let mut inbound = request.into_inner();
        let mut stop = self.stop.clone();
        let mut accepted = 0;
        loop {
            tokio::select! {
                _ = stopped(&mut stop) => return Err(Status::unavailable("shutting down")),
                message = inbound.message() => match message? {
                    Some(report) => {
                        accepted += 1;
                        self.shared.reports.lock().push(report);
                        self.shared.report_kinds.lock().push(false);
                    }
                    None => return Ok(Response::new(pb::ReportSummary { accepted, ignored: 0 })),
                },
            }
        }
    }
}

impl Service {
    async fn changes(
        &self,
        request: Request<Streaming<pb::HealthReport>>,
    ) -> Result<Response<ReceiverStream<Result<pb::ReportFeedback, Status>>>, Status> {
        if !self
            .shared
            .changes
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(Status::unimplemented("no ReportChanges here"));
        }
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        *self.shared.feedback.lock() = Some(tx);
        let shared = Arc::clone(&self.shared);
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => return,
                    message = inbound.message() => match message {
                        Ok(Some(report)) => {
                            shared.reports.lock().push(report);
                            shared.report_kinds.lock().push(true);
                        }
                        _ => return,
                    },
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Resolves once the fake is killed.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Poll `probe` until it yields; fail after `PATIENCE` naming `what`.
pub async fn wait<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {PATIENCE:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A `shop/web` roster of ready endpoints.
pub fn roster(version: u64, endpoints: &[SocketAddr], policy_json: &str) -> pb::RosterUpdate {
    pb::RosterUpdate {
        fleet: None,
        pool: Some(pb::PoolRef {
            namespace: "shop".into(),
            name: "web".into(),
        }),
        version,
        state: Some(pb::roster_update::State::Roster(pb::PoolRoster {
            endpoints: endpoints
                .iter()
                .map(|a| pb::Endpoint {
                    ip: a.ip().to_string(),
                    port: a.port().into(),
                    ready: true,
                    serving: true,
                    weight: 1,
                    ..Default::default()
                })
                .collect(),
            policy_json: policy_json.into(),
            service: "shop/web:80".into(),
        })),
        continued: false,
        fingerprint: Vec::new(),
    }
}

/// A `shop/web` delta from `base` to `version`: `removed` leave, `added` arrive ready.
pub fn delta(
    version: u64,
    base: u64,
    removed: &[SocketAddr],
    added: &[SocketAddr],
) -> pb::RosterUpdate {
    let Some(pb::roster_update::State::Roster(r)) = roster(version, added, "").state else {
        unreachable!("roster() makes a roster")
    };
    pb::RosterUpdate {
        state: Some(pb::roster_update::State::Delta(pb::RosterDelta {
            base_version: base,
            upserted: r.endpoints,
            removed: removed
                .iter()
                .map(|a| pb::EndpointAddress {
                    ip: a.ip().to_string(),
                    port: a.port().into(),
                })
                .collect(),
            ..Default::default()
        })),
        ..roster(version, &[], "")
    }
}

/// A `shop/web` message saying the controller has no roster, and why.
pub fn unavailable(version: u64, reason: pb::unavailable::Reason) -> pb::RosterUpdate {
    pb::RosterUpdate {
        state: Some(pb::roster_update::State::Unavailable(pb::Unavailable {
            reason: reason.into(),
            message: "test says so".into(),
        })),
        ..roster(version, &[], "")
    }
}

/// Fast probes, so tests see health change in a fraction of a second.
pub const FAST_PROBES: &str = r#"{"healthCheck": {"type": "HTTP", "path": "/healthz", "interval": "100ms", "timeout": "100ms", "jitter": "0%", "healthyThreshold": 2, "unhealthyThreshold": 3}}"#;

/// A sidecar following `controller` for pool `shop/web`, with quick reports and reconnects.
pub async fn sidecar(controller: &FakeController) -> Sidecar {
    let pools: Vec<PoolBinding> = vec!["shop/web=127.0.0.1:0".parse().expect("binding")];
    let identity = SidecarId {
        namespace: "shop".into(),
        pod: "front-1".into(),
        instance: "test".into(),
    };
    let mut roster = RosterOptions::new(controller.url(), pools, identity);
    roster.heartbeat = Duration::from_millis(300);
    roster.report_interval = Duration::from_millis(50);
    roster.backoff = Backoff {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
    };
    sidecar::start_controlled(ControlledOptions {
        admin_listen: "127.0.0.1:0".parse().expect("addr"),
        roster,
    })
    .await
    .expect("sidecar starts")
}
