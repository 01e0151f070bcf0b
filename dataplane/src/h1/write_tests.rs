//! How `super::write::BodyWriter` splits a body into writes: a body with a length whose rest is
//! already at hand goes in one write with its head; a rest not yet there never holds back what
//! is; large pieces of a body without a length, or its last piece, go from where they lie.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::io::AsyncWrite;

use super::write::{BodyWriter, Framing};

/// A body of the pieces it was given; `None` is a poll that finds nothing yet (and wakes the
/// writer at once, as a socket becoming readable would).
struct Pieces(VecDeque<Option<Bytes>>);

impl Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.0.pop_front() {
            Some(Some(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Some(None) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => Poll::Ready(None),
        }
    }
}

/// A receiver that takes every write whole and keeps each as one entry.
#[derive(Default)]
struct Writes(Vec<Vec<u8>>);

impl AsyncWrite for Writes {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.0.push(buf.to_vec());
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let one: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        let n = one.len();
        self.0.push(one);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 16384\r\n\r\n";

fn piece(byte: u8, len: usize) -> Option<Bytes> {
    Some(Bytes::from(vec![byte; len]))
}

/// The writes `framing`'s body of `pieces` makes after `HEAD`, and the bytes they carry in all.
async fn writes(framing: Framing, pieces: Vec<Option<Bytes>>) -> (Vec<usize>, Vec<u8>) {
    let mut writer = BodyWriter::new(&framing, None);
    let mut body = Pieces(pieces.into());
    let mut sink = Writes::default();
    let mut out = HEAD.to_vec();
    let written = std::future::poll_fn(|cx| {
        writer.poll_write(Pin::new(&mut sink), Pin::new(&mut body), &mut out, cx)
    })
    .await;
    assert!(written.is_ok(), "the body is written whole: {written:?}");
    let sizes = sink.0.iter().map(Vec::len).collect();
    (sizes, sink.0.concat())
}

fn expected(pieces: &[(u8, usize)]) -> Vec<u8> {
    let mut all = HEAD.to_vec();
    for (byte, len) in pieces {
        all.extend(std::iter::repeat_n(*byte, *len));
    }
    all
}

#[tokio::test]
async fn a_length_bodys_rest_already_read_goes_in_the_same_write_as_its_first_part() {
    // The first read held the head and about half the body; the rest was read at once.
    let (sizes, bytes) = writes(
        Framing::Length(16384),
        vec![piece(b'a', 7950), piece(b'b', 8434)],
    )
    .await;
    assert_eq!(
        sizes,
        vec![HEAD.len() + 16384],
        "one write for head and body"
    );
    assert_eq!(bytes, expected(&[(b'a', 7950), (b'b', 8434)]));
}

#[tokio::test]
async fn a_rest_not_read_yet_does_not_hold_back_what_is() {
    let (sizes, bytes) = writes(
        Framing::Length(16384),
        vec![piece(b'a', 7950), None, piece(b'b', 8434)],
    )
    .await;
    assert_eq!(
        sizes,
        vec![HEAD.len() + 7950, 8434],
        "the first part goes when the body has nothing more yet"
    );
    assert_eq!(bytes, expected(&[(b'a', 7950), (b'b', 8434)]));
}

#[tokio::test]
async fn a_body_larger_than_the_gathering_goes_in_writes_of_at_most_what_fits() {
    let (sizes, bytes) = writes(
        Framing::Length(40_000),
        vec![
            piece(b'a', 10_000),
            piece(b'b', 10_000),
            piece(b'c', 20_000),
        ],
    )
    .await;
    // The head and the first piece are gathered; the second does not fit beside them and goes
    // from where it lies in the same write; the last piece (nothing follows) likewise.
    assert_eq!(sizes, vec![HEAD.len() + 20_000, 20_000]);
    assert_eq!(
        bytes,
        expected(&[(b'a', 10_000), (b'b', 10_000), (b'c', 20_000)])
    );
}

#[tokio::test]
async fn a_body_without_a_length_writes_each_large_piece_as_it_comes() {
    let (sizes, bytes) = writes(
        Framing::UntilClose,
        vec![piece(b'a', 8000), piece(b'b', 8000)],
    )
    .await;
    assert_eq!(sizes, vec![HEAD.len() + 8000, 8000]);
    assert_eq!(bytes, expected(&[(b'a', 8000), (b'b', 8000)]));
}
