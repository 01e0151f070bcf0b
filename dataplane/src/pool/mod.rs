//! One pool at run time, split by who touches what.
//!
//! - `Pool` (this file) is the handle the request path and the runtime hold. Routing reads the
//!   last published snapshot (`routing`, an `ArcSwap` load); outcomes go to the owner through
//!   a channel and into atomics (metrics, the balancer's load, the retry budget). The request
//!   path takes no pool-wide lock.
//! - The owner task (`owner`) is the only writer of the pool's state (`core`): the health
//!   machine, the endpoints, their drains, the probes. It publishes versioned snapshots
//!   (`routing`) one after the other, so no update can be lost to a race.
//! - `endpoint` is one endpoint's live parts; `report` is how the pool shows itself; `settings`
//!   is the policy parsed once.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use prometheus::{Histogram, IntCounter};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::config::EndpointConfig;
use crate::local_answer::{LocalAnswerLog, LocalReason};
use crate::metrics::{Metrics, REQUEST_OUTCOMES, RETRY_REASONS};
use crate::outcome::Verdict;
use crate::poll_clock;
use crate::retry::{RetryBudget, RetryReason};

mod core;
mod endpoint;
mod endpoint_set;
pub mod fleet;
mod owner;
mod routing;
mod settings;
mod view;

pub use endpoint::Endpoint;
pub use routing::{NoEndpoint, Routing};
pub use settings::{Http1Engine, PoolSettings, Tuning};
pub use view::{EndpointView, PoolView};

use owner::{Message, RequestVerdict};

pub struct Pool {
    name: Arc<str>,
    routing: Arc<ArcSwap<Routing>>,
    owner: mpsc::UnboundedSender<Message>,
    /// Request verdicts for the owner, bounded (`owner::VERDICT_QUEUE`).
    verdicts: mpsc::Sender<RequestVerdict>,
    verdicts_dropped: IntCounter,
    owner_task: AbortHandle,
    budget: RetryBudget,
    tuning: Tuning,
    /// `rollcall_requests_total` of this pool in `REQUEST_OUTCOMES` order.
    requests: Vec<IntCounter>,
    /// `rollcall_retries_total` of this pool in `RETRY_REASONS` order.
    retries: Vec<IntCounter>,
    request_duration: Histogram,
    /// The rate limit on the log line of each answer the sidecar makes itself.
    local_answers: LocalAnswerLog,
    /// `rollcall_http1_handoffs_total` of this pool: HTTP/2, then upgrades.
    http1_handoffs: [IntCounter; 2],
}

/// Why the fast HTTP/1 engine handed a client connection to hyper's server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Http1Handoff {
    /// The client speaks HTTP/2 (its connection preface).
    Http2,
    /// An upgrade (WebSocket and the like) or CONNECT.
    Upgrade,
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.owner_task.abort();
    }
}

