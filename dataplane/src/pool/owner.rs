//! The one task that owns a pool's state (`Core`): it takes request verdicts from a bounded
//! queue and everything else (rosters, probe results, questions) from a control channel, ticks
//! four times a second, and publishes a new routing snapshot after every batch that changed
//! something. The request path never waits for it: it reads the last snapshot and offers its
//! verdicts without blocking; when the owner has fallen so far behind that the queue is full, a
//! verdict is dropped and counted (`rollcall_verdicts_dropped_total`) rather than held in memory
//! without bound. A question (`View`) or a roster (`Update`) is answered only after every verdict
//! queued before it has been applied and published, so a caller always sees its own earlier
//! evidence.
//!
//! Probe results stay on the control channel: at most one per endpoint per probe interval, they
//! are bounded by the roster, and one must never be dropped for want of room.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rollcall_api::policy::HealthCheckType;
use rollcall_api::roster::FleetHealth;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::core::Core;
use super::fleet::{self, FleetState};
use super::routing::Routing;
use super::settings::PoolSettings;
use super::view::PoolView;
use crate::config::EndpointConfig;
use crate::health::probe::{self, FirstProbe, ProbeSpec};
use crate::outcome::Verdict;

/// How often the owner re-evaluates ejection expiry, slow start, panic and draining.
const TICK: Duration = Duration::from_millis(250);

/// Messages handled per batch before publishing.
const BATCH: usize = 256;

/// Request verdicts that may wait for the owner: about 64 bytes each, so at most 256 KiB per
/// pool. The owner takes 256 per batch, and falls this far behind only when starved of CPU.
pub(super) const VERDICT_QUEUE: usize = 4096;

/// One request's verdict on its endpoint, on the bounded queue.
pub(super) struct RequestVerdict {
    pub(super) addr: SocketAddr,
    pub(super) verdict: Verdict,
    pub(super) detail: String,
}

/// What the owner is told on the control channel.
pub(super) enum Message {
    Probe {
        addr: SocketAddr,
        ok: bool,
        detail: String,
    },
    Update {
        roster: Vec<EndpointConfig>,
        settings: Arc<PoolSettings>,
        done: oneshot::Sender<()>,
    },
    View {
        reply: oneshot::Sender<PoolView>,
    },
    /// The zone the sidecar runs in, learnt after the pool started.
    LocalZone {
        zone: Arc<str>,
    },
    /// The controller's fleet-health word for the pool (`None`: probe everything).
    Fleet {
        fleet: Option<FleetHealth>,
    },
    /// The stream to the controller ended.
    FleetLost,
    Shutdown {
        done: oneshot::Sender<()>,
    },
}

struct Owner {
    core: Core,
    published: Arc<ArcSwap<Routing>>,
    /// For probes: they must not keep the owner alive once the pool is gone.
    evidence: mpsc::WeakUnboundedSender<Message>,
    health_check: watch::Sender<ProbeSpec>,
    probes: HashMap<SocketAddr, AbortHandle>,
    /// Which endpoints are probed here and the fleet's verdicts on the rest.
    fleet: FleetState,
}

