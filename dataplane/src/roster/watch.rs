//! The roster client: one `Watch` stream at a time, each message through the delta
//! `Assembler` (deltas and parts become complete states; what it holds is named on the next
//! stream, so a reconnect resends nothing unchanged) and the `Book`, the resulting
//! configuration into `Runtime::apply`. Fleet-health messages go to their pool once it runs the
//! roster version they speak of (`FleetMessages`); a lost stream tells every pool. When the
//! stream fails or ends the pools keep their last roster and the client reconnects after a
//! jittered back-off; the back-off starts over once a stream has delivered a message.

use std::collections::HashMap;
use std::sync::Arc;

use rollcall_api::delta::{Assembled, Assembler};
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{FleetHealth, PoolRef, WatchRequest, ZONE_METADATA};
use tokio::sync::watch;

use super::{Book, Client, Outcome, RosterOptions, Versions};
use crate::runtime::Runtime;

pub(super) async fn run(
    mut client: Client,
    options: RosterOptions,
    runtime: Arc<Runtime>,
    versions: watch::Sender<Versions>,
) {
    let request = pb::WatchRequest::from(&WatchRequest {
        sidecar: options.sidecar.clone(),
        pools: options.pools.iter().map(|b| b.pool.clone()).collect(),
        accepts_deltas: true,
        held: Vec::new(),
        fleet_health: options.fleet_health,
    });
    let mut book = Book::new(&options.pools);
    // What the streams delivered, kept across them so a reconnect can name what it holds.
    let mut assembler = Assembler::new();
    let mut attempt: u32 = 0;
    // One warning per outage: the stream's end or the first failed attempt, not every retry.
    let mut outage_logged = false;
    let metrics = Arc::clone(runtime.metrics());
    loop {
        book.new_stream();
        assembler.new_stream();
        let mut request = request.clone();
        request.held = assembler.held_rosters();
        match client.watch(request).await {
            Ok(response) => {
                tracing::info!(controller = %options.controller, "watching rosters");
                if let Some(zone) = response
                    .metadata()
                    .get(ZONE_METADATA)
                    .and_then(|v| v.to_str().ok())
                {
                    runtime.adopt_zone(zone);
                }
                metrics.controller_connected.set(1);
                let mut stream = response.into_inner();
                // Fleet-health messages waiting for the roster version they speak of.
                let mut fleets = FleetMessages::default();
                loop {
                    match stream.message().await {
                        Ok(Some(message)) if message.state.is_none() && message.fleet.is_some() => {
                            attempt = 0;
                            fleets.take(message, &book, &runtime);
                        }
                        Ok(Some(message)) => {
                            let message = match assembler.accept(message) {
                                Ok(Assembled::Complete(message)) => message,
                                Ok(Assembled::Partial) => continue,
                                Err(error) => {
                                    // The stream and this sidecar disagree on what it holds;
                                    // the pool is forgotten (`accept` dropped it), so the new
                                    // stream sends it complete.
                                    outage_logged = true;
                                    tracing::warn!(controller = %options.controller, %error, "roster delta does not apply; reconnecting for a snapshot");
                                    metrics
                                        .roster_updates
                                        .with_label_values(&["malformed"])
                                        .inc();
                                    break;
                                }
                            };
                            attempt = 0;
                            let outcome = book.apply(message);
                            log(&outcome);
                            metrics
                                .roster_updates
                                .with_label_values(&[outcome.label()])
                                .inc();
                            // Only the pool this message changed is applied: the others'
                            // endpoints are neither copied nor diffed again.
                            if let Some(pool) = outcome.changed() {
                                if let Some(config) = book.pool_config(pool)
                                    && let Err(error) = runtime.apply_pool(&config).await
                                {
                                    tracing::error!(pool = %config.name, %error, "roster not applied");
                                }
                                fleets.roster_moved(pool, &book, &runtime);
                            }
                            versions.send_if_modified(|v| {
                                let new = book.versions();
                                let modified = *v != new;
                                *v = new;
                                modified
                            });
                        }
                        Ok(None) => {
                            outage_logged = true;
                            tracing::warn!(controller = %options.controller, "controller ended the roster stream; routing on the last rosters");
                            break;
                        }
                        Err(status) => {
                            outage_logged = true;
                            tracing::warn!(controller = %options.controller, code = ?status.code(), message = status.message(), "roster stream failed; routing on the last rosters");
                            break;
                        }
                    }
                }
                metrics.controller_connected.set(0);
                runtime.fleet_lost();
            }
            Err(status) if !outage_logged => {
                outage_logged = true;
                tracing::warn!(controller = %options.controller, code = ?status.code(), message = status.message(), "cannot watch rosters; routing on the last rosters");
            }
            Err(status) => {
                tracing::debug!(controller = %options.controller, attempt, code = ?status.code(), message = status.message(), "cannot watch rosters");
            }
        }
        let delay = options.backoff.jittered(attempt);
        attempt = attempt.saturating_add(1);
        tracing::debug!(?delay, attempt, "reconnecting to the controller");
        tokio::time::sleep(delay).await;
    }
}

