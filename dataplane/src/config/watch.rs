//! Picks up a changed config file without a restart. The file is re-read every `interval` and at
//! once on SIGHUP; a file whose bytes did not change (same SHA-256, so a large roster file is
//! not kept twice in memory) is not re-parsed. Polling rather than inotify because Kubernetes
//! updates a mounted ConfigMap by swapping a symlink, which file-event watchers miss unless
//! they watch the right directory, while a read every second is cheap and always right. A
//! refused file is logged with its reason and counted; the last good config keeps serving.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ring::digest::{Digest, SHA256, digest};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::SidecarConfig;
use crate::metrics::Metrics;

/// Watch `path`, publishing each new valid config on `tx`. `loaded` is the text the running
/// config came from, so a change made between loading and watching is not missed.
pub fn spawn(
    path: PathBuf,
    loaded: Vec<u8>,
    interval: Duration,
    tx: mpsc::Sender<SidecarConfig>,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(s) => Some(s),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGHUP; reloading on file change only");
                None
            }
        };
        let mut last_digest: Option<Digest> = Some(digest(&SHA256, &loaded));
        drop(loaded);
        loop {
            let forced = tokio::select! {
                _ = tokio::time::sleep(interval) => false,
                Some(()) = async { match hangup.as_mut() { Some(s) => s.recv().await, None => std::future::pending().await } } => true,
            };
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(error) => {
                    if forced || last_digest.is_some() {
                        tracing::warn!(path = %path.display(), %error, "config file unreadable; keeping the last good config");
                        metrics.config_reloads.with_label_values(&["error"]).inc();
                    }
                    last_digest = None;
                    continue;
                }
            };
            let seen = digest(&SHA256, &bytes);
            if !forced && last_digest.as_ref().map(Digest::as_ref) == Some(seen.as_ref()) {
                continue;
            }
            last_digest = Some(seen);
            let text = String::from_utf8_lossy(&bytes);
            match SidecarConfig::parse(&text, &path.display().to_string()) {
                Ok(config) => {
                    metrics.config_reloads.with_label_values(&["applied"]).inc();
                    tracing::info!(path = %path.display(), pools = config.pools.len(), "config reloaded");
                    if tx.send(config).await.is_err() {
                        return;
                    }
                }
                Err(error) => {
                    metrics.config_reloads.with_label_values(&["refused"]).inc();
                    tracing::error!(%error, "config refused; keeping the last good config");
                }
            }
        }
    })
}
