//! How `super::write::BodyWriter` splits a body into writes: a body with a length whose rest is
//! already at hand goes in one write with its head; a rest not yet there never holds back what
//! is; large pieces of a body without a length, or its last piece, go from where they lie. And
//! what it writes: chunks framed, nothing lost or repeated when the receiver takes part of a
//! write, a body that breaks its length cut at the length or written as far as it came, and
//! refused either way.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::io::AsyncWrite;

use super::write::{BodyWriter, Framing, WriteError};

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

/// A receiver that keeps each write as one entry, taking at most `most` bytes of it (a socket
/// whose buffer is nearly full takes part of a write).
struct Writes {
    taken: Vec<Vec<u8>>,
    /// How many slices each write was given (2: gathered bytes and a piece written in place).
    slices: Vec<usize>,
    most: usize,
}

impl Writes {
    fn take(&mut self, bufs: &[&[u8]]) -> usize {
        self.slices
            .push(bufs.iter().filter(|b| !b.is_empty()).count());
        let one: Vec<u8> = bufs
            .iter()
            .flat_map(|b| b.iter().copied())
            .take(self.most)
            .collect();
        let n = one.len();
        self.taken.push(one);
        n
    }
}

impl AsyncWrite for Writes {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(self.take(&[buf])))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let slices: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
        Poll::Ready(Ok(self.take(&slices)))
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

/// A head, as the writer finds it gathered before the body (its length is the framing's own
/// business: the writer goes by `Framing`, not by the head's bytes).
const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nx-head: 1\r\n\r\n";

fn piece(byte: u8, len: usize) -> Option<Bytes> {
    Some(Bytes::from(vec![byte; len]))
}

/// What writing `framing`'s body of `pieces` after `HEAD` did: the size of each write, every
/// byte written, and how the writing ended.
struct Written {
    sizes: Vec<usize>,
    slices: Vec<usize>,
    bytes: Vec<u8>,
    ended: Result<(), WriteError>,
}

/// Write `pieces` after `HEAD` to a receiver taking at most `most` bytes a write.
async fn write_body(framing: Framing, pieces: Vec<Option<Bytes>>, most: usize) -> Written {
    let mut writer = BodyWriter::new(&framing, None);
    let mut body = Pieces(pieces.into());
    let mut sink = Writes {
        taken: Vec::new(),
        slices: Vec::new(),
        most,
    };
    let mut out = HEAD.to_vec();
    let ended = std::future::poll_fn(|cx| {
        writer.poll_write(Pin::new(&mut sink), Pin::new(&mut body), &mut out, cx)
    })
    .await;
    Written {
        sizes: sink.taken.iter().map(Vec::len).collect(),
        slices: sink.slices,
        bytes: sink.taken.concat(),
        ended,
    }
}

/// The writes `framing`'s body of `pieces` makes after `HEAD`, and the bytes they carry in all,
/// to a receiver that takes every write whole; the body must go out whole.
async fn writes(framing: Framing, pieces: Vec<Option<Bytes>>) -> (Vec<usize>, Vec<u8>) {
    let written = write_body(framing, pieces, usize::MAX).await;
    assert!(
        written.ended.is_ok(),
        "the body is written whole: {:?}",
        written.ended
    );
    (written.sizes, written.bytes)
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

#[tokio::test]
async fn a_chunked_body_frames_each_piece_and_writes_large_ones_from_where_they_lie() {
    let (sizes, bytes) = writes(
        Framing::Chunked(None),
        vec![piece(b'a', 10), piece(b'b', 5000), piece(b'c', 3)],
    )
    .await;
    let mut want = HEAD.to_vec();
    want.extend_from_slice(b"A\r\n");
    want.extend(std::iter::repeat_n(b'a', 10));
    want.extend_from_slice(b"\r\n1388\r\n");
    want.extend(std::iter::repeat_n(b'b', 5000));
    want.extend_from_slice(b"\r\n3\r\nccc\r\n0\r\n\r\n");
    assert_eq!(bytes, want);
    // The large chunk went beside what was gathered before it, in one write, not copied; its
    // end, the last small chunk and the last chunk were gathered after it.
    assert_eq!(sizes, vec![HEAD.len() + 3 + 10 + 2 + 6 + 5000, 2 + 8 + 5]);
}

#[tokio::test]
async fn partial_writes_lose_and_repeat_nothing() {
    // The last piece (nothing follows it) is written from where it lies, beside what is
    // gathered: partial writes cut across both.
    let pieces = vec![
        piece(b'a', 100),
        piece(b'b', 9000),
        None,
        piece(b'c', 100),
        piece(b'd', 7184),
    ];
    let written = write_body(Framing::Length(16384), pieces, 1000).await;
    assert!(written.ended.is_ok(), "{:?}", written.ended);
    assert!(written.sizes.iter().all(|&n| n <= 1000));
    assert!(
        written.slices.contains(&2),
        "some write took gathered bytes and the piece in place: {:?}",
        written.slices
    );
    assert_eq!(
        written.bytes,
        expected(&[(b'a', 100), (b'b', 9000), (b'c', 100), (b'd', 7184)])
    );
}

#[tokio::test]
async fn a_body_past_its_length_is_cut_at_the_length_and_refused() {
    let written = write_body(
        Framing::Length(150),
        vec![piece(b'a', 100), piece(b'b', 100)],
        usize::MAX,
    )
    .await;
    assert!(matches!(written.ended, Err(WriteError::Overlong)));
    assert_eq!(written.bytes, expected(&[(b'a', 100), (b'b', 50)]));
}

#[tokio::test]
async fn a_body_short_of_its_length_writes_what_came_and_is_refused() {
    let written = write_body(Framing::Length(16384), vec![piece(b'a', 9000)], usize::MAX).await;
    assert!(matches!(written.ended, Err(WriteError::Short)));
    assert_eq!(written.bytes, expected(&[(b'a', 9000)]));
}

#[tokio::test]
async fn a_piece_that_fills_the_gathering_exactly_goes_in_the_same_write() {
    let fill = 16 * 1024 - HEAD.len();
    let written = write_body(
        Framing::Length(fill as u64 + 10),
        vec![piece(b'a', fill), piece(b'b', 10)],
        usize::MAX,
    )
    .await;
    assert!(written.ended.is_ok(), "{:?}", written.ended);
    assert_eq!(written.sizes, vec![16 * 1024, 10]);
    // Written from where it lies beside the head, not copied into the gathering first.
    assert_eq!(written.slices, vec![2, 1]);
    assert_eq!(written.bytes, expected(&[(b'a', fill), (b'b', 10)]));
}
