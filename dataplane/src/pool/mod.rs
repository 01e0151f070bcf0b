//! One pool at run time: its endpoints, their health machine, the routing snapshot the request
//! path reads, and the background work (probes, the tick, draining). The pure pieces decide;
//! this module only holds them together. The request path takes no lock to route: it loads an
//! `Arc<Routing>` rebuilt after every health event (Pingora's swap-a-new-selector idea) and
//! takes the health lock only briefly, never across an await, to record an outcome.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::balance::{EndpointLoad, Selector, ShareTracker};
use crate::config::EndpointConfig;
use crate::health::machine::{Event, HealthSettings, PoolHealth, State};
use crate::health::probe;
use crate::metrics::{ATTEMPT_OUTCOMES, Metrics, REQUEST_OUTCOMES};
use crate::proxy::upstream::{IDLE_TIMEOUT, Upstream};
use crate::retry::Decision;
use crate::retry::budget::RetryBudget;
use prometheus::{Histogram, IntCounter};

mod outcome;
mod report;
mod routing;
mod settings;

pub use outcome::{AttemptOutcome, NoEndpoint};
pub use report::{EndpointView, PoolView};
use routing::Routing;
pub use settings::PoolSettings;

/// How often the tick re-evaluates ejection expiry, slow start, panic and draining.
const TICK: Duration = Duration::from_millis(250);

/// One endpoint's live parts.
pub struct Endpoint {
    pub addr: SocketAddr,
    pub zone: Option<String>,
    pub upstream: Upstream,
    pub load: Arc<EndpointLoad>,
    /// `rollcall_attempts_total` of this endpoint, one counter per outcome in
    /// `ATTEMPT_OUTCOMES` order, looked up once instead of per request.
    attempts: Vec<IntCounter>,
    probe: Mutex<Option<AbortHandle>>,
    /// When it started draining after leaving the roster.
    removed_at: Mutex<Option<Instant>>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(probe) = self.probe.lock().take() {
            probe.abort();
        }
    }
}

pub struct Pool {
    name: Arc<str>,
    settings: ArcSwap<PoolSettings>,
    health: Mutex<PoolHealth>,
    endpoints: RwLock<HashMap<SocketAddr, Arc<Endpoint>>>,
    routing: ArcSwap<Routing>,
    share: Arc<ShareTracker>,
    budget: Mutex<RetryBudget>,
    metrics: Arc<Metrics>,
    /// `rollcall_requests_total` of this pool in `REQUEST_OUTCOMES` order.
    requests: Vec<IntCounter>,
    request_duration: Histogram,
    tick: Mutex<Option<AbortHandle>>,
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(tick) = self.tick.lock().take() {
            tick.abort();
        }
    }
}

