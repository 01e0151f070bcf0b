//! The head of the answer the request path made, written to the client as hyper's HTTP/1
//! server writes it, so that a client cannot tell the engines apart: the status line (the
//! endpoint's reason phrase when it sent its own), the fields in the answer's order, names
//! lower-case, `Connection`, `Transfer-Encoding` and `Trailer` each on one line; the body
//! framed by what the answer says of its length (exact: `Content-Length`; unknown: chunked, or
//! until the close to an HTTP/1.0 answer), none after HEAD, 1xx, 204 or 304; `Date` when the
//! answer carries none; `Connection: close` when the connection ends after it. Where hyper's
//! server refuses an answer (its `Content-Length` contradicts itself or the framing), this
//! refuses it too, and the connection closes without a word, as hyper's does.

use http::header::{self, HeaderValue};
use http::response::Parts;
use http::{HeaderName, Method, StatusCode, Version};

use crate::h1::head::RequestHead;
use crate::h1::head::{digits, last_token_is, list_has};
use crate::h1::respond::{Outgoing, write_response_head};
pub(crate) use crate::h1::write::Framing;
use crate::upstream::RawAnswer;

/// What the answer's body says of its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodySize {
    /// It has ended already.
    None,
    Exact(u64),
    Unknown,
}

impl BodySize {
    /// What `body` says of its length, read as hyper's server reads it.
    pub(crate) fn of(body: &impl http_body::Body) -> Self {
        if body.is_end_stream() {
            Self::None
        } else {
            body.size_hint().exact().map_or(Self::Unknown, Self::Exact)
        }
    }
}

/// The answer cannot be written (hyper's server refuses it the same way).
#[derive(Debug)]
pub(crate) struct Refused(pub &'static str);

/// Append the head for `parts` to `out`. `keep_alive`: the connection may take another
/// request after this answer. `http10_client`: the request was HTTP/1.0. Returns how the body
/// goes, and whether the connection ends after it.
pub(crate) fn write_head(
    parts: &mut Parts,
    body: BodySize,
    method: &Method,
    keep_alive: bool,
    http10_client: bool,
    out: &mut Vec<u8>,
) -> Result<(Framing, bool), Refused> {
    let mut last = !keep_alive;
    if parts.status == StatusCode::SWITCHING_PROTOCOLS {
        // hyper's server writes a 101 as it is, and the connection is the upgrade's after it.
        last = true;
    } else if parts.status.is_informational() {
        // hyper's server cannot send a 1xx as an answer: it sends a 500 and closes.
        *parts = http::Response::new(()).into_parts().0;
        parts.status = StatusCode::INTERNAL_SERVER_ERROR;
        last = true;
        return write_head_inner(parts, BodySize::None, method, last, out);
    }
    if http10_client {
        // hyper's `enforce_version` for an HTTP/1.0 peer: an HTTP/1.0 answer ends the
        // connection unless it says keep-alive; an HTTP/1.1 one to a client that asked to keep
        // the connection says keep-alive; and the answer goes out as HTTP/1.0 (no chunks).
        let says_keep_alive = parts
            .headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|value| list_has(value.as_bytes(), b"keep-alive"));
        if !says_keep_alive {
            if parts.version == Version::HTTP_10 {
                last = true;
            } else if parts.version == Version::HTTP_11 && keep_alive {
                parts
                    .headers
                    .append(header::CONNECTION, HeaderValue::from_static("keep-alive"));
            }
        }
        parts.version = Version::HTTP_10;
    } else if last {
        // The client speaks HTTP/1.1: the close is said.
        match parts.headers.entry(header::CONNECTION) {
            header::Entry::Occupied(mut entry) => {
                if !entry.iter().any(connection_close) {
                    entry.append(HeaderValue::from_static("close"));
                }
            }
            header::Entry::Vacant(entry) => {
                entry.insert(HeaderValue::from_static("close"));
            }
        }
    }
    write_head_inner(parts, body, method, last, out)
}

