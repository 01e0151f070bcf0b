//! A body read from a connection as it is asked for, driven by polling: bytes read into the
//! connection's buffer, framed by [`Decoder`](super::body::Decoder), data handed on as slices
//! of that buffer (never copied), a chunked body's trailers as a trailers frame. Both
//! directions of the fast engine use it: a client's request body (`proxy::fast`) and an
//! endpoint's answer (`upstream::direct`).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::Frame;
use tokio::io::AsyncRead;

use super::body::{BodyError, Decoder};
use super::head::MAX_FIELDS;

/// Bytes asked of the socket per read at the least.
pub const READ_CHUNK: usize = 8 * 1024;
/// Below this much room, the read buffer grows (by `READ_CHUNK`) before a read. Growing only
/// then keeps a head (shared with its field values while its message is in flight) from being
/// copied to a new buffer at every read.
const READ_ROOM: usize = 1024;

/// The most one read of a body with a known length asks room for.
const READ_MOST: usize = 64 * 1024;

/// Make room in `buf` for a read: only when less than `READ_ROOM` is left. Growing while a
/// message read from the buffer is still in flight (it shares the buffer) means a new one, so
/// growing at every read cost an 8 KiB allocation per request.
pub fn make_room(buf: &mut BytesMut) {
    make_room_for(buf, 0);
}

/// Make room in `buf` for a read of `want` bytes (a body's rest, when its length is known: a
/// 16 KiB answer then takes two reads and goes on as two pieces, not three of 8 KiB), and at
/// least `READ_ROOM`; when it grows, it grows by `READ_CHUNK` at least, and to `READ_ROOM`
/// more than `want`. The slack matters: a read that fills its room exactly leaves the socket
/// marked readable, so the next look at it (the idle check before reuse, the next head) costs
/// a system call that finds nothing; with room to spare the read comes up short and the
/// runtime knows the socket is drained. A buffer sized exactly to one 16 KiB answer cost a
/// wasted `recvfrom` on every request after it.
fn make_room_for(buf: &mut BytesMut, want: usize) {
    let room = buf.capacity() - buf.len();
    if room < READ_ROOM || room <= want {
        buf.reserve(want.saturating_add(READ_ROOM).max(READ_CHUNK));
    }
}

/// What one poll of a body found.
pub enum Step {
    /// A frame; more may follow.
    Frame(Frame<Bytes>),
    /// The body ended, with this last frame or none. What follows it in the buffer is the
    /// connection's next message.
    Ended(Option<Frame<Bytes>>),
    /// The framing was refused, the connection closed early, or the read failed.
    Failed(ReadError),
}

/// Why a body could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Framing(#[from] BodyError),
    #[error("reading the body failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Read `decoder`'s body from `buf` and, when that runs dry, from `io`.
pub fn poll_body<R: AsyncRead + Unpin + ?Sized>(
    io: &mut R,
    buf: &mut BytesMut,
    decoder: &mut Decoder,
    cx: &mut Context<'_>,
) -> Poll<Step> {
    loop {
        if !buf.is_empty() || decoder.is_done() {
            let decoded = match decoder.decode(buf) {
                Ok(decoded) => decoded,
                Err(error) => return Poll::Ready(Step::Failed(error.into())),
            };
            let used = buf.split_to(decoded.consumed).freeze();
            if decoded.ended {
                if !decoded.data.is_empty() {
                    // Only a length-framed body ends with data in the same call (a chunked one
                    // ends on its last chunk, after its data), so no trailers are lost.
                    return Poll::Ready(Step::Ended(Some(Frame::data(used.slice(decoded.data)))));
                }
                let trailers = trailer_fields(decoder.trailers());
                return Poll::Ready(Step::Ended(trailers.map(Frame::trailers)));
            }
            if !decoded.data.is_empty() {
                return Poll::Ready(Step::Frame(Frame::data(used.slice(decoded.data))));
            }
            if decoded.consumed > 0 && !buf.is_empty() {
                continue;
            }
        }
        let want = decoder.remaining().map_or(READ_ROOM, |left| {
            usize::try_from(left).map_or(READ_MOST, |left| left.min(READ_MOST))
        });
        make_room_for(buf, want);
        match tokio_util::io::poll_read_buf(Pin::new(&mut *io), cx, buf) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(0)) => {
                return Poll::Ready(match decoder.closed() {
                    Ok(()) => Step::Ended(None),
                    Err(error) => Step::Failed(error.into()),
                });
            }
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(error)) => return Poll::Ready(Step::Failed(error.into())),
        }
    }
}

/// A chunked body's trailer section as a trailers frame (`None` when there was none). The
/// decoder has checked the section; a field `http` refuses is left out, as hyper's decoder
/// leaves it.
fn trailer_fields(section: &[u8]) -> Option<HeaderMap> {
    if section.is_empty() {
        return None;
    }
    let mut closed = Vec::with_capacity(section.len() + 2);
    closed.extend_from_slice(section);
    closed.extend_from_slice(b"\r\n");
    let mut parsed = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let Ok(httparse::Status::Complete((_, fields))) = httparse::parse_headers(&closed, &mut parsed)
    else {
        return None;
    };
    let mut trailers = HeaderMap::with_capacity(fields.len());
    for field in fields.iter() {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(field.name.as_bytes()),
            HeaderValue::from_bytes(field.value),
        ) {
            trailers.append(name, value);
        }
    }
    Some(trailers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_for_a_known_rest_always_has_room_beyond_it() {
        // The buffer one 16 KiB answer left behind: room for exactly that answer again.
        let mut buf = BytesMut::with_capacity(16_640);
        for want in [1, READ_ROOM, 8_448, 16_640, READ_MOST] {
            make_room_for(&mut buf, want);
            let room = buf.capacity() - buf.len();
            assert!(
                room > want,
                "want {want}, room {room}: a full read keeps the socket marked readable"
            );
            assert!(room >= READ_ROOM);
        }
    }

    #[test]
    fn a_head_read_grows_the_buffer_only_below_the_least_room() {
        let mut buf = BytesMut::with_capacity(READ_ROOM);
        let before = buf.as_ptr();
        make_room(&mut buf);
        assert_eq!(
            buf.as_ptr(),
            before,
            "exactly READ_ROOM left is room enough"
        );
        buf.extend_from_slice(b"x");
        make_room(&mut buf);
        assert!(buf.capacity() - buf.len() >= READ_CHUNK);
    }

    #[test]
    fn a_buffer_with_enough_room_is_left_alone() {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        let before = buf.as_ptr();
        make_room(&mut buf);
        assert_eq!(
            buf.as_ptr(),
            before,
            "no new buffer while the head in it may be shared"
        );
        assert_eq!(buf.capacity(), READ_CHUNK);
    }
}