impl Pool {
    /// A pool with no endpoints yet; `update` gives it its roster. Starts the pool's owner.
    pub fn new(
        name: &str,
        settings: PoolSettings,
        tuning: Tuning,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let now = Instant::now();
        let name: Arc<str> = name.into();
        let budget = RetryBudget::new(
            settings.policy.retries.budget.percent,
            settings.policy.retries.budget.min_per_second,
            now,
        );
        metrics.panic.with_label_values(&[&*name]).set(0);
        let requests = REQUEST_OUTCOMES
            .iter()
            .map(|outcome| metrics.requests.with_label_values(&[&*name, outcome]))
            .collect();
        let retries = RETRY_REASONS
            .iter()
            .map(|reason| metrics.retries.with_label_values(&[&*name, reason]))
            .collect();
        let request_duration = metrics.request_duration.with_label_values(&[&*name]);
        let mut core = core::Core::new(
            Arc::clone(&name),
            Arc::new(settings),
            tuning.clone(),
            Arc::clone(&metrics),
            now,
        );
        let routing = Arc::new(ArcSwap::from_pointee(core.next_snapshot(now)));
        let (owner, inbox) = mpsc::unbounded_channel();
        let (verdicts, verdict_queue) = mpsc::channel(owner::VERDICT_QUEUE);
        let verdicts_dropped = metrics.verdicts_dropped.with_label_values(&[&*name]);
        let http1_handoffs = ["http2", "upgrade"]
            .map(|reason| metrics.http1_handoffs.with_label_values(&[&*name, reason]));
        let owner_task = tokio::spawn(owner::run(
            core,
            inbox,
            verdict_queue,
            owner.downgrade(),
            Arc::clone(&routing),
        ))
        .abort_handle();
        Arc::new(Self {
            name,
            routing,
            owner,
            verdicts,
            verdicts_dropped,
            owner_task,
            budget,
            tuning,
            requests,
            retries,
            request_duration,
            local_answers: LocalAnswerLog::default(),
            http1_handoffs,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Log an answer the sidecar made itself: one `info` line per reason per second, saying
    /// how many answers for the same reason went unlogged since the last one.
    pub fn log_local_answer(&self, status: u16, reason: LocalReason, tries: usize, detail: &str) {
        if let Some(suppressed) = self.local_answers.admit(reason, poll_clock::now()) {
            tracing::info!(
                pool = &*self.name,
                status,
                reason = reason.as_str(),
                tries,
                detail,
                suppressed,
                "answered locally"
            );
        }
    }

    /// The sidecar-wide request-path knobs.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// The last published routing snapshot (with the settings it was built with).
    pub fn routing(&self) -> Arc<Routing> {
        self.routing.load_full()
    }

    pub fn settings(&self) -> Arc<PoolSettings> {
        Arc::clone(&self.routing.load().settings)
    }

    /// Apply a roster and policy; returns once the owner has applied it and published the
    /// snapshot that routes on it. New endpoints start Unknown and are probed, endpoints that
    /// stay keep their health, endpoints that left drain.
    pub async fn update(&self, roster: &[EndpointConfig], settings: PoolSettings) {
        self.budget.set_limits(
            settings.policy.retries.budget.percent,
            settings.policy.retries.budget.min_per_second,
        );
        let (done, applied) = oneshot::channel();
        let message = Message::Update {
            roster: roster.to_vec(),
            settings: Arc::new(settings),
            done,
        };
        if self.owner.send(message).is_ok() {
            let _ = applied.await;
        }
    }

    /// Route by `zone` from now on (zone-aware routing, when the pool enables it).
    pub fn set_local_zone(&self, zone: Arc<str>) {
        let _ = self.owner.send(Message::LocalZone { zone });
    }

    /// The controller's fleet-health word for this pool (`None`: nothing to follow, probe
    /// everything; see `fleet`).
    pub fn follow_fleet(&self, fleet: Option<rollcall_api::roster::FleetHealth>) {
        let _ = self.owner.send(Message::Fleet { fleet });
    }

    /// The stream to the controller ended: the fleet assignment stands for two probe
    /// intervals, then every endpoint is probed here until the controller speaks again.
    pub fn fleet_lost(&self) {
        let _ = self.owner.send(Message::FleetLost);
    }

    /// A try's verdict for the health machine (`proxy::try_record` settles each try with one).
    pub fn record_verdict(&self, addr: std::net::SocketAddr, verdict: Verdict, detail: &str) {
        if verdict == Verdict::NotTheEndpoint {
            return;
        }
        let detail = if verdict.is_failure() {
            detail.to_owned()
        } else {
            String::new()
        };
        let request = RequestVerdict {
            addr,
            verdict,
            detail,
        };
        // Never waits: a full queue means the owner is far behind; this verdict is dropped
        // and counted, the next ones get through once it catches up.
        if let Err(mpsc::error::TrySendError::Full(_)) = self.verdicts.try_send(request) {
            self.verdicts_dropped.inc();
        }
    }

    /// The pool's retry budget.
    pub fn budget(&self) -> &RetryBudget {
        &self.budget
    }

    /// Count a client connection the fast engine handed to hyper's server.
    pub fn count_http1_handoff(&self, why: Http1Handoff) {
        self.http1_handoffs[match why {
            Http1Handoff::Http2 => 0,
            Http1Handoff::Upgrade => 1,
        }]
        .inc();
    }

    /// Count a retry in `rollcall_retries_total`.
    pub fn count_retry(&self, reason: RetryReason) {
        if let Some(counter) = RETRY_REASONS
            .iter()
            .position(|r| *r == reason.label())
            .and_then(|i| self.retries.get(i))
        {
            counter.inc();
        }
    }

    /// Count the answer given to the application and pass it through.
    pub fn finish<B>(
        &self,
        response: http::Response<B>,
        outcome: &'static str,
        started: Instant,
    ) -> http::Response<B> {
        if let Some(counter) = REQUEST_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .and_then(|i| self.requests.get(i))
        {
            counter.inc();
        }
        self.request_duration
            .observe(poll_clock::since(started).as_secs_f64());
        response
    }

    /// The pool as `/endpoints` shows it, after everything recorded before this call; `None`
    /// once the pool has shut down.
    pub async fn view(&self) -> Option<PoolView> {
        let (reply, view) = oneshot::channel();
        self.owner.send(Message::View { reply }).ok()?;
        view.await.ok()
    }

    /// A pool for tests: no probes (a success makes an endpoint Healthy), one endpoint at
    /// `addr`, its roster applied.
    #[cfg(test)]
    pub(crate) async fn with_one_endpoint(
        name: &str,
        addr: std::net::SocketAddr,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let mut policy = rollcall_api::policy::PoolPolicy::default();
        policy.health_check.kind = rollcall_api::policy::HealthCheckType::None;
        let settings = PoolSettings::new(&policy);
        let pool = Self::new(name, settings.clone(), Tuning::default(), metrics);
        let endpoint = EndpointConfig {
            address: addr,
            zone: None,
            weight: 1,
            terminating: false,
        };
        pool.update(&[endpoint], settings).await;
        pool
    }

    /// Stop probing and close every connection of every endpoint. Listeners are stopped first,
    /// by the runtime.
    pub async fn shutdown(&self) {
        let (done, stopped) = oneshot::channel();
        if self.owner.send(Message::Shutdown { done }).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), stopped).await;
        }
    }
}
