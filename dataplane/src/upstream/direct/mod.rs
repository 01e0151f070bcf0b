//! The sidecar's own HTTP/1.1 connection to an endpoint (`--http1-engine fast`), driven inline
//! by the request that uses it: no task per connection, no channel between the request and its
//! connection. One request's exchange writes the head as hyper's client writes it
//! (`request_head`), the body after it (`crate::h1::write`), and reads the answer's head
//! (`crate::h1::head`, hyper's client's refusals: a malformed answer is the endpoint's protocol
//! error) while the upload may still be going; interim answers (1xx but 101) are skipped, as
//! hyper's client skips them. The answer's body (`body`) reads on from the same connection,
//! finishes an upload the endpoint answered early, and when it ends puts the connection where
//! its endpoint takes it back for the next request (`Release::Direct`) if both sides said
//! keep-alive, the upload went out whole, and nothing unasked followed the answer.
//!
//! A connection idle in the pool has no task watching it: whether the endpoint closed it is
//! asked of the socket when it is taken (`is_usable`), and a request given one found closed
//! comes back unsent, as hyper's `try_send_request` gives it back.

mod body;
mod request_head;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Version};
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

pub use self::body::DirectBody;
pub use self::request_head::{PlainHead, plain_head};

use self::request_head::{write_plain_head, write_request_head};
use super::{BoxError, EndpointBody, OpenGuard, ProxyBody, Release, SendError};
use crate::h1::head::{Field, HeadError, MAX_HEAD_BYTES, ResponseHead, parse_response};
use crate::h1::read::{READ_CHUNK, make_room};
use crate::h1::write::{BodyWriter, Framing, WriteError};

/// An endpoint's answer head as it arrived, for a client connection that writes its own head
/// from it (the fast engine's, `crate::h1::respond`): such an answer carries no field map, which
/// is most of what reading an answer costs. Only asked for where nothing reads the answer's
/// fields on the way (not a gRPC call).
#[derive(Clone, Debug)]
pub struct RawAnswer {
    pub bytes: Bytes,
    pub head: ResponseHead,
    pub fields: Vec<Field>,
}

/// Why an exchange ended when the sidecar closed its connection.
const CUT: &str = "the sidecar closed the connection";

/// Where a finished answer leaves its connection for the endpoint to take back.
pub type ConnSlot = Arc<Mutex<Option<DirectConn>>>;

/// One HTTP/1.1 connection to an endpoint, between requests. Boxed: it moves with each request
/// through the pool and the answer's body.
pub struct DirectConn(Box<Inner>);

struct Inner {
    io: TcpStream,
    /// Bytes read and not used yet.
    buf: BytesMut,
    /// Bytes gathered to be written.
    out: Vec<u8>,
    fields: Vec<Field>,
    /// The request's upload (kept here, in the connection's one allocation, not in each
    /// request's future and body).
    sending: Sending,
    /// Fires when the endpoint's connections are closed (drain deadline, shutdown): read
    /// (`is_cut`) at every poll, waited on (`poll_cut`) only when the connection has nothing
    /// to do but wait, which keeps the waiter's lock off the busy path.
    cut_token: CancellationToken,
    cut: Pin<Box<WaitForCancellationFutureOwned>>,
    _open: OpenGuard,
}

/// A request's body on its way out, while the answer may already be coming in.
struct Upload {
    writer: BodyWriter,
    body: ProxyBody,
}

/// How the request's upload stands.
#[expect(
    clippy::large_enum_variant,
    reason = "kept in the connection's one allocation; boxing the upload would cost one per request"
)]
enum Sending {
    Going(Upload),
    Done,
    /// The endpoint stopped taking it (the connection cannot be reused).
    Failed(std::io::Error),
}

impl DirectConn {
    pub(super) fn new(io: TcpStream, cut: &CancellationToken, open: OpenGuard) -> Self {
        Self(Box::new(Inner {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
            out: Vec::with_capacity(READ_CHUNK),
            fields: Vec::with_capacity(32),
            sending: Sending::Done,
            cut_token: cut.clone(),
            cut: Box::pin(cut.clone().cancelled_owned()),
            _open: open,
        }))
    }

