//! A request the access log samples in (`crate::access_log`): what is known of it when it
//! arrives ([`Arrival`], taken from its head before anything is forwarded), what the request
//! loop says of its answer ([`Facts`]), and its response body on the way to the client
//! ([`LoggedBody`]), counted, whose end, break or drop (the client left) writes the line.
//! A request the log does not sample never reaches this module.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::client_body::Progress;
use crate::access_log::{AccessLog, End, Entry, path_of};
use crate::local_answer::LocalReason;
use crate::poll_clock;
use crate::upstream::{BoxError, ProxyBody};

/// What the request loop knows of how a request was answered.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Facts {
    /// The reason of an answer the sidecar made itself.
    pub reason: Option<&'static str>,
    /// The endpoint that answered, else the last one tried.
    pub endpoint: Option<SocketAddr>,
    pub tries: usize,
    /// When the endpoint's response headers arrived.
    pub first_byte: Option<Instant>,
}

/// A sampled request, from its arrival until its line is written.
pub(super) struct Arrival {
    log: Arc<AccessLog>,
    received: Instant,
    client: Arc<Progress>,
    entry: Entry,
}

pin_project_lite::pin_project! {
    /// A response body on its way to the client, counted; its line is written when it ends,
    /// breaks, or is dropped unfinished.
    pub(super) struct LoggedBody {
        #[pin]
        inner: ProxyBody,
        arrival: Option<Box<Arrival>>,
    }

    impl PinnedDrop for LoggedBody {
        fn drop(this: Pin<&mut Self>) {
            if let Some(arrival) = this.project().arrival.take() {
                arrival.write(End::ClientGone);
            }
        }
    }
}

impl Facts {
    /// An answer the sidecar made itself, after `tried`.
    pub(super) fn local(reason: LocalReason, tried: &[SocketAddr]) -> Self {
        Self {
            reason: Some(reason.as_str()),
            endpoint: tried.last().copied(),
            tries: tried.len(),
            first_byte: None,
        }
    }
}

impl Arrival {
    /// A request as it arrives, if `log` samples it in; `authority` is its `Host`.
    pub(super) fn sampled(
        log: &Arc<AccessLog>,
        pool: &str,
        parts: &Parts,
        authority: Option<&HeaderValue>,
        received: Instant,
        client: &Arc<Progress>,
    ) -> Option<Box<Self>> {
        if !log.sampled() {
            return None;
        }
        Some(Box::new(Self {
            log: Arc::clone(log),
            received,
            client: Arc::clone(client),
            entry: Entry {
                start: SystemTime::now(),
                pool: pool.into(),
                method: parts.method.clone(),
                authority: authority.cloned(),
                path: path_of(&parts.uri),
                version: parts.version,
                status: 0,
                reason: None,
                endpoint: None,
                tries: 0,
                duration: std::time::Duration::ZERO,
                first_byte: None,
                request_bytes: 0,
                response_bytes: 0,
                end: End::ClientGone,
            },
        }))
    }

    /// The answer is ready: its body carries the line to the end.
    pub(super) fn answered(
        mut self: Box<Self>,
        response: Response<ProxyBody>,
        facts: Facts,
    ) -> Response<ProxyBody> {
        let entry = &mut self.entry;
        entry.status = response.status().as_u16();
        entry.reason = facts.reason;
        entry.endpoint = facts.endpoint;
        entry.tries = u32::try_from(facts.tries).unwrap_or(u32::MAX);
        entry.first_byte = facts
            .first_byte
            .map(|at| at.saturating_duration_since(self.received));
        let (parts, inner) = response.into_parts();
        if inner.is_end_stream() {
            self.write(End::Complete);
            return Response::from_parts(parts, inner);
        }
        let body = LoggedBody {
            inner,
            arrival: Some(self),
        };
        Response::from_parts(parts, body.boxed_unsync())
    }

    /// An upgraded connection's line, once its tunnel has closed: status 101, the endpoint, the
    /// tries behind it, and the bytes that went each way through the tunnel.
    pub(super) fn tunnel_closed(
        mut self: Box<Self>,
        endpoint: SocketAddr,
        tries: usize,
        answered_at: Instant,
        (to_endpoint, to_client): (u64, u64),
    ) {
        let entry = &mut self.entry;
        entry.status = 101;
        entry.endpoint = Some(endpoint);
        entry.tries = u32::try_from(tries).unwrap_or(u32::MAX);
        entry.first_byte = Some(answered_at.saturating_duration_since(self.received));
        entry.request_bytes = to_endpoint;
        entry.response_bytes = to_client;
        self.finish(End::Tunnel);
    }

    /// The line, ended as `end`, to the log.
    pub(super) fn write(mut self: Box<Self>, end: End) {
        self.entry.request_bytes = self.client.received_bytes();
        self.finish(end);
    }

    fn finish(mut self: Box<Self>, end: End) {
        self.entry.end = end;
        self.entry.duration = poll_clock::since(self.received);
        self.log.write(self.entry);
    }
}

impl Body for LoggedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let end = match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(arrival), Some(data)) = (this.arrival.as_mut(), frame.data_ref()) {
                    arrival.entry.response_bytes += data.len() as u64;
                }
                this.inner.is_end_stream().then_some(End::Complete)
            }
            Poll::Ready(Some(Err(_))) => Some(End::ResponseError),
            Poll::Ready(None) => Some(End::Complete),
            Poll::Pending => None,
        };
        if let Some(end) = end
            && let Some(arrival) = this.arrival.take()
        {
            arrival.write(end);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