fn write_head_inner(
    parts: &mut Parts,
    body: BodySize,
    method: &Method,
    mut last: bool,
    out: &mut Vec<u8>,
) -> Result<(Framing, bool), Refused> {
    let status = parts.status;
    let reason = parts.extensions.get::<hyper::ext::ReasonPhrase>();
    if parts.version != Version::HTTP_10 && status == StatusCode::OK && reason.is_none() {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(if parts.version == Version::HTTP_10 {
            b"HTTP/1.0 "
        } else {
            b"HTTP/1.1 "
        });
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        match reason {
            Some(reason) => out.extend_from_slice(reason.as_bytes()),
            None => out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
    }
    let head_request = *method == Method::HEAD;
    // 204, 304 and a 1xx (a 101 here) carry no body and no length.
    let no_content = matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
        || status.is_informational();
    // hyper's `can_chunked`, and never to (or from) HTTP/1.0: the framing fields and `Trailer`
    // go out only then.
    let may_chunk = may_chunk_status(method, status) && parts.version != Version::HTTP_10;
    let may_have_length = !no_content;

    let mut framing = Framing::Length(0);
    let mut wrote_length = false;
    let mut wrote_date = false;
    let mut trailer_names: Option<Vec<HeaderName>> = None;
    let mut previous_length: Option<u64> = None;
    // As hyper writes them: one walk of the map; a framing or `Connection` field's values on
    // one line (`line_open` while it takes more), any other value on a line of its own.
    let mut current: Option<&HeaderName> = None;
    let mut line_open = false;
    let mut add_chunked = false;
    for (name, value) in parts.headers.iter() {
        if current != Some(name) {
            if line_open {
                close_line(out, add_chunked);
                line_open = false;
            }
            current = Some(name);
        }
        match *name {
            header::CONTENT_LENGTH => {
                if wrote_length && !line_open {
                    return Err(Refused("Content-Length beside another framing field"));
                }
                match body {
                    BodySize::Exact(len) => {
                        if !line_open {
                            framing = Framing::Length(len);
                            open_line(out, b"content-length: ", value);
                            wrote_length = true;
                            line_open = true;
                        }
                        continue;
                    }
                    BodySize::Unknown => {
                        let len =
                            digits(value.as_bytes()).ok_or(Refused("an invalid Content-Length"))?;
                        match previous_length {
                            Some(previous) if previous != len => {
                                return Err(Refused("differing Content-Length values"));
                            }
                            Some(_) => {}
                            None => {
                                framing = Framing::Length(len);
                                open_line(out, b"content-length: ", value);
                                wrote_length = true;
                                line_open = true;
                                previous_length = Some(len);
                            }
                        }
                        continue;
                    }
                    BodySize::None if head_request => wrote_length = true,
                    BodySize::None => continue,
                }
            }
            header::TRANSFER_ENCODING => {
                if wrote_length && !line_open {
                    return Err(Refused("Transfer-Encoding beside Content-Length"));
                }
                if !may_chunk {
                    continue;
                }
                wrote_length = true;
                add_chunked = !last_token_is(value.as_bytes(), b"chunked");
                if line_open {
                    continue_line(out, value);
                } else {
                    framing = Framing::Chunked(None);
                    open_line(out, b"transfer-encoding: ", value);
                    line_open = true;
                }
                continue;
            }
            header::CONNECTION => {
                last |= connection_close(value);
                if line_open {
                    continue_line(out, value);
                } else {
                    open_line(out, b"connection: ", value);
                    line_open = true;
                }
                continue;
            }
            header::TRAILER => {
                if !may_chunk {
                    continue;
                }
                if line_open {
                    continue_line(out, value);
                } else {
                    open_line(out, b"trailer: ", value);
                    line_open = true;
                }
                if let Ok(listed) = value.to_str() {
                    trailer_names.get_or_insert_with(Vec::new).extend(
                        listed
                            .split(',')
                            .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok()),
                    );
                }
                continue;
            }
            header::DATE => wrote_date = true,
            _ => {}
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if line_open {
        close_line(out, add_chunked);
    }
    if !wrote_length {
        framing = match body {
            BodySize::Unknown if may_chunk => {
                out.extend_from_slice(b"transfer-encoding: chunked\r\n");
                Framing::Chunked(None)
            }
            BodySize::Unknown if !head_request && !no_content => Framing::UntilClose,
            BodySize::Unknown => Framing::Length(0),
            BodySize::None | BodySize::Exact(0) => {
                if may_have_length && !head_request {
                    out.extend_from_slice(b"content-length: 0\r\n");
                }
                Framing::Length(0)
            }
            BodySize::Exact(len) => {
                if may_have_length {
                    out.extend_from_slice(b"content-length: ");
                    out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
                    out.extend_from_slice(b"\r\n");
                    Framing::Length(len)
                } else {
                    Framing::Length(0)
                }
            }
        };
    }
    if head_request || no_content {
        framing = Framing::Length(0);
    }
    if !wrote_date {
        out.extend_from_slice(b"date: ");
        super::date::extend(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    let framing = match framing {
        Framing::Length(0) => Framing::Empty,
        Framing::Chunked(_) => Framing::Chunked(trailer_names),
        Framing::UntilClose => {
            last = true;
            Framing::UntilClose
        }
        other => other,
    };
    Ok((framing, last))
}

/// hyper's `can_chunked`: a body may follow (the method and status allow one).
fn may_chunk_status(method: &Method, status: StatusCode) -> bool {
    let no_body = *method == Method::HEAD
        || (*method == Method::CONNECT && status.is_success())
        || status.is_informational()
        || matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED);
    !no_body
}

fn open_line(out: &mut Vec<u8>, name: &[u8], value: &HeaderValue) {
    out.extend_from_slice(name);
    out.extend_from_slice(value.as_bytes());
}

fn continue_line(out: &mut Vec<u8>, value: &HeaderValue) {
    out.extend_from_slice(b", ");
    out.extend_from_slice(value.as_bytes());
}

/// End a field's line; hyper adds `chunked` to any line it ends after a coding that did not
/// end in it.
fn close_line(out: &mut Vec<u8>, add_chunked: bool) {
    out.extend_from_slice(if add_chunked {
        b", chunked\r\n"
    } else {
        b"\r\n"
    });
}

fn connection_close(value: &HeaderValue) -> bool {
    list_has(value.as_bytes(), b"close")
}

/// Append the head of the answer (`parts`, its `body`) to the request `head` to `out`: an
/// endpoint's answer kept as it arrived (an HTTP/1.1 client's, on the sidecar's own endpoint
/// connection) from its bytes, any other from its typed fields. `keep_alive`: the connection
/// may take another request after this answer. Returns how the body goes, and whether the
/// connection ends after it.
pub(crate) fn write_answer_head(
    parts: &mut Parts,
    body: &impl http_body::Body,
    head: &RequestHead,
    keep_alive: bool,
    out: &mut Vec<u8>,
) -> Result<(Framing, bool), Refused> {
    let raw = if head.http11 {
        parts.extensions.remove::<RawAnswer>()
    } else {
        None
    };
    match raw {
        Some(raw) => Ok(write_raw_head(&raw, &head.method, keep_alive, out)),
        None => write_head(
            parts,
            BodySize::of(body),
            &head.method,
            keep_alive,
            !head.http11,
            out,
        ),
    }
}

/// Append the head for an endpoint's answer kept as it arrived (`RawAnswer`) to `out`, as
/// `crate::h1::respond` writes it (the same bytes as the typed path, held so by its tests), for
/// an HTTP/1.1 client. `keep_alive`: the connection may take another request after this answer.
/// Returns how the body goes, and whether the connection ends after it.
fn write_raw_head(
    raw: &RawAnswer,
    method: &Method,
    keep_alive: bool,
    out: &mut Vec<u8>,
) -> (Framing, bool) {
    let outgoing = write_response_head(
        &raw.bytes,
        &raw.head,
        &raw.fields,
        method,
        !keep_alive,
        super::date::extend,
        out,
    );
    let framing = match outgoing {
        Outgoing::Empty | Outgoing::Length(0) => Framing::Empty,
        Outgoing::Length(n) => Framing::Length(n),
        Outgoing::Chunked => Framing::Chunked(raw_trailer_names(raw)),
        Outgoing::UntilClose => Framing::UntilClose,
    };
    let last = !keep_alive || framing == Framing::UntilClose;
    (framing, last)
}

/// The names the answer's `Trailer` fields declare.
fn raw_trailer_names(raw: &RawAnswer) -> Option<Vec<HeaderName>> {
    let names: Vec<HeaderName> = raw
        .fields
        .iter()
        .filter(|field| raw.bytes[field.name.clone()].eq_ignore_ascii_case(b"trailer"))
        .filter_map(|field| std::str::from_utf8(&raw.bytes[field.value.clone()]).ok())
        .flat_map(|listed| listed.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    (!names.is_empty()).then_some(names)
}
