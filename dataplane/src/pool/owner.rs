//! The one task that owns a pool's state (`Core`): it takes rosters, request verdicts and probe
//! results from one channel, in order, ticks four times a second, and publishes a new routing
//! snapshot after every batch that changed something. The request path never waits for it: it
//! reads the last snapshot and sends its verdicts without blocking. A question (`View`) or a
//! roster (`Update`) is answered only after everything sent before it has been applied and
//! published, so a caller always sees its own earlier evidence.

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

/// What the owner is told.
pub(super) enum Message {
    Request {
        addr: SocketAddr,
        verdict: Verdict,
        detail: String,
    },
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
    loop {
        tokio::select! {
            received = inbox.recv_many(&mut batch, BATCH) => {
                if received == 0 {
                    break;
                }
                for message in batch.drain(..) {
                    if owner.handle(message) {
                        return;
                    }
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
    /// Apply one message; `true` when the pool is shutting down.
    fn handle(&mut self, message: Message) -> bool {
        let now = Instant::now();
        match message {
            Message::Request {
                addr,
                verdict,
                detail,
            } => self.core.record_request(addr, verdict, &detail, now),
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
