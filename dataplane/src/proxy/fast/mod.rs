//! The fast engine (`--http1-engine fast`): a client's HTTP/1.x connection served by the
//! sidecar's own loop over `crate::h1` instead of hyper's server. Per request: read the head
//! straight from the connection's buffer (`h1::head`, the same refusals and statuses as hyper's
//! server), make it an `http::Request` whose field values are slices of that buffer, hand it
//! to the request path (`super::forward`), and write the answer's head and body as hyper's
//! server would (`response_head`, `answer_body`). A request body the buffer holds whole goes as one piece;
//! any other streams from the socket as the endpoint takes it (`request_body`).
//!
//! What it does not handle goes to hyper's server for the rest of the connection, with every
//! byte read so far (`prefixed`): HTTP/2 (its preface, at the connection's start only; later
//! it closes the connection, as hyper's HTTP/1 server does), and upgrades and CONNECT at a
//! request's start. `Expect: 100-continue` is answered as hyper's server answers it: when
//! the request path first asks for the body. hyper's server also keeps what this loop
//! shares with it: a head must arrive within 30 s; a client that closes while its request is
//! in flight ends that request; stopping answers the request in flight with
//! `Connection: close` and closes an idle connection at once; cutting closes at once.
//!
//! The endpoint side is `crate::upstream`, on the sidecar's own HTTP/1.1 connections
//! (`upstream::direct`). The connection's cut and stop are waited on through `cancelled`, the
//! head's 30 s through one timer set again for each head: both are asked several times a
//! request, and neither takes a lock to be asked again.

mod answer_body;
mod cancelled;
mod date;
mod prefixed;
mod request_body;
pub(crate) mod response_head;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri, Version};
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::time::Sleep;

use self::answer_body::write_answer;
use self::cancelled::Cancelled;
use self::prefixed::Prefixed;
pub(crate) use self::request_body::FastBody;
use self::request_body::{Continue, READ_CHUNK, ReadSide, ReadSlot, make_room};
use self::response_head::{BodySize, Framing, write_answer_head, write_head};
use super::forward::forward_request;
use super::server::{Connection, serve_with_hyper};
use crate::h1::body::Decoder;
use crate::h1::encode::accepts_trailers;
use crate::h1::head::{
    BodyLength, Field, HeadError, MAX_HEAD_BYTES, RequestHead, may_end_head, parse_request,
};
use crate::poll_clock;
use crate::pool::Http1Handoff;