    /// Whether this idle connection can take a request: the endpoint has neither closed it nor
    /// sent anything unasked (which would be read as the next answer).
    pub(super) fn is_usable(&self) -> bool {
        if !self.0.buf.is_empty() {
            return false;
        }
        let mut probe = [0u8; 1];
        matches!(self.0.io.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

impl Inner {
    /// The connection was closed by the sidecar (drain deadline, shutdown).
    fn is_cut(&self) -> bool {
        self.cut_token.is_cancelled()
    }

    /// The same, and the task woken when it happens: for a poll about to return `Pending`.
    fn poll_cut(&mut self, cx: &mut Context<'_>) -> bool {
        self.cut.as_mut().poll(cx).is_ready()
    }
}

impl Inner {
    /// Write more of the upload, if any is left; a failed one stays failed. `Some`: the
    /// request's own body failed (why, in the client's words), so the endpoint can never get a
    /// whole request and the exchange ends here, as hyper's client ends it. An endpoint that
    /// stopped taking the upload may still be answering: that is for the reading side.
    fn poll_upload(&mut self, cx: &mut Context<'_>) -> Option<String> {
        let Sending::Going(upload) = &mut self.sending else {
            return None;
        };
        let written = upload.writer.poll_write(
            Pin::new(&mut self.io),
            Pin::new(&mut upload.body),
            &mut self.out,
            cx,
        );
        match written {
            Poll::Pending => None,
            Poll::Ready(Ok(())) => {
                self.sending = Sending::Done;
                None
            }
            Poll::Ready(Err(WriteError::BodyBroke(cause))) => Some(cause.to_string()),
            Poll::Ready(Err(WriteError::PeerGone(error))) => {
                self.sending = Sending::Failed(error);
                None
            }
            Poll::Ready(Err(other)) => Some(format!("sending the request failed: {other}")),
        }
    }
}

/// Send `request` on `conn` and read the answer's head. `reused`: the connection served an
/// earlier request (a closed one then gives the request back unsent).
pub(super) async fn send(
    conn: DirectConn,
    request: Request<ProxyBody>,
    reused: bool,
) -> Result<(Response<DirectBody>, Release), SendError> {
    let (mut parts, body) = request.into_parts();
    let (mut inner, body) = usable(conn, reused, body)?;
    let framing = write_request_head(&mut parts, &body, &mut inner.out);
    exchange(inner, body, framing, &parts.method, false).await
}

/// Send a request whose head needs none of hyper's framing edits ([`PlainHead`]) straight from
/// the request path's parts, with no copy of its field map: `uri` in origin form.
/// `raw`: the answer may come as a [`RawAnswer`] instead of a field map.
pub async fn send_plain(
    conn: DirectConn,
    reused: bool,
    parts: &http::request::Parts,
    uri: &http::Uri,
    body: ProxyBody,
    plain: PlainHead,
    raw: bool,
) -> Result<(Response<EndpointBody>, Release), SendError> {
    let (mut inner, body) = usable(conn, reused, body)?;
    let framing = write_plain_head(parts, uri, plain, &mut inner.out);
    let (response, release) = exchange(inner, body, framing, &parts.method, raw).await?;
    Ok((response.map(EndpointBody::Direct), release))
}

/// The connection, its write buffer emptied for a request with `body`; a pooled one the
/// endpoint closed gives the body back unsent.
fn usable(
    conn: DirectConn,
    reused: bool,
    body: ProxyBody,
) -> Result<(Box<Inner>, ProxyBody), SendError> {
    if reused && !conn.is_usable() {
        return Err(SendError::NotSent {
            body,
            error: "the pooled connection was closed by the endpoint".into(),
        });
    }
    let mut inner = conn.0;
    inner.out.clear();
    Ok((inner, body))
}

/// With the head in `out`: the body after it, framed as `framing` says, and the answer's head.
async fn exchange(
    mut inner: Box<Inner>,
    body: ProxyBody,
    framing: Framing,
    method: &Method,
    raw: bool,
) -> Result<(Response<DirectBody>, Release), SendError> {
    let trailers = match &framing {
        Framing::Chunked(names) => names.clone(),
        _ => None,
    };
    inner.sending = Sending::Going(Upload {
        writer: BodyWriter::new(&framing, trailers),
        body,
    });
    let head = std::future::poll_fn(|cx| read_head(&mut inner, method, cx)).await?;
    Ok(answer(inner, head, method, raw))
}

/// Drive the upload and read until the answer's head is whole in the buffer (interim answers
/// taken off it).
fn read_head(
    inner: &mut Inner,
    method: &Method,
    cx: &mut Context<'_>,
) -> Poll<Result<ResponseHead, SendError>> {
    if inner.is_cut() {
        return Poll::Ready(Err(sent(CUT, false)));
    }
    if let Some(why) = inner.poll_upload(cx) {
        return Poll::Ready(Err(sent(&why, false)));
    }
    loop {
        match parse_response(&inner.buf, method, &mut inner.fields) {
            Ok(Some(head)) if (100..200).contains(&head.status) && head.status != 101 => {
                inner.buf.advance(head.len);
                continue;
            }
            Ok(Some(head)) => return Poll::Ready(Ok(head)),
            Ok(None) if inner.buf.len() >= MAX_HEAD_BYTES => {
                return Poll::Ready(Err(malformed(HeadError::TooLarge)));
            }
            Ok(None) => {}
            Err(error) => return Poll::Ready(Err(malformed(error))),
        }
        make_room(&mut inner.buf);
        match tokio_util::io::poll_read_buf(Pin::new(&mut inner.io), cx, &mut inner.buf) {
            Poll::Pending if inner.poll_cut(cx) => return Poll::Ready(Err(sent(CUT, false))),
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(0)) => {
                let why = match &inner.sending {
                    Sending::Failed(error) => format!(
                        "connection closed before the answer (the request could not be sent whole: {error})"
                    ),
                    _ => "connection closed before message completed".to_string(),
                };
                return Poll::Ready(Err(sent(&why, false)));
            }
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(error)) => {
                return Poll::Ready(Err(sent(
                    &format!("reading the answer failed: {error}"),
                    false,
                )));
            }
        }
    }
}

/// The answer whose head is at the buffer's start, its body reading on from the connection.
fn answer(
    mut inner: Box<Inner>,
    head: ResponseHead,
    method: &Method,
    raw: bool,
) -> (Response<DirectBody>, Release) {
    let head_bytes = inner.buf.split_to(head.len).freeze();
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(head.status).unwrap_or(StatusCode::BAD_GATEWAY);
    *response.version_mut() = if head.http11 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    if raw && head.status >= 200 {
        response.extensions_mut().insert(RawAnswer {
            bytes: head_bytes,
            head: head.clone(),
            fields: inner.fields.clone(),
        });
    } else {
        type_fields(&mut response, &head, &head_bytes, &inner.fields);
    }
    // A switch of protocols on this connection ends it for HTTP (this path never asks for one).
    let keep_alive = head.keep_alive && head.status != 101 && *method != Method::CONNECT;
    let slot: ConnSlot = Arc::new(Mutex::new(None));
    let body = DirectBody::new(DirectConn(inner), head.body, keep_alive, Arc::clone(&slot));
    let (parts, ()) = response.into_parts();
    (Response::from_parts(parts, body), Release::Direct(slot))
}

/// The answer's reason phrase (when not the canonical one) and fields, typed.
fn type_fields(
    response: &mut Response<()>,
    head: &ResponseHead,
    head_bytes: &Bytes,
    fields: &[Field],
) {
    let reason = &head_bytes[head.reason.clone()];
    if response.status().canonical_reason().map(str::as_bytes) != Some(reason)
        && let Ok(reason) =
            hyper::ext::ReasonPhrase::try_from(head_bytes.slice(head.reason.clone()))
    {
        response.extensions_mut().insert(reason);
    }
    let mut headers = HeaderMap::with_capacity(fields.len());
    for field in fields {
        // The head parser has checked every name and value already.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&head_bytes[field.name.clone()]),
            HeaderValue::from_maybe_shared(head_bytes.slice(field.value.clone())),
        ) {
            headers.append(name, value);
        }
    }
    *response.headers_mut() = headers;
}

fn sent(why: &str, malformed: bool) -> SendError {
    SendError::Sent {
        error: BoxError::from(why.to_string()),
        malformed,
    }
}

fn malformed(error: HeadError) -> SendError {
    SendError::Sent {
        error: Box::new(error),
        malformed: true,
    }
}

#[cfg(test)]
mod tests;