impl Pool {
    /// A pool with no endpoints yet; `update` gives it its roster.
    pub fn new(name: &str, settings: PoolSettings, metrics: Arc<Metrics>) -> Arc<Self> {
        let now = Instant::now();
        let budget = RetryBudget::new(
            settings.policy.retries.budget.percent,
            settings.policy.retries.budget.min_per_second,
            now,
        );
        let share = Arc::new(ShareTracker::new(now));
        let health = PoolHealth::new(HealthSettings::from_policy(&settings.policy));
        let routing = Routing {
            selector: Selector::new(
                &settings.policy.load_balancer,
                Vec::new(),
                Arc::clone(&share),
            ),
            by_addr: HashMap::new(),
            probation: Vec::new(),
            fallback: Vec::new(),
            total: 0,
            ramping: false,
        };
        metrics.panic.with_label_values(&[name]).set(0);
        let requests = REQUEST_OUTCOMES
            .iter()
            .map(|outcome| metrics.requests.with_label_values(&[name, outcome]))
            .collect();
        let request_duration = metrics.request_duration.with_label_values(&[name]);
        let pool = Arc::new(Self {
            requests,
            request_duration,
            name: name.into(),
            settings: ArcSwap::from_pointee(settings),
            health: Mutex::new(health),
            endpoints: RwLock::new(HashMap::new()),
            routing: ArcSwap::from_pointee(routing),
            share,
            budget: Mutex::new(budget),
            metrics,
            tick: Mutex::new(None),
        });
        let weak = Arc::downgrade(&pool);
        let tick = tokio::spawn(tick_loop(weak)).abort_handle();
        *pool.tick.lock() = Some(tick);
        pool
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn settings(&self) -> Arc<PoolSettings> {
        self.settings.load_full()
    }

    /// Apply a roster and policy: new endpoints start Unknown and are probed, endpoints that
    /// stay keep their health, endpoints that left drain.
    pub fn update(self: &Arc<Self>, roster: &[EndpointConfig], settings: PoolSettings) {
        let now = Instant::now();
        {
            let mut budget = self.budget.lock();
            budget.set_limits(
                settings.policy.retries.budget.percent,
                settings.policy.retries.budget.min_per_second,
            );
        }
        let http2 = settings.http2;
        self.health
            .lock()
            .set_settings(HealthSettings::from_policy(&settings.policy));
        self.settings.store(Arc::new(settings));
        let mut events = Vec::new();
        let mut started = Vec::new();
        {
            let mut endpoints = self.endpoints.write();
            let mut health = self.health.lock();
            for ep in roster {
                let endpoint = endpoints.entry(ep.address).or_insert_with(|| {
                    let endpoint = Arc::new(Endpoint {
                        addr: ep.address,
                        zone: ep.zone.clone(),
                        upstream: Upstream::new(ep.address, http2),
                        load: Arc::new(EndpointLoad::with_weight(ep.weight, now)),
                        attempts: ATTEMPT_OUTCOMES
                            .iter()
                            .map(|outcome| {
                                self.metrics.attempts.with_label_values(&[
                                    &*self.name,
                                    &ep.address.to_string(),
                                    outcome,
                                ])
                            })
                            .collect(),
                        probe: Mutex::new(None),
                        removed_at: Mutex::new(None),
                    });
                    started.push(Arc::clone(&endpoint));
                    endpoint
                });
                endpoint.upstream.set_http2(http2);
                endpoint.load.set_weight(ep.weight);
                if endpoint.removed_at.lock().take().is_some() {
                    endpoint.upstream.undrain();
                }
                events.extend(health.upsert(ep.address, ep.terminating, now));
            }
            let keep: std::collections::HashSet<_> = roster.iter().map(|e| e.address).collect();
            for (addr, endpoint) in endpoints.iter() {
                if !keep.contains(addr) {
                    let mut removed = endpoint.removed_at.lock();
                    if removed.is_none() {
                        *removed = Some(now);
                        endpoint.upstream.drain();
                        events.extend(health.remove(*addr, now));
                    }
                }
            }
        }
        for endpoint in started {
            let task = tokio::spawn(probe::run(Arc::downgrade(self), Arc::downgrade(&endpoint)));
            *endpoint.probe.lock() = Some(task.abort_handle());
        }
        self.apply(events, now);
    }

    /// Record one try against its endpoint: metrics, health machine, balancer statistics.
    pub fn record_attempt(
        &self,
        endpoint: &Endpoint,
        outcome: AttemptOutcome,
        detail: &str,
        _latency: Duration,
    ) {
        if let Some(counter) = ATTEMPT_OUTCOMES
            .iter()
            .position(|o| *o == outcome.label())
            .and_then(|i| endpoint.attempts.get(i))
        {
            counter.inc();
        }
        let now = Instant::now();
        let events =
            self.health
                .lock()
                .record_request(endpoint.addr, outcome.health(), detail, now);
        if !events.is_empty() {
            self.apply(events, now);
        }
    }

    /// Record an active probe result.
    pub fn record_probe(&self, addr: SocketAddr, ok: bool, detail: &str) {
        let result = if ok { "success" } else { "failure" };
        self.metrics
            .probes
            .with_label_values(&[&*self.name, &addr.to_string(), result])
            .inc();
        let now = Instant::now();
        let events = self.health.lock().record_probe(addr, ok, detail, now);
        if !events.is_empty() {
            self.apply(events, now);
        }
    }

    /// Count a request for the retry budget.
    pub fn count_request(&self, now: Instant) {
        self.budget.lock().record_request(now);
    }

    /// May the request be tried again? Spends the retry budget for real retries.
    pub fn retry(&self, decision: Decision, reason: &'static str) -> bool {
        let allowed = match decision {
            Decision::RetryFree => true,
            Decision::Retry => self.budget.lock().try_retry(Instant::now()),
            Decision::Stop(_) => false,
        };
        if allowed {
            self.metrics
                .retries
                .with_label_values(&[&*self.name, reason])
                .inc();
        }
        allowed
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
            .observe((Instant::now() - started).as_secs_f64());
        response
    }

    /// Log, count and route on what the health machine decided.
    fn apply(&self, events: Vec<Event>, now: Instant) {
        for event in &events {
            report::log_event(&self.name, event, &self.metrics);
            if let Event::Transition {
                endpoint, to, from, ..
            } = event
                && let Some(ep) = self.endpoints.read().get(endpoint)
            {
                if *to == State::Draining {
                    ep.upstream.drain();
                } else if *from == State::Draining {
                    ep.upstream.undrain();
                }
            }
        }
        self.rebuild(now);
    }

    /// One tick: expiries, slow start, panic, and finishing drains.
    fn tick(&self, now: Instant) {
        let events = self.health.lock().tick(now);
        for event in &events {
            report::log_event(&self.name, event, &self.metrics);
        }
        let mut changed = !events.is_empty() || self.routing.load().ramping;
        for endpoint in self.endpoints.read().values() {
            endpoint.upstream.expire_idle(IDLE_TIMEOUT, now);
        }
        let drain_timeout = self.settings.load().drain_timeout;
        let finished: Vec<Arc<Endpoint>> = self
            .endpoints
            .read()
            .values()
            .filter(|e| {
                e.removed_at.lock().is_some_and(|at| {
                    e.load.outstanding() == 0 || now.saturating_duration_since(at) >= drain_timeout
                })
            })
            .cloned()
            .collect();
        for endpoint in finished {
            if endpoint.load.outstanding() > 0 {
                tracing::warn!(pool = %self.name, endpoint = %endpoint.addr, in_flight = endpoint.load.outstanding(), "drain timeout: closing connections with requests in flight");
            }
            endpoint.upstream.close();
            self.endpoints.write().remove(&endpoint.addr);
            self.health.lock().forget(endpoint.addr);
            self.metrics
                .forget_endpoint(&self.name, &endpoint.addr.to_string());
            tracing::info!(pool = %self.name, endpoint = %endpoint.addr, "endpoint drained and removed");
            changed = true;
        }
        if changed {
            self.rebuild(now);
        }
    }

    /// Stop everything: listeners are stopped by the runtime; this drains every endpoint.
    pub fn shutdown(&self) {
        for endpoint in self.endpoints.read().values() {
            endpoint.upstream.close();
        }
        self.metrics.forget_pool(&self.name);
    }

    /// The pool as `/endpoints` shows it.
    pub fn view(&self) -> PoolView {
        let now = Instant::now();
        let reports = self.health.lock().reports(now);
        let endpoints = self.endpoints.read();
        report::view(
            &self.name,
            self.health.lock().panic(),
            reports,
            &endpoints,
            now,
        )
    }
}

async fn tick_loop(pool: Weak<Pool>) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        pool.tick(Instant::now());
    }
}