/// Fleet-health messages of one stream that wait for their roster: a pool follows one only
/// once it runs the roster version the message speaks of (its lists name that roster's
/// endpoints), and one overtaken by a newer roster is dropped (the controller sends another).
#[derive(Default)]
struct FleetMessages {
    waiting: HashMap<PoolRef, FleetHealth>,
}

impl FleetMessages {
    /// A `fleet` message arrived.
    fn take(&mut self, message: pb::RosterUpdate, book: &Book, runtime: &Runtime) {
        let parsed = message
            .pool
            .map(PoolRef::try_from)
            .and_then(Result::ok)
            .zip(
                message
                    .fleet
                    .as_ref()
                    .map(|f| FleetHealth::try_from(&**f))
                    .and_then(Result::ok),
            );
        let Some((pool, fleet)) = parsed else {
            tracing::warn!("fleet-health message without a usable pool or addresses; ignored");
            return;
        };
        self.waiting.insert(pool.clone(), fleet);
        self.roster_moved(&pool, book, runtime);
    }

    /// `pool` may run another roster version now: follow its message if it is for this one.
    fn roster_moved(&mut self, pool: &PoolRef, book: &Book, runtime: &Runtime) {
        let Some(fleet) = self.waiting.get(pool) else {
            return;
        };
        let running = book.version_of(pool);
        if running == Some(fleet.roster_version) {
            if let Some(fleet) = self.waiting.remove(pool) {
                tracing::debug!(%pool, assigned = fleet.assigned.len(), failing = fleet.failing.len(), probe_all = fleet.probe_all, "fleet health");
                runtime.follow_fleet(&pool.to_string(), Some(fleet));
            }
        } else if running.is_some_and(|v| v > fleet.roster_version) {
            self.waiting.remove(pool);
        }
    }
}

/// One line per message that matters; redundant ones only at debug.
fn log(outcome: &Outcome) {
    match outcome {
        Outcome::Applied {
            pool,
            version,
            routed,
            terminating,
            left_out,
        } => {
            tracing::info!(%pool, version, routed, terminating, left_out, "{outcome}");
        }
        Outcome::Unchanged { pool, version } => tracing::debug!(%pool, version, "{outcome}"),
        Outcome::Superseded {
            pool,
            version,
            seen,
        } => tracing::debug!(%pool, version, seen, "{outcome}"),
        Outcome::Refused {
            pool,
            version,
            error,
        } => tracing::warn!(%pool, version, %error, "{outcome}"),
        Outcome::Gone {
            pool,
            version,
            reason,
            message,
        } => tracing::warn!(%pool, version, %reason, %message, "{outcome}"),
        Outcome::Stale {
            pool,
            reason,
            message,
            has_roster,
        } => tracing::warn!(%pool, %reason, %message, has_roster, "{outcome}"),
        Outcome::Unrequested { pool } => tracing::warn!(%pool, "{outcome}"),
        Outcome::Malformed { error } => tracing::warn!(%error, "{outcome}"),
    }
}
