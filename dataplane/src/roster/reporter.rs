//! The health reporter: one report stream at a time. Every `report_interval` it samples the
//! pools' views and sends what `health::Sent::due` says is due, so change reports are coalesced
//! to at most one per interval. The outbound queue is small and never waited on while it holds
//! anything: when the transport is slow a sample is skipped and its changes go out with the
//! next one. It streams `ReportChanges` (each pool complete once, then only what changed, and
//! complete again when the controller asks) and falls back to `Report` (complete pools every
//! time) when the controller answers that it has no such method. When the stream ends the
//! reporter reconnects with jittered back-off and starts over with a full report naming the
//! sidecar.

use std::sync::Arc;
use std::time::SystemTime;

use futures_util::stream;
use rollcall_api::proto::v1 as pb;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tonic::{Code, Status};

use super::health::Sent;
use super::{Client, RosterOptions, Versions};
use crate::runtime::Runtime;

/// Messages queued for the transport: enough for a complete report of a pool in parts while
/// the queue is otherwise empty.
const QUEUE: usize = 64;

/// How one report stream ended.
enum Ended {
    Closed(pb::ReportSummary),
    /// The controller predates `ReportChanges`.
    Unimplemented,
    Failed(Status),
}

/// What one stream needs to sample and send.
struct Stream<'a> {
    options: &'a RosterOptions,
    runtime: &'a Runtime,
    versions: &'a watch::Receiver<Versions>,
    tx: mpsc::Sender<pb::HealthReport>,
    sent: Sent,
    tick: Interval,
}

pub(super) async fn run(
    client: Client,
    options: RosterOptions,
    runtime: Arc<Runtime>,
    versions: watch::Receiver<Versions>,
) {
    let mut attempt: u32 = 0;
    let mut changes = true;
    loop {
        let started = Instant::now();
        let ended = one_stream(&client, &options, &runtime, &versions, changes).await;
        // A stream that carried a heartbeat's worth of reports was a working one.
        if started.elapsed() >= options.heartbeat.min(options.backoff.max) {
            attempt = 0;
        }
        match ended {
            Ended::Unimplemented => {
                tracing::info!(controller = %options.controller, "controller takes complete reports only; reporting complete pools");
                changes = false;
                continue;
            }
            Ended::Closed(summary) => {
                tracing::warn!(
                    accepted = summary.accepted,
                    ignored = summary.ignored,
                    "controller closed the report stream"
                );
            }
            // One warning per outage; the retries after it at debug.
            Ended::Failed(status) if attempt == 0 => {
                tracing::warn!(controller = %options.controller, code = ?status.code(), message = status.message(), "report stream failed");
            }
            Ended::Failed(status) => {
                tracing::debug!(controller = %options.controller, attempt, code = ?status.code(), message = status.message(), "report stream failed");
            }
        }
        // The next stream may reach another (an upgraded) controller: try changes again.
        changes = true;
        let delay = options.backoff.jittered(attempt);
        attempt = attempt.saturating_add(1);
        tokio::time::sleep(delay).await;
    }
}

async fn one_stream(
    client: &Client,
    options: &RosterOptions,
    runtime: &Runtime,
    versions: &watch::Receiver<Versions>,
    changes: bool,
) -> Ended {
    let (tx, rx) = mpsc::channel::<pb::HealthReport>(QUEUE);
    let outbound = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|report| (report, rx))
    });
    let mut tick = tokio::time::interval(options.report_interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut s = Stream {
        options,
        runtime,
        versions,
        tx,
        sent: Sent::new(options.sidecar.clone(), changes),
        tick,
    };
    let mut call_client = client.clone();
    if !changes {
        let call = call_client.report(outbound);
        tokio::pin!(call);
        loop {
            tokio::select! {
                result = &mut call => return match result {
                    Ok(summary) => Ended::Closed(summary.into_inner()),
                    Err(status) => Ended::Failed(status),
                },
                _ = s.tick.tick() => s.sample().await,
            }
        }
    }
    let call = call_client.report_changes(outbound);
    tokio::pin!(call);
    let mut feedback = loop {
        tokio::select! {
            result = &mut call => match result {
                Ok(response) => break response.into_inner(),
                Err(status) if status.code() == Code::Unimplemented => return Ended::Unimplemented,
                Err(status) => return Ended::Failed(status),
            },
            _ = s.tick.tick() => s.sample().await,
        }
    };
    loop {
        tokio::select! {
            message = feedback.message() => match message {
                Ok(Some(message)) => {
                    if let Some(summary) = message.summary {
                        return Ended::Closed(summary);
                    }
                    for pool in message.resend {
                        tracing::debug!(pool = %format_args!("{}/{}", pool.namespace, pool.name), "controller asks for a complete report");
                        s.sent.forget(&format!("{}/{}", pool.namespace, pool.name));
                    }
                }
                Ok(None) => return Ended::Closed(pb::ReportSummary::default()),
                Err(status) => return Ended::Failed(status),
            },
            _ = s.tick.tick() => s.sample().await,
        }
    }
}

impl Stream<'_> {
    /// Sample the views and send what is due, all of it or (the queue is busy) none of it.
    async fn sample(&mut self) {
        let now = Instant::now();
        // The versions before the views: a roster applied between the two reads then shows
        // as a view newer than the version it is labelled with (the controller counts this
        // sidecar behind until the next sample), never as an old view under the new version
        // (a pool reported complete and empty under the version that filled it).
        let current = self.versions.borrow().clone();
        let views = self.runtime.views().await;
        let Some(due) = self.sent.due(
            &views,
            &current,
            self.options.heartbeat,
            now,
            SystemTime::now(),
        ) else {
            return;
        };
        let room = self.tx.capacity();
        // A report larger than the queue goes only into an empty queue, waiting for room.
        if room < due.reports.len() && room < self.tx.max_capacity() {
            return;
        }
        for report in &due.reports {
            if self.tx.send(pb::HealthReport::from(report)).await.is_err() {
                return;
            }
        }
        if due.pools > 0 {
            tracing::debug!(
                pools = due.pools,
                messages = due.reports.len(),
                "health reported"
            );
        }
        self.sent.sent(due, now);
    }
}
