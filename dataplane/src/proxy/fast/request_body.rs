//! A request's body on a connection the fast engine serves. A body the connection's buffer
//! already holds whole goes as one piece (`Whole`); any other is read from the socket as it
//! is asked for (`Streaming`), framed by `crate::h1::body`, its data handed on as slices of the
//! read buffer (never copied), a chunked body's trailers as a trailers frame. While a body
//! streams it holds the connection's read side, and gives it back when it ends or is dropped,
//! saying whether the body was read to its end: only then can the connection take another
//! request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use http_body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::net::tcp::OwnedReadHalf;

use crate::h1::body::Decoder;
pub(super) use crate::h1::read::{READ_CHUNK, make_room};
use crate::h1::read::{Step, poll_body};
use crate::proxy::client_body::ArrivingBody;
use crate::upstream::BoxError;

/// The connection's read side: the socket and what has been read from it but not used.
pub(super) struct ReadSide {
    pub io: OwnedReadHalf,
    pub buf: BytesMut,
}

/// Where a streaming body puts the read side back: with `true` when the body was read to its
/// end, so the connection may read its next request.
pub(super) type ReadSlot = Arc<Mutex<Option<(ReadSide, bool)>>>;

/// A request body the fast engine hands to the request path.
pub(crate) enum FastBody {
    /// No body, or one already handed over whole.
    Empty,
    Whole(Bytes),
    Streaming(Box<Streaming>),
}

/// A body read from the socket as it is asked for.
pub(crate) struct Streaming {
    read: Option<ReadSide>,
    decoder: Decoder,
    slot: ReadSlot,
    /// The client waits for `100 Continue` before it sends the body.
    expect: Option<Arc<Continue>>,
}

/// `Expect: 100-continue` between a body and its connection: the body says when it is first
/// asked for (hyper's server sends `100 Continue` then, not before: an answer made without the
/// body never invites it), the connection writes `100 Continue` and says it is sent.
#[derive(Default)]
pub(super) struct Continue {
    wanted: AtomicBool,
    sent: AtomicBool,
    connection: AtomicWaker,
    body: AtomicWaker,
}

impl Continue {
    /// Wait until the body is asked for.
    pub(super) async fn wanted(&self) {
        std::future::poll_fn(|cx| {
            self.connection.register(cx.waker());
            if self.wanted.load(Ordering::Acquire) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    /// `100 Continue` has gone to the client (or could not): the body may read on.
    pub(super) fn sent(&self) {
        self.sent.store(true, Ordering::Release);
        self.body.wake();
    }

    pub(super) fn is_sent(&self) -> bool {
        self.sent.load(Ordering::Acquire)
    }

    /// From the body: it is asked for; `true` once it may read.
    fn ask(&self, cx: &mut Context<'_>) -> bool {
        if self.sent.load(Ordering::Acquire) {
            return true;
        }
        self.body.register(cx.waker());
        self.wanted.store(true, Ordering::Release);
        self.connection.wake();
        self.sent.load(Ordering::Acquire)
    }
}

impl FastBody {
    /// A body still (partly) on the socket, framed by `decoder`; `expect`: the client waits for
    /// `100 Continue` first.
    pub(super) fn streaming(
        read: ReadSide,
        decoder: Decoder,
        slot: ReadSlot,
        expect: Option<Arc<Continue>>,
    ) -> Self {
        Self::Streaming(Box::new(Streaming {
            read: Some(read),
            decoder,
            slot,
            expect,
        }))
    }
}

impl FastBody {
    /// A whole body's bytes, once: the body is empty after.
    fn take_whole(&mut self) -> Option<Bytes> {
        match self {
            Self::Whole(bytes) => {
                let bytes = std::mem::take(bytes);
                *self = Self::Empty;
                Some(bytes)
            }
            _ => None,
        }
    }
}

impl ArrivingBody for FastBody {
    fn whole(&mut self) -> Option<Bytes> {
        self.take_whole()
    }

    const RAW_ANSWERS: bool = true;
}

impl Body for FastBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match this {
            Self::Streaming(streaming) => streaming.poll_frame(cx),
            Self::Empty | Self::Whole(_) => {
                Poll::Ready(this.take_whole().map(|b| Ok(Frame::data(b))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Empty => true,
            Self::Whole(bytes) => bytes.is_empty(),
            Self::Streaming(streaming) => streaming.read.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Empty => SizeHint::with_exact(0),
            Self::Whole(bytes) => SizeHint::with_exact(bytes.len() as u64),
            Self::Streaming(streaming) => match streaming.decoder.remaining() {
                Some(left) => SizeHint::with_exact(left),
                None => SizeHint::default(),
            },
        }
    }
}

impl Streaming {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(expect) = &self.expect {
            if !expect.ask(cx) {
                return Poll::Pending;
            }
            self.expect = None;
        }
        let Some(read) = self.read.as_mut() else {
            return Poll::Ready(None);
        };
        match poll_body(&mut read.io, &mut read.buf, &mut self.decoder, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Step::Frame(frame)) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Step::Ended(last)) => {
                self.give_back(true);
                Poll::Ready(last.map(Ok))
            }
            Poll::Ready(Step::Failed(error)) => {
                self.give_back(false);
                Poll::Ready(Some(Err(Box::new(error))))
            }
        }
    }

    /// Put the read side back for the connection, saying whether the body was read to its end
    /// (once given back, the body reads no more: a failure never follows a finish).
    fn give_back(&mut self, finished: bool) {
        if let Some(read) = self.read.take() {
            *self.slot.lock() = Some((read, finished));
        }
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        self.give_back(false);
    }
}
