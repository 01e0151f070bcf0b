//! Idle HTTP/1.1 keep-alive connections of one endpoint: a stack, most recently used on top, so
//! a burst reuses warm connections and the cold ones at the bottom expire. The lock is this
//! endpoint's alone and is never held across an await.

use std::time::Duration;

use hyper::client::conn::http1;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::ProxyBody;

/// Idle connections kept per endpoint; more are closed when they come back.
const MAX_IDLE_PER_ENDPOINT: usize = 256;

#[derive(Default)]
pub(super) struct IdleStack {
    /// Most recently used last, with when each went idle.
    stack: Mutex<Vec<(http1::SendRequest<ProxyBody>, Instant)>>,
}

impl IdleStack {
    /// A live idle connection, if any. A connection comes back the moment its response body
    /// ends, a hair before its task marks it ready for the next request: wait briefly for that
    /// instead of discarding it. A dead one fails `ready` at once and the next is tried.
    pub(super) async fn checkout(
        &self,
        wait_ready: Duration,
    ) -> Option<http1::SendRequest<ProxyBody>> {
        loop {
            let (mut tx, _) = self.stack.lock().pop()?;
            if tx.is_closed() {
                continue;
            }
            if tx.is_ready() {
                return Some(tx);
            }
            if let Ok(Ok(())) = tokio::time::timeout(wait_ready, tx.ready()).await {
                return Some(tx);
            }
        }
    }

    pub(super) fn put(&self, tx: http1::SendRequest<ProxyBody>, now: Instant) {
        if tx.is_closed() {
            return;
        }
        let mut stack = self.stack.lock();
        if stack.len() < MAX_IDLE_PER_ENDPOINT {
            stack.push((tx, now));
        }
    }

    /// Close connections idle for longer than `max_idle` and ones the endpoint closed.
    pub(super) fn expire(&self, max_idle: Duration, now: Instant) {
        self.stack.lock().retain(|(tx, since)| {
            !tx.is_closed() && now.saturating_duration_since(*since) < max_idle
        });
    }

    pub(super) fn clear(&self) {
        self.stack.lock().clear();
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.stack.lock().len()
    }
}
