//! The client's request body on its way to an endpoint. It is the client's, so its failures are
//! the client's: `ClientBody` wraps it and records, in a shared [`Progress`], whether it broke
//! (malformed framing, the client reset) or stalled past the idle timeout, and when it was all
//! received, which is when the request's clocks start. The request loop reads that record to
//! tell a client's fault from an endpoint's and never charges the endpoint for the former. It
//! also records when the body was last asked for data, and whether it then waited on the
//! client: an upload that stops because the endpoint stopped taking it (hyper stops asking) is
//! the endpoint's stall, not the client's.
//!
//! Small bodies (a known length up to 64 KiB) are read whole first so a retry can send them
//! again; larger or unknown-length ones stream once and are only retried while none of their
//! bytes have left.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep, sleep_until};

use crate::outcome::Outcome;
use crate::poll_clock;
use crate::upstream::{BoxError, ProxyBody};

/// Request bodies up to this size are buffered so the request can be replayed on a retry.
const REPLAYABLE_BODY_LIMIT: u64 = 64 * 1024;

/// The request body as far as retries are concerned.
pub(super) enum RequestBody {
    /// Fully read (or empty): can be sent any number of times.
    Replayable(Bytes),
    /// Streaming: can be sent once; `None` once it has left.
    Streaming(Option<ProxyBody>),
}

/// What became of a client's body, shared between the body and the request loop.
#[derive(Debug)]
pub(super) struct Progress {
    /// 0: fine, 1: failed, 2: stalled.
    fault: AtomicU8,
    complete_at: Mutex<Option<Instant>>,
    changed: Notify,
    /// When the body was last polled for data.
    last_poll: Mutex<Instant>,
    /// The last poll found nothing from the client yet (we wait on the client, not the endpoint).
    waiting_on_client: AtomicBool,
    /// Body bytes received from the client.
    received: AtomicU64,
}

/// A client's request body as a connection engine hands it over: hyper's (`Incoming`), or the
/// fast engine's (`super::fast::FastBody`).
pub(super) trait ArrivingBody:
    Body<Data = Bytes, Error: Into<BoxError>> + Send + Unpin + 'static
{
    /// The whole body, when the engine holds all of it already: nothing to collect.
    fn whole(&mut self) -> Option<Bytes> {
        None
    }

    /// The engine writes an HTTP/1.1 client's answer head itself from the endpoint's bytes
    /// (`upstream::RawAnswer`), so an answer need not be typed for it.
    const RAW_ANSWERS: bool = false;
}

impl ArrivingBody for Incoming {}

pin_project_lite::pin_project! {
    /// A client's body, watched: faults and completion go to `progress`.
    pub(super) struct ClientBody<B> {
        #[pin]
        inner: B,
        idle: Duration,
        // Armed while we wait on the client, from the first `Pending`.
        waiting: Option<Pin<Box<Sleep>>>,
        progress: Arc<Progress>,
    }
}

// === impl RequestBody ===

impl RequestBody {
    /// Read a small body whole so it can be replayed; stream a large or unknown-length one.
    /// `Err` is the client's fault (`ClientBodyFailed` or `ClientBodyStalled`) and a sentence.
    pub(super) async fn prepare<B: ArrivingBody>(
        mut body: B,
        idle: Duration,
        progress: &Arc<Progress>,
    ) -> Result<Self, (Outcome, String)> {
        if body.is_end_stream() {
            progress.complete(poll_clock::now());
            return Ok(Self::Replayable(Bytes::new()));
        }
        if let Some(whole) = body.whole() {
            progress
                .received
                .fetch_add(whole.len() as u64, Ordering::Relaxed);
            progress.complete(poll_clock::now());
            return Ok(Self::Replayable(whole));
        }
        let small = body
            .size_hint()
            .upper()
            .is_some_and(|upper| upper <= REPLAYABLE_BODY_LIMIT);
        let watched = ClientBody {
            inner: body,
            idle,
            waiting: None,
            progress: Arc::clone(progress),
        };
        if !small {
            return Ok(Self::Streaming(Some(watched.boxed_unsync())));
        }
        match watched.collect().await {
            Ok(collected) => {
                progress.complete(poll_clock::now());
                Ok(Self::Replayable(collected.to_bytes()))
            }
            Err(error) => Err((
                progress.fault().unwrap_or(Outcome::ClientBodyFailed),
                error.to_string(),
            )),
        }
    }

