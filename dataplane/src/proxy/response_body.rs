//! Response bodies on their way back to the application. `TrackedBody` streams an endpoint's
//! body frame by frame and, when it ends, gives the connection back to the endpoint and releases
//! the in-flight count; if it breaks off, or sends nothing for the response-body idle timeout
//! while we wait on it, the stream is cut and the failure is recorded against the endpoint (it
//! is the endpoint's body), unless the client's own request body broke first (an endpoint that
//! echoes a stream stops when its input does: the client's fault); if it is dropped early (the client left), the connection is closed
//! rather than reused and the count is still released. A gRPC answer whose `grpc-status` comes in
//! the trailers is judged here, when they arrive (`super::grpc`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::client_body::Progress;
use super::grpc;
use super::headers::strip_hop_by_hop;
use crate::balance::InFlight;
use crate::outcome::Verdict;
use crate::pool::{Endpoint, Pool};
use crate::upstream::{BoxError, ProxyBody, Release};

pin_project_lite::pin_project! {
    /// An endpoint's response body, tracked until it ends.
    pub(super) struct TrackedBody {
        #[pin]
        inner: Incoming,
        idle: Duration,
        // Armed while we wait on the endpoint, from the first `Pending`.
        waiting: Option<Pin<Box<Sleep>>>,
        done: Option<Done>,
    }
}

/// What is settled when the body ends.
struct Done {
    /// The balancer's in-flight count; `None` for a kept answer, already settled.
    guard: Option<InFlight>,
    /// How the balancer should count this answer once it has been read.
    verdict: Verdict,
    release: Release,
    pool: Arc<Pool>,
    endpoint: Arc<Endpoint>,
    started: Instant,
    client: Arc<Progress>,
    /// The answer's verdict waits for its `grpc-status` trailer (and is recorded against the
    /// endpoint here, not at the headers).
    grpc_trailers: bool,
    /// The `grpc-status` trailer, once seen.
    grpc_status: Option<grpc::Code>,
}

/// What the endpoint's response needs to be tracked.
pub(super) struct Answered {
    pub response: Response<Incoming>,
    pub release: Release,
    pub guard: Option<InFlight>,
    pub endpoint: Arc<Endpoint>,
    pub started: Instant,
    /// The client's request body, to tell whose fault a broken response is.
    pub client: Arc<Progress>,
    /// A gRPC answer whose outcome is in the trailers still to come.
    pub grpc_trailers: bool,
}

impl TrackedBody {
    /// Wrap an endpoint's response so its end releases the connection and the in-flight count.
    pub(super) fn wrap(answered: Answered, pool: Arc<Pool>) -> Response<ProxyBody> {
        let verdict = Verdict::from_status(answered.response.status().as_u16());
        let idle = pool.tuning().response_body_idle;
        let (mut parts, inner) = answered.response.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        let mut body = TrackedBody {
            inner,
            idle,
            waiting: None,
            done: Some(Done {
                guard: answered.guard,
                verdict,
                release: answered.release,
                pool,
                endpoint: answered.endpoint,
                started: answered.started,
                client: answered.client,
                grpc_trailers: answered.grpc_trailers,
                grpc_status: None,
            }),
        };
        if body.inner.is_end_stream()
            && let Some(done) = body.done.take()
        {
            done.ended();
        }
        Response::from_parts(parts, body.boxed_unsync())
    }
}

impl Done {
    /// A frame went by: the trailers of a gRPC answer say how the call went.
    fn saw(&mut self, frame: &Frame<Bytes>) {
        if self.grpc_trailers
            && let Some(code) = frame.trailers_ref().and_then(grpc::status)
        {
            self.grpc_status = Some(code);
            self.verdict = Verdict::from_status(grpc::http_equivalent(code));
        }
    }

    fn ended(mut self) {
        if self.grpc_trailers {
            let detail = match self.grpc_status {
                // A success needs no words (and no allocation per call).
                Some(_) if !self.verdict.is_failure() => String::new(),
                Some(code) => format!("grpc-status {}", code as i32),
                None => {
                    // The spec makes a missing status an error; the endpoint sent it so.
                    self.verdict = Verdict::ServerError;
                    "the gRPC answer ended without a grpc-status".to_owned()
                }
            };
            self.pool
                .record_verdict(self.endpoint.addr, self.verdict, &detail);
        }
        self.endpoint.upstream.release(self.release);
        if let Some(guard) = self.guard {
            let now = Instant::now();
            guard.finish(self.verdict, now - self.started, now);
        }
    }

    fn broke(self, detail: &str) {
        let verdict = if self.client.fault().is_some() {
            Verdict::NotTheEndpoint
        } else {
            // The body broke off or stalled: a connection-level failure, not an answer.
            Verdict::ConnectionFailure
        };
        self.pool
            .record_verdict(self.endpoint.addr, verdict, detail);
        if let Some(guard) = self.guard {
            let now = Instant::now();
            guard.finish(verdict, now - self.started, now);
        }
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Ready(None) => {
                if let Some(done) = this.done.take() {
                    done.ended();
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(error))) => {
                if let Some(done) = this.done.take() {
                    done.broke(&format!("response body failed: {error}"));
                }
                Poll::Ready(Some(Err(Box::new(error))))
            }
            Poll::Ready(Some(Ok(frame))) => {
                *this.waiting = None;
                if let Some(done) = this.done.as_mut() {
                    done.saw(&frame);
                }
                // hyper stops polling a body that says it has ended, so finish here too.
                if this.inner.is_end_stream()
                    && let Some(done) = this.done.take()
                {
                    done.ended();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                if this.idle.is_zero() || this.done.is_none() {
                    return Poll::Pending;
                }
                let idle = *this.idle;
                let timer = this
                    .waiting
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let detail = format!(
                    "response body sent nothing for {}",
                    humantime::format_duration(idle)
                );
                if let Some(done) = this.done.take() {
                    done.broke(&detail);
                }
                Poll::Ready(Some(Err(detail.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