/// Run the owner until the pool shuts down or every handle to it is gone.
pub(super) async fn run(
    core: Core,
    mut inbox: mpsc::UnboundedReceiver<Message>,
    mut verdicts: mpsc::Receiver<RequestVerdict>,
    evidence: mpsc::WeakUnboundedSender<Message>,
    published: Arc<ArcSwap<Routing>>,
) {
    let (health_check, _) = watch::channel(ProbeSpec {
        check: core.settings().policy.health_check.clone(),
        http2: core.settings().http2,
    });
    let mut owner = Owner {
        core,
        published,
        evidence,
        health_check,
        probes: HashMap::new(),
        fleet: FleetState::default(),
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut batch = Vec::with_capacity(BATCH);
    let mut requests = Vec::with_capacity(BATCH);
    loop {
        let fallback_at = owner.fleet.fallback_at();
        let fallback = async {
            match fallback_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = fallback => owner.fall_back(Instant::now()),
            received = inbox.recv_many(&mut batch, BATCH) => {
                if received == 0 {
                    break;
                }
                for message in batch.drain(..) {
                    // Every verdict queued before this message first, so a question or a
                    // roster sees the caller's earlier evidence.
                    owner.take_queued(&mut verdicts);
                    if owner.handle(message) {
                        return;
                    }
                }
            }
            received = verdicts.recv_many(&mut requests, BATCH) => {
                if received == 0 {
                    // The pool, which holds the sending side, is gone.
                    break;
                }
                let now = Instant::now();
                for request in requests.drain(..) {
                    owner.record(request, now);
                }
            }
            _ = tick.tick() => {
                let now = Instant::now();
                for addr in owner.core.tick(now) {
                    if let Some(probe) = owner.probes.remove(&addr) {
                        probe.abort();
                    }
                }
                owner.fall_back(now);
                owner.feed_fleet_verdicts(now);
            }
        }
        owner.publish();
    }
    owner.stop();
}

impl Owner {
    fn record(&mut self, request: RequestVerdict, now: Instant) {
        self.core
            .record_request(request.addr, request.verdict, &request.detail, now);
    }

    /// Apply every verdict waiting in the queue now.
    fn take_queued(&mut self, verdicts: &mut mpsc::Receiver<RequestVerdict>) {
        let now = Instant::now();
        while let Ok(request) = verdicts.try_recv() {
            self.record(request, now);
        }
    }

    /// Apply one message; `true` when the pool is shutting down.
    fn handle(&mut self, message: Message) -> bool {
        let now = Instant::now();
        match message {
            Message::Probe { addr, ok, detail } => {
                if let Some(role) = self.fleet.probes(addr) {
                    self.core.count_fleet_probe(role);
                }
                self.core.record_probe(addr, ok, &detail, now);
            }
            Message::Fleet { fleet } => {
                let known: Vec<SocketAddr> = self.core.addresses().collect();
                self.fleet.follow(fleet.as_ref(), known);
                self.core.set_fleet_fallback(false);
                self.sync_probes();
                self.feed_fleet_verdicts(now);
            }
            Message::FleetLost => {
                let grace = self.core.settings().policy.health_check.interval.get() * 2;
                self.fleet.lost(now, grace);
            }
            Message::Update {
                roster,
                settings,
                done,
            } => {
                let spec = ProbeSpec {
                    check: settings.policy.health_check.clone(),
                    http2: settings.http2,
                };
                self.health_check.send_if_modified(|current| {
                    let changed = *current != spec;
                    *current = spec;
                    changed
                });
                self.core.update(&roster, settings, now);
                self.sync_probes();
                self.publish();
                let _ = done.send(());
                let endpoints = roster.len();
                drop(roster);
                crate::memory::roster_applied(endpoints);
            }
            Message::LocalZone { zone } => {
                self.core.set_local_zone(zone);
                self.publish();
            }
            Message::View { reply } => {
                self.publish();
                let _ = reply.send(self.core.view(now));
            }
            Message::Shutdown { done } => {
                self.stop();
                let _ = done.send(());
                return true;
            }
        }
        false
    }

    fn publish(&mut self) {
        if let Some(routing) = self.core.snapshot(Instant::now()) {
            self.published.store(Arc::new(routing));
        }
    }

    /// One probe task per endpoint this sidecar probes itself (all of them, unless fleet health
    /// has others check some) while a check is configured, none while probes are off (a
    /// waiting task per endpoint was a quarter of the memory of a large pool). An endpoint no
    /// longer probed here loses what its probes said.
    fn sync_probes(&mut self) {
        let probing = self.core.settings().policy.health_check.kind != HealthCheckType::None;
        let wanted: Vec<SocketAddr> = if probing {
            self.core
                .addresses()
                .filter(|a| self.fleet.probes(*a).is_some())
                .collect()
        } else {
            Vec::new()
        };
        let stopped: Vec<SocketAddr> = self
            .probes
            .keys()
            .filter(|a| !wanted.contains(a))
            .copied()
            .collect();
        for addr in stopped {
            if let Some(probe) = self.probes.remove(&addr) {
                probe.abort();
            }
            self.core.forget_own_probes(addr);
        }
        for addr in wanted {
            if !self.probes.contains_key(&addr) {
                // Falling back, every endpoint's probe starts at once in every sidecar of the
                // fleet: spread them over an interval (their health is known meanwhile).
                let start = match self.fleet.probes(addr) {
                    Some(fleet::Role::Fallback) => FirstProbe::Spread,
                    _ => FirstProbe::Soon,
                };
                self.start_probe(addr, start);
            }
        }
        if self.probes.is_empty() {
            // Give back the table's memory too.
            self.probes.shrink_to_fit();
        }
    }

    /// Probe every endpoint here once the controller has been gone for the grace (fleet
    /// health): at the moment it runs out, or at the first tick after.
    fn fall_back(&mut self, now: Instant) {
        if self.fleet.expire(now) {
            tracing::warn!(
                pool = self.core.name(),
                "no word from the controller for two probe intervals: probing every endpoint here"
            );
            self.core.set_fleet_fallback(true);
            self.sync_probes();
        }
    }

    /// Feed the health machine the fleet's verdicts that are due (fleet health).
    fn feed_fleet_verdicts(&mut self, now: Instant) {
        let check = &self.core.settings().policy.health_check;
        if check.kind == HealthCheckType::None {
            return;
        }
        let interval = check.interval.get();
        let due = self.fleet.due(self.core.addresses(), now, interval);
        for feed in due {
            let passing = feed.verdict == fleet::Verdict::Passing;
            self.core.record_fleet_verdict(feed.addr, passing, now);
        }
    }

    fn start_probe(&mut self, addr: SocketAddr, start: FirstProbe) {
        let evidence = self.evidence.clone();
        let report = move |ok: bool, detail: String| {
            evidence
                .upgrade()
                .is_some_and(|tx| tx.send(Message::Probe { addr, ok, detail }).is_ok())
        };
        let task = tokio::spawn(probe::run(
            addr,
            self.health_check.subscribe(),
            start,
            report,
        ));
        if let Some(old) = self.probes.insert(addr, task.abort_handle()) {
            old.abort();
        }
    }

    fn stop(&mut self) {
        for (_, probe) in self.probes.drain() {
            probe.abort();
        }
        self.core.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::VERDICT_QUEUE;
    use crate::health::machine::State;
    use crate::metrics::Metrics;
    use crate::outcome::Verdict;
    use crate::pool::Pool;

    #[tokio::test]
    async fn a_full_verdict_queue_drops_and_counts_and_a_question_waits_for_what_was_queued() {
        let metrics = Arc::new(Metrics::new().unwrap());
        let addr = "127.0.0.1:9".parse().unwrap();
        let pool = Pool::with_one_endpoint("shop/web", addr, Arc::clone(&metrics)).await;
        // On this current-thread runtime the owner cannot run until the test yields: every
        // verdict offered meanwhile waits in the queue, and those past its room are dropped.
        for _ in 0..VERDICT_QUEUE + 10 {
            pool.record_verdict(addr, Verdict::Success, "");
        }
        let dropped = metrics.verdicts_dropped.with_label_values(&["shop/web"]);
        assert_eq!(dropped.get(), 10);
        // The question comes after the queued verdicts: with probes off, a success makes the
        // new endpoint Healthy, so an answer given before them would still say Unknown.
        let view = pool.view().await.expect("pool running");
        assert_eq!(view.endpoints[0].health.state, State::Healthy);
        // Once the owner caught up there is room again.
        pool.record_verdict(addr, Verdict::Success, "");
        assert_eq!(dropped.get(), 10);
    }
}