    pub(super) fn take(&mut self) -> Option<ProxyBody> {
        match self {
            Self::Replayable(bytes) => Some(
                Full::new(bytes.clone())
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            ),
            Self::Streaming(body) => body.take(),
        }
    }

    /// Put back a body hyper returned unsent.
    pub(super) fn restore(&mut self, body: ProxyBody) {
        if let Self::Streaming(slot) = self {
            *slot = Some(body);
        }
    }

    pub(super) fn replayable(&self) -> bool {
        match self {
            Self::Replayable(_) => true,
            Self::Streaming(body) => body.is_some(),
        }
    }
}

// === impl Progress ===

impl Default for Progress {
    fn default() -> Self {
        Self {
            fault: AtomicU8::new(0),
            complete_at: Mutex::new(None),
            changed: Notify::new(),
            last_poll: Mutex::new(poll_clock::now()),
            waiting_on_client: AtomicBool::new(false),
            received: AtomicU64::new(0),
        }
    }
}

impl Progress {
    /// Start the endpoint's clock on the upload: it is being sent now.
    pub(super) fn sending(&self) {
        *self.last_poll.lock() = poll_clock::now();
        self.waiting_on_client.store(false, Ordering::Release);
    }

    /// When the endpoint will have taken nothing of the upload for `idle`, if it is the one
    /// holding it up (`None` while we wait on the client, whose own timer runs then).
    pub(super) fn endpoint_stall_at(&self, idle: Duration) -> Option<Instant> {
        if idle.is_zero() || self.waiting_on_client.load(Ordering::Acquire) {
            return None;
        }
        Some(*self.last_poll.lock() + idle)
    }

    fn polled(&self, waiting_on_client: bool) {
        *self.last_poll.lock() = poll_clock::now();
        self.waiting_on_client
            .store(waiting_on_client, Ordering::Release);
    }

    /// Body bytes received from the client so far.
    pub(super) fn received_bytes(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// The client's fault, if its body failed or stalled.
    pub(super) fn fault(&self) -> Option<Outcome> {
        match self.fault.load(Ordering::Acquire) {
            1 => Some(Outcome::ClientBodyFailed),
            2 => Some(Outcome::ClientBodyStalled),
            _ => None,
        }
    }

    /// When the whole body had been received.
    pub(super) fn completed_at(&self) -> Option<Instant> {
        *self.complete_at.lock()
    }

    /// Wait until the body has been received whole (forever if it never is).
    pub(super) async fn completed(&self) -> Instant {
        loop {
            let changed = self.changed.notified();
            if let Some(at) = self.completed_at() {
                return at;
            }
            changed.await;
        }
    }

    fn complete(&self, at: Instant) {
        let mut complete = self.complete_at.lock();
        if complete.is_none() {
            *complete = Some(at);
            drop(complete);
            self.changed.notify_waiters();
        }
    }

    pub(super) fn failed(&self, stalled: bool) {
        let _ = self.fault.compare_exchange(
            0,
            if stalled { 2 } else { 1 },
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
}

// === impl ClientBody ===

impl<B: ArrivingBody> Body for ClientBody<B> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        this.progress.polled(polled.is_pending());
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                *this.waiting = None;
                if let Some(data) = frame.data_ref() {
                    this.progress
                        .received
                        .fetch_add(data.len() as u64, Ordering::Relaxed);
                }
                if this.inner.is_end_stream() {
                    this.progress.complete(poll_clock::now());
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.progress.failed(false);
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                this.progress.complete(poll_clock::now());
                Poll::Ready(None)
            }
            Poll::Pending => {
                if this.idle.is_zero() {
                    return Poll::Pending;
                }
                let idle = *this.idle;
                let timer = this
                    .waiting
                    .get_or_insert_with(|| Box::pin(sleep_until(poll_clock::now() + idle)));
                if timer.as_mut().poll(cx).is_ready() {
                    this.progress.failed(true);
                    return Poll::Ready(Some(Err(format!(
                        "the client sent no body bytes for {}",
                        humantime::format_duration(idle)
                    )
                    .into())));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            self.progress.complete(poll_clock::now());
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
