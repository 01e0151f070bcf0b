//! Response bodies on their way back to the application. `TrackedBody` streams an endpoint's
//! body frame by frame; when it ends, the connection goes back to the endpoint and the try's
//! record (`super::try_record`) is finished, judged by the `grpc-status` trailer for a gRPC
//! answer that carries its status there. If the body breaks off, or sends nothing for the
//! response-body idle timeout while we wait on it, the stream is cut, the connection closed, and
//! the record finished as a broken try. If it is dropped early (the client left), the connection
//! is closed rather than reused and the record, dropped with it, settles itself.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::time::{Sleep, sleep_until};

use super::client_body::Progress;
use super::grpc;
use super::headers::prepare_response_fields;
use super::try_record::TryRecord;
use crate::poll_clock;
use crate::pool::Endpoint;
use crate::upstream::{BoxError, EndpointBody, ProxyBody, Release};

pin_project_lite::pin_project! {
    /// An endpoint's response body, tracked until it ends.
    pub(super) struct TrackedBody<B = EndpointBody> {
        #[pin]
        inner: B,
        idle: Duration,
        // Armed while we wait on the endpoint, from the first `Pending`.
        waiting: Option<Pin<Box<Sleep>>>,
        done: Option<Done>,
    }
}

/// What is settled when the body ends.
struct Done {
    /// The try's record; `None` for a kept answer, whose try was settled when it was retried.
    record: Option<TryRecord>,
    release: Release,
    endpoint: Arc<Endpoint>,
    client: Arc<Progress>,
    /// The `grpc-status` trailer, once seen (looked for when the record says the answer is
    /// judged by its trailers).
    grpc_status: Option<grpc::Code>,
}

/// What the endpoint's response needs to be tracked.
pub(super) struct Answered<B = EndpointBody> {
    pub response: Response<B>,
    pub release: Release,
    /// The try's record, finished when the body ends; `None` for a kept answer.
    pub record: Option<TryRecord>,
    pub endpoint: Arc<Endpoint>,
    /// The client's request body, to tell whose fault a broken response is.
    pub client: Arc<Progress>,
}

impl<B> TrackedBody<B>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError> + std::fmt::Display,
{
    /// Wrap an endpoint's response so its end releases the connection and finishes the try;
    /// the body may send nothing for `idle` at most while we wait on it (zero: no limit).
    pub(super) fn wrap(answered: Answered<B>, idle: Duration) -> Response<ProxyBody> {
        let (mut parts, inner) = answered.response.into_parts();
        prepare_response_fields(&mut parts.headers);
        let mut body = TrackedBody {
            inner,
            idle,
            waiting: None,
            done: Some(Done {
                record: answered.record,
                release: answered.release,
                endpoint: answered.endpoint,
                client: answered.client,
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
    fn saw<D>(&mut self, frame: &Frame<D>) {
        if self
            .record
            .as_ref()
            .is_some_and(TryRecord::status_in_trailers)
            && let Some(code) = frame.trailers_ref().and_then(grpc::status)
        {
            self.grpc_status = Some(code);
        }
    }

    fn ended(self) {
        self.endpoint.upstream.release(self.release);
        if let Some(record) = self.record {
            record.body_ended(self.grpc_status, poll_clock::now());
        }
    }

    /// The connection is not given back (`release` is dropped: it closes).
    fn broke(self, detail: &str) {
        if let Some(record) = self.record {
            let client_fault = self.client.fault().is_some();
            record.body_broke(client_fault, detail, poll_clock::now());
        }
    }
}

impl<B> Body for TrackedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError> + std::fmt::Display,
{
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
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(Some(Ok(frame))) => {
                *this.waiting = None;
                if let Some(done) = this.done.as_mut() {
                    done.saw(&frame);
                }
                // hyper stops polling a body that says it has ended, so finish here too;
                // trailers are always a body's last frame.
                if (frame.is_trailers() || this.inner.is_end_stream())
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
                    .get_or_insert_with(|| Box::pin(sleep_until(poll_clock::now() + idle)));
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
