//! The body of an answer read from the sidecar's own endpoint connection, as the client takes
//! it: framed by `crate::h1::read` (hyper's client's limits and refusals), data handed on as
//! slices of the connection's buffer. While it is read, an upload the endpoint answered early
//! goes on being written. At its end the connection goes back to its endpoint if it can carry
//! another request; dropped early, or broken, the connection closes with it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::{CUT, ConnSlot, DirectConn, Sending};
use crate::h1::body::Decoder;
use crate::h1::head::BodyLength;
use crate::h1::read::{Step, poll_body};
use crate::upstream::BoxError;

/// An answer's body on a connection of the sidecar's own.
pub struct DirectBody {
    /// `None` once the body has ended or failed.
    conn: Option<DirectConn>,
    decoder: Decoder,
    /// Both sides said the connection may carry another request.
    keep_alive: bool,
    slot: ConnSlot,
}

impl DirectBody {
    pub(super) fn new(
        conn: DirectConn,
        length: BodyLength,
        keep_alive: bool,
        slot: ConnSlot,
    ) -> Self {
        let mut body = Self {
            conn: Some(conn),
            decoder: Decoder::new(length),
            // A body that ends with the connection leaves nothing to reuse.
            keep_alive: keep_alive && length != BodyLength::UntilClose,
            slot,
        };
        if length == BodyLength::Empty {
            body.finish();
        }
        body
    }

    /// The body has ended: the connection goes back if it can carry another request (the
    /// upload went whole, and nothing the endpoint sent waits unasked), else it closes.
    fn finish(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let whole = matches!(conn.0.sending, Sending::Done);
        if self.keep_alive && whole && conn.0.buf.is_empty() {
            *self.slot.lock() = Some(conn);
        }
    }
}

impl Body for DirectBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let Some(conn) = this.conn.as_mut() else {
            return Poll::Ready(None);
        };
        let inner = &mut *conn.0;
        if inner.is_cut() {
            this.conn = None;
            return Poll::Ready(Some(Err(CUT.into())));
        }
        if let Some(why) = inner.poll_upload(cx) {
            this.conn = None;
            return Poll::Ready(Some(Err(why.into())));
        }
        match poll_body(&mut inner.io, &mut inner.buf, &mut this.decoder, cx) {
            Poll::Pending if inner.poll_cut(cx) => {
                this.conn = None;
                Poll::Ready(Some(Err(CUT.into())))
            }
            Poll::Pending => Poll::Pending,
            Poll::Ready(Step::Frame(frame)) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Step::Ended(last)) => {
                this.finish();
                Poll::Ready(last.map(Ok))
            }
            Poll::Ready(Step::Failed(error)) => {
                this.conn = None;
                Poll::Ready(Some(Err(Box::new(error))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.conn.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.conn, self.decoder.remaining()) {
            (None, _) => SizeHint::with_exact(0),
            (Some(_), Some(left)) => SizeHint::with_exact(left),
            (Some(_), None) => SizeHint::default(),
        }
    }
}
