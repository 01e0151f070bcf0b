//! Response bodies on their way back to the application. `TrackedBody` streams an endpoint's
//! body frame by frame and, when it ends, gives the HTTP/1 connection back to the endpoint's
//! pool and releases the in-flight count; if it fails midway, the failure is recorded against the
//! endpoint; if it is dropped early (the client left), the connection is closed rather than reused
//! and the count is still released. `error_response` is every answer the sidecar makes itself:
//! an honest status, a reason header a person can grep for, and a one-line body.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::time::Instant;

use super::request::Release;
use super::upstream::{BoxError, ProxyBody};
use crate::balance::{InFlight, Outcome};
use crate::pool::{AttemptOutcome, Endpoint, Pool};

/// The header carrying why the sidecar answered itself.
pub const REASON_HEADER: &str = "x-rollcall-reason";

/// An answer made by the sidecar: `status`, `x-rollcall-reason: reason`, and `message`.
pub fn error_response(
    status: StatusCode,
    reason: &'static str,
    message: &str,
) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("{message}\n")))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(REASON_HEADER, HeaderValue::from_static(reason));
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

pin_project_lite::pin_project! {
    /// An endpoint's response body, tracked until it ends.
    pub struct TrackedBody {
        #[pin]
        inner: Incoming,
        done: Option<Done>,
    }
}

struct Done {
    guard: InFlight,
    /// How the balancer should count this answer once it has been read.
    outcome: Outcome,
    release: Release,
    pool: Arc<Pool>,
    endpoint: Arc<Endpoint>,
    started: Instant,
}

impl TrackedBody {
    /// Wrap an endpoint response so its end releases the connection and the in-flight count.
    pub fn wrap(
        response: Response<Incoming>,
        guard: InFlight,
        release: Release,
        pool: Arc<Pool>,
        endpoint: Arc<Endpoint>,
        started: Instant,
    ) -> Response<ProxyBody> {
        let outcome = if response.status().is_server_error() {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        let (mut parts, inner) = response.into_parts();
        super::headers::strip_hop_by_hop(&mut parts.headers);
        let mut body = TrackedBody {
            inner,
            done: Some(Done {
                guard,
                outcome,
                release,
                pool,
                endpoint,
                started,
            }),
        };
        if body.inner.is_end_stream() {
            body.finish_ok();
        }
        Response::from_parts(parts, body.boxed_unsync())
    }

    fn finish_ok(&mut self) {
        if let Some(done) = self.done.take() {
            done.finish(None);
        }
    }
}

impl Done {
    fn finish(self, error: Option<&hyper::Error>) {
        match error {
            None => {
                if let Some(tx) = self.release {
                    self.endpoint.upstream.release(tx);
                }
                let now = Instant::now();
                self.guard.finish(self.outcome, now - self.started, now);
            }
            Some(error) => {
                let now = Instant::now();
                self.pool.record_attempt(
                    &self.endpoint,
                    AttemptOutcome::Reset,
                    &format!("response body failed: {error}"),
                    now - self.started,
                );
                self.guard.finish(Outcome::Failure, now - self.started, now);
            }
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
        let polled = this.inner.as_mut().poll_frame(cx);
        match &polled {
            Poll::Ready(None) => {
                if let Some(done) = this.done.take() {
                    done.finish(None);
                }
            }
            Poll::Ready(Some(Err(error))) => {
                if let Some(done) = this.done.take() {
                    done.finish(Some(error));
                }
            }
            Poll::Ready(Some(Ok(_))) => {
                // hyper stops polling a body that says it has ended, so finish here too.
                if this.inner.is_end_stream()
                    && let Some(done) = this.done.take()
                {
                    done.finish(None);
                }
            }
            Poll::Pending => {}
        }
        polled.map(|frame| frame.map(|r| r.map_err(|e| Box::new(e) as BoxError)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
