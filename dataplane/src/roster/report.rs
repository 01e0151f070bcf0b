//! The health reporter: one `Report` stream at a time. Every `report_interval` it samples the
//! pools' views and sends what `health::Sent::due` says is due, so change reports are coalesced
//! to at most one per interval. The outbound queue is tiny and never waited on: when the
//! transport is slow a sample is skipped and its changes go out with the next one. When the
//! stream ends the reporter reconnects with jittered back-off and starts over with a full
//! report naming the sidecar.

use std::sync::Arc;
use std::time::SystemTime;

use futures_util::stream;
use rollcall_api::proto::v1 as pb;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

use super::health::Sent;
use super::{Client, RosterOptions, Versions};
use crate::runtime::Runtime;

pub(super) async fn run(
    client: Client,
    options: RosterOptions,
    runtime: Arc<Runtime>,
    versions: watch::Receiver<Versions>,
) {
    let mut attempt: u32 = 0;
    loop {
        let started = Instant::now();
        let (tx, rx) = mpsc::channel::<pb::HealthReport>(2);
        let outbound = stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|report| (report, rx))
        });
        let mut call_client = client.clone();
        let call = call_client.report(outbound);
        tokio::pin!(call);
        let mut sent = Sent::new(options.sidecar.clone());
        let mut tick = tokio::time::interval(options.report_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                _ = tick.tick() => {
                    let now = Instant::now();
                    let views = runtime.views().await;
                    let current = versions.borrow().clone();
                    let Some(due) = sent.due(&views, &current, options.heartbeat, now, SystemTime::now()) else {
                        continue;
                    };
                    let message = pb::HealthReport::from(&due.report);
                    if tx.try_send(message).is_ok() {
                        if !due.report.pools.is_empty() {
                            tracing::debug!(pools = due.report.pools.len(), "health reported");
                        }
                        sent.sent(due, now);
                    }
                }
            }
        };
        // A stream that carried a heartbeat's worth of reports was a working one.
        if started.elapsed() >= options.heartbeat.min(options.backoff.max) {
            attempt = 0;
        }
        match result {
            Ok(summary) => {
                let summary = summary.into_inner();
                tracing::warn!(
                    accepted = summary.accepted,
                    ignored = summary.ignored,
                    "controller closed the report stream"
                );
            }
            // One warning per outage; the retries after it at debug.
            Err(status) if attempt == 0 => {
                tracing::warn!(controller = %options.controller, code = ?status.code(), message = status.message(), "report stream failed");
            }
            Err(status) => {
                tracing::debug!(controller = %options.controller, attempt, code = ?status.code(), message = status.message(), "report stream failed");
            }
        }
        let delay = options.backoff.jittered(attempt);
        attempt = attempt.saturating_add(1);
        tokio::time::sleep(delay).await;
    }
}