/// A head must arrive whole within this long of the connection waiting for it (hyper's
/// HTTP/1 header read timeout).
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Fields the request path adds to a request (`X-Forwarded-For`, `-Proto`, `-Host`, and room for
/// one framing field): the map is made big enough for them at once, not grown and rehashed.
const ADDED_FIELDS: usize = 4;

/// Serve `stream` until it closes, or hand it to hyper's server.
pub(super) async fn serve(stream: TcpStream, connection: Connection) {
    let (io, write) = stream.into_split();
    let mut served = Served {
        read: Some(ReadSide {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
        }),
        write,
        fields: Vec::with_capacity(32),
        out: Vec::with_capacity(READ_CHUNK),
        slot: ReadSlot::default(),
        cut: Cancelled::new(connection.cut.clone()),
        stop: Cancelled::new(connection.stop.clone()),
        head_timer: Box::pin(tokio::time::sleep(HEAD_TIMEOUT)),
        http10_peer: false,
    };
    let mut first = true;
    loop {
        let Some(read) = served.read.as_mut() else {
            return;
        };
        let head = match next_head(
            read,
            &mut served.fields,
            &mut served.cut,
            &mut served.stop,
            &mut served.head_timer,
            &connection,
        )
        .await
        {
            Next::Head(head) => head,
            Next::Closed => return,
            Next::Refuse(status) => return served.refuse(status).await,
            // Only a connection's first bytes may turn it into HTTP/2 (hyper-util's auto server
            // looks there alone; hyper's HTTP/1 server closes on a preface later, unanswered).
            Next::HandOff if first => {
                return served.hand_off(connection, Http1Handoff::Http2).await;
            }
            Next::HandOff => return,
        };
        first = false;
        served.http10_peer = !head.http11;
        if head.upgrade {
            return served.hand_off(connection, Http1Handoff::Upgrade).await;
        }
        if !served.serve_one(&head, &connection).await {
            return;
        }
    }
}

/// One connection's state between its requests.
struct Served {
    /// `None` while a streaming request body holds it.
    read: Option<ReadSide>,
    write: OwnedWriteHalf,
    fields: Vec<Field>,
    /// Answer bytes waiting to be written.
    out: Vec<u8>,
    /// Where a streaming request body gives the read side back.
    slot: ReadSlot,
    /// The connection's `cut` and `stop`, waited on once for the connection's life.
    cut: Cancelled,
    stop: Cancelled,
    /// The wait for a whole head, one timer for the connection's life: set again for each head
    /// (moving a pending timer later is one atomic exchange; a new timer per head was a
    /// registration and a removal, each under the timer wheel's lock).
    head_timer: Pin<Box<Sleep>>,
    /// The last request was HTTP/1.0 (hyper answers even a refusal in the peer's version).
    http10_peer: bool,
}

enum Next {
    Head(RequestHead),
    /// The client closed, went quiet too long, or the listener stops.
    Closed,
    /// A head hyper's server refuses with this status.
    Refuse(u16),
    /// HTTP/2: for hyper's server.
    HandOff,
}

/// Read until a whole head is in the buffer (not taken off it).
async fn next_head(
    read: &mut ReadSide,
    fields: &mut Vec<Field>,
    cut: &mut Cancelled,
    stop: &mut Cancelled,
    head_timer: &mut Pin<Box<Sleep>>,
    connection: &Connection,
) -> Next {
    head_timer.as_mut().reset(poll_clock::now() + HEAD_TIMEOUT);
    // The buffer's length when the head was last found incomplete.
    let mut partial: Option<usize> = None;
    loop {
        let worth_parsing = match partial {
            None => !read.buf.is_empty(),
            Some(previous) => may_end_head(&read.buf, previous),
        };
        if !worth_parsing && read.buf.len() >= MAX_HEAD_BYTES {
            return Next::Refuse(431);
        }
        if worth_parsing {
            partial = Some(read.buf.len());
            match parse_request(&read.buf, fields) {
                Ok(Some(head)) => return Next::Head(head),
                Ok(None) => {}
                Err(HeadError::Http2Preface) => return Next::HandOff,
                Err(error) => {
                    tracing::debug!(?error, "client request head refused");
                    return match error.status() {
                        Some(status) => Next::Refuse(status),
                        None => Next::HandOff,
                    };
                }
            }
        }
        let idle = read.buf.is_empty();
        make_room(&mut read.buf);
        // The read first: bytes that arrived are taken without asking the stop, the cut and
        // the clock (each a lock or a timer) first; they are asked whenever the read waits.
        tokio::select! {
            biased;
            got = tokio_util::io::read_buf(&mut read.io, &mut read.buf) => match got {
                Ok(0) | Err(_) => return Next::Closed,
                Ok(_) => {}
            },
            () = &mut *cut => return Next::Closed,
            () = &mut *stop, if idle => return Next::Closed,
            () = head_timer.as_mut() => {
                tracing::debug!(client = %connection.peer, "no whole request head within 30s: closing");
                return Next::Closed;
            }
        }
    }
}

impl Served {
    /// Serve the request whose head is at the buffer's start. `false`: the connection ends.
    async fn serve_one(&mut self, head: &RequestHead, connection: &Connection) -> bool {
        let Some(read) = self.read.as_mut() else {
            return false;
        };
        let head_bytes = read.buf.split_to(head.len).freeze();
        let trailers_accepted = accepts_trailers(&head_bytes, &self.fields);
        // A body that waits for `100 Continue` is read (so invited) only when asked for, as
        // hyper's server does, even when the client sent it without waiting.
        let expect = (head.expect_continue && head.body != BodyLength::Empty)
            .then(|| Arc::new(Continue::default()));
        let body = match head.body {
            BodyLength::Empty => FastBody::Empty,
            BodyLength::Length(n) if expect.is_none() && read.buf.len() as u64 >= n => {
                FastBody::Whole(read.buf.split_to(n as usize).freeze())
            }
            framing => match self.read.take() {
                Some(read) => FastBody::streaming(
                    read,
                    Decoder::new(framing),
                    Arc::clone(&self.slot),
                    expect.clone(),
                ),
                None => return false,
            },
        };
        let request = match request_of(head, &head_bytes, &self.fields, body) {
            Ok(request) => request,
            Err(why) => {
                tracing::debug!(why, "client request head refused");
                self.refuse(400).await;
                return false;
            }
        };
        let answer = forward_request(Arc::clone(&connection.pool), request, &connection.client);
        tokio::pin!(answer);
        let mut stopping = self.stop.is_cancelled();
        let response = loop {
            // As hyper's server: the end of the client's side is looked for only while nothing
            // it sent waits in the buffer (pipelined requests are answered first).
            let watched = self.read.as_mut().filter(|read| read.buf.is_empty());
            let watching = watched.is_some();
            let inviting = expect.as_ref().filter(|expect| !expect.is_sent());
            tokio::select! {
                biased;
                response = &mut answer => break response,
                () = wanted(inviting), if inviting.is_some() => {
                    let sent = tokio::select! {
                        biased;
                        () = &mut self.cut => return false,
                        sent = self.write.write_all(CONTINUE) => sent,
                    };
                    if let Some(expect) = &expect {
                        expect.sent();
                    }
                    if sent.is_err() {
                        return false;
                    }
                }
                () = &mut self.cut => return false,
                () = &mut self.stop, if !stopping => stopping = true,
                // hyper's server ends a request whose client closed (it reads on, mid-message).
                got = read_ahead(watched), if watching => match got {
                    Ok(0) | Err(_) => return false,
                    Ok(_) => {}
                },
            }
        };
        if let Some(expect) = &expect {
            // The answer is here: no interim answer any more, but a body the request path still
            // reads is read (hyper's server skips the `100 Continue` and reads on too).
            expect.sent();
        }
        let keep_alive = head.keep_alive && !stopping;
        let (mut parts, body) = response.into_parts();
        self.out.clear();
        let (framing, last) =
            match write_answer_head(&mut parts, &body, head, keep_alive, &mut self.out) {
                Ok(written) => written,
                Err(refused) => {
                    tracing::debug!(why = refused.0, "answer not written: closing");
                    return false;
                }
            };
        let trailers_sent = match &framing {
            Framing::Chunked(Some(names)) if trailers_accepted => Some(names.as_slice()),
            _ => None,
        };
        // The write first: an answer written at once never asks the cut (a lock).
        let written = tokio::select! {
            biased;
            written = write_answer(&mut self.write, &mut self.out, body, &framing, trailers_sent) => written,
            () = &mut self.cut => return false,
        };
        if let Err(why) = written {
            tracing::debug!(client = %connection.peer, why, "answer cut: closing");
            return false;
        }
        if last {
            let _ = self.write.shutdown().await;
            return false;
        }
        if self.read.is_none() {
            // The request body streamed: the connection goes on only if it was read whole.
            let returned = self.slot.lock().take();
            match returned {
                Some((read, true)) => self.read = Some(read),
                _ => {
                    let _ = self.write.shutdown().await;
                    return false;
                }
            }
        }
        true
    }

    /// Answer a refused head as hyper's server does, and close.
    async fn refuse(&mut self, status: u16) {
        let mut parts = Response::new(()).into_parts().0;
        parts.status = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
        self.out.clear();
        if write_head(
            &mut parts,
            BodySize::None,
            &Method::GET,
            false,
            self.http10_peer,
            &mut self.out,
        )
        .is_ok()
        {
            tokio::select! {
                biased;
                () = &mut self.cut => return,
                _ = self.write.write_all(&self.out) => {}
            }
        }
        let _ = self.write.shutdown().await;
    }

    /// Give the connection, and every byte read but not served, to hyper's server.
    async fn hand_off(self, connection: Connection, why: Http1Handoff) {
        connection.pool.count_http1_handoff(why);
        tracing::debug!(client = %connection.peer, ?why, "connection handed to hyper's server");
        let Some(read) = self.read else {
            return;
        };
        let Ok(stream) = read.io.reunite(self.write) else {
            return;
        };
        // The waits of this loop go now, not when hyper's server is done with the connection
        // (the head timer would wake its task once more, up to 30 s on).
        drop((self.cut, self.stop, self.head_timer));
        let io = Prefixed::new(read.buf.freeze(), stream);
        serve_with_hyper(TokioIo::new(io), connection).await;
    }
}

/// What invites a body that waits for it (RFC 9110 §10.1.1).
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Until the body that waits for `100 Continue` is asked for (forever without one).
async fn wanted(expect: Option<&Arc<Continue>>) {
    match expect {
        Some(expect) => expect.wanted().await,
        None => std::future::pending().await,
    }
}

/// Read more of what follows the request in flight (pending forever without a read side).
async fn read_ahead(read: Option<&mut ReadSide>) -> std::io::Result<usize> {
    match read {
        Some(read) => {
            make_room(&mut read.buf);
            tokio_util::io::read_buf(&mut read.io, &mut read.buf).await
        }
        None => std::future::pending().await,
    }
}

/// The request the head describes, its field values slices of `bytes` (where it was read).
fn request_of(
    head: &RequestHead,
    bytes: &Bytes,
    fields: &[Field],
    body: FastBody,
) -> Result<Request<FastBody>, &'static str> {
    let uri = Uri::from_maybe_shared(bytes.slice(head.target.clone()))
        .map_err(|_| "invalid request target")?;
    let mut headers = HeaderMap::with_capacity(fields.len() + ADDED_FIELDS);
    for field in fields {
        let name =
            HeaderName::from_bytes(&bytes[field.name.clone()]).map_err(|_| "invalid field name")?;
        let value = HeaderValue::from_maybe_shared(bytes.slice(field.value.clone()))
            .map_err(|_| "invalid field value")?;
        headers.append(name, value);
    }
    let mut request = Request::new(body);
    *request.method_mut() = head.method.clone();
    *request.uri_mut() = uri;
    *request.version_mut() = if head.http11 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    *request.headers_mut() = headers;
    Ok(request)
}
