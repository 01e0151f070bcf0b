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
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::core::Core;
use super::routing::Routing;
use super::settings::PoolSettings;
use super::view::PoolView;
use crate::config::EndpointConfig;
use crate::health::probe::{self, ProbeSpec};
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
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut batch = Vec::with_capacity(BATCH);
    let mut requests = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
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
                for addr in owner.core.tick(Instant::now()) {
                    if let Some(probe) = owner.probes.remove(&addr) {
                        probe.abort();
                    }
                }
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
            Message::Probe { addr, ok, detail } => self.core.record_probe(addr, ok, &detail, now),
            Message::Update {
                roster,
                settings,
                done,
            } => {
                let spec = ProbeSpec {
                    check: settings.policy.health_check.clone(),
                    http2: settings.http2,
                };
                let probing = spec.check.kind != HealthCheckType::None;
                self.health_check.send_if_modified(|current| {
                    let changed = *current != spec;
                    *current = spec;
                    changed
                });
                let added = self.core.update(&roster, settings, now);
                self.sync_probes(probing, added);
                self.publish();
                let _ = done.send(());
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

    /// One probe task per endpoint while a check is configured, none while probes are off (a
    /// waiting task per endpoint was a quarter of the memory of a large pool): turning probes
    /// on starts every endpoint's, turning them off ends them all.
    fn sync_probes(&mut self, probing: bool, added: Vec<SocketAddr>) {
        if !probing {
            for (_, probe) in self.probes.drain() {
                probe.abort();
            }
        } else if self.probes.is_empty() {
            let all: Vec<SocketAddr> = self.core.addresses().collect();
            for addr in all {
                self.start_probe(addr);
            }
        } else {
            for addr in added {
                self.start_probe(addr);
            }
        }
        if self.probes.is_empty() {
            // Give back the table's memory too.
            self.probes.shrink_to_fit();
        }
    }

    fn start_probe(&mut self, addr: SocketAddr) {
        let evidence = self.evidence.clone();
        let report = move |ok: bool, detail: String| {
            evidence
                .upgrade()
                .is_some_and(|tx| tx.send(Message::Probe { addr, ok, detail }).is_ok())
        };
        let task = tokio::spawn(probe::run(addr, self.health_check.subscribe(), report));
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
