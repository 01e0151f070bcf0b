//! The head of a request to an endpoint, written as hyper's HTTP/1 client writes it (so an
//! endpoint cannot tell the engines apart): the request line, the fields in the map's order
//! with names lower-case, and the body's framing settled the way hyper settles it. A length the
//! request gives is kept; a `Transfer-Encoding` is kept (with `chunked` added when it does not
//! end in it) and any `Content-Length` beside it dropped; otherwise the body says: a known
//! length becomes `Content-Length`, an unknown one chunked (none for GET, HEAD and CONNECT,
//! whose body hyper drops); a body that has ended already sends nothing. The field map is
//! changed in place with the same operations hyper uses, so even the order their removals
//! leave is the same.

use std::io::Write;

use bytes::BytesMut;
use http::header::{self, Entry, HeaderValue};
use http::request::Parts;
use http::{HeaderMap, HeaderName, Method, Uri, Version};
use http_body::Body;

use crate::h1::head::{digits, last_token_is};
use crate::h1::write::Framing;
use crate::upstream::ProxyBody;

/// Append `parts`' head to `out` (settling the framing fields in `parts`); returns how the body
/// goes after it.
pub(super) fn write_request_head(
    parts: &mut Parts,
    body: &ProxyBody,
    out: &mut Vec<u8>,
) -> Framing {
    let framing = settle_framing(parts, body);
    write_head(parts, &parts.uri, parts.version, None, out);
    framing
}

/// A request whose framing fields hyper's client would leave as they are (or only add a
/// `Content-Length` to, at the end): its head can be written from the request path's own parts,
/// with no copy of the field map to edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainHead {
    /// The body's length (zero: no body goes).
    length: u64,
    /// Whether `Content-Length` is added after the fields.
    add_length: bool,
}

/// Whether the HTTP/1.1 request `parts` with `body` is plain: what `build_request` and hyper's
/// `set_length` would do to it changes no field but, at most, appends `Content-Length`. `None`:
/// it needs the edits (a `Transfer-Encoding`, a chunked or dropped body, an invalid length).
pub fn plain_head(parts: &Parts, body: &ProxyBody) -> Option<PlainHead> {
    let headers = &parts.headers;
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return None;
    }
    if body.is_end_stream() {
        return Some(PlainHead {
            length: 0,
            add_length: false,
        });
    }
    // A body of unknown length is one `build_request` may mark chunked: not plain.
    match (content_length(headers), body.size_hint().exact()) {
        (_, None) => None,
        (Some(length), Some(_)) => Some(PlainHead {
            length,
            add_length: false,
        }),
        (None, Some(length)) if !headers.contains_key(header::CONTENT_LENGTH) => Some(PlainHead {
            length,
            add_length: true,
        }),
        _ => None,
    }
}

/// Append the head of a plain request to `out`: `uri` (origin form) on HTTP/1.1, as
/// `build_request` and hyper's client would write it.
pub(super) fn write_plain_head(
    parts: &Parts,
    uri: &Uri,
    plain: PlainHead,
    out: &mut Vec<u8>,
) -> Framing {
    let added = plain.add_length.then_some(plain.length);
    write_head(parts, uri, Version::HTTP_11, added, out);
    length(plain.length)
}

/// The request line, the fields in the map's order (names lower-case), `Content-Length` after
/// them when one is added, and the empty line.
fn write_head(
    parts: &Parts,
    uri: &Uri,
    version: Version,
    add_length: Option<u64>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    match uri.path_and_query() {
        // Origin form: what `Uri`'s rendering writes, without the formatter.
        Some(target) if uri.scheme().is_none() && uri.authority().is_none() => {
            out.extend_from_slice(target.as_str().as_bytes());
            out.push(b' ');
        }
        // `Uri`'s own rendering, as hyper writes it.
        _ => {
            let _ = write!(out, "{uri} ");
        }
    }
    out.extend_from_slice(if version == Version::HTTP_10 {
        b"HTTP/1.0\r\n"
    } else {
        b"HTTP/1.1\r\n"
    });
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(len) = add_length {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// hyper's `Client::set_length`: the framing fields of `parts` made to agree with the body.
fn settle_framing(parts: &mut Parts, body: &ProxyBody) -> Framing {
    let headers = &mut parts.headers;
    if body.is_end_stream() {
        headers.remove(header::TRANSFER_ENCODING);
        return Framing::Empty;
    }
    let known = body.size_hint().exact();
    let given_length = content_length(headers);
    if parts.version != Version::HTTP_11 {
        // No chunks before HTTP/1.1: a length, or no body at all.
        headers.remove(header::TRANSFER_ENCODING);
        return match (given_length, known) {
            (Some(len), _) => length(len),
            (None, Some(len)) => set_length(headers, len),
            (None, None) => Framing::Empty,
        };
    }
    let mut drop_length = false;
    let chunked = match headers.entry(header::TRANSFER_ENCODING) {
        Entry::Occupied(mut codings) => {
            drop_length = true;
            let ends_chunked = codings
                .iter()
                .next_back()
                .is_some_and(|last| last_token_is(last.as_bytes(), b"chunked"));
            if !ends_chunked {
                add_chunked(&mut codings);
            }
            Some(true)
        }
        Entry::Vacant(codings) => match (given_length, known) {
            (Some(len), _) => return length(len),
            (None, None)
                if matches!(parts.method, Method::GET | Method::HEAD | Method::CONNECT) =>
            {
                Some(false)
            }
            (None, None) => {
                codings.insert(HeaderValue::from_static("chunked"));
                drop_length = true;
                Some(true)
            }
            (None, Some(_)) => None,
        },
    };
    match chunked {
        Some(chunked) => {
            if drop_length {
                headers.remove(header::CONTENT_LENGTH);
            }
            if chunked {
                Framing::Chunked(trailer_names(headers))
            } else {
                Framing::Empty
            }
        }
        None => set_length(headers, known.unwrap_or(0)),
    }
}

fn length(len: u64) -> Framing {
    if len == 0 {
        Framing::Empty
    } else {
        Framing::Length(len)
    }
}

/// `Content-Length: len`, replacing any the request gave (hyper's `set_content_length`).
fn set_length(headers: &mut HeaderMap, len: u64) -> Framing {
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    length(len)
}

/// The request's length when every `Content-Length` value (comma lists included) is the same
/// valid number (hyper's `content_length_parse_all`).
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut found: Option<u64> = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for part in value.as_bytes().split(|b| *b == b',') {
            let n = digits(part.trim_ascii())?;
            if found.is_some_and(|seen| seen != n) {
                return None;
            }
            found = Some(n);
        }
    }
    found
}

/// hyper's `add_chunked`: `, chunked` after the last coding.
fn add_chunked(codings: &mut header::OccupiedEntry<'_, HeaderValue>) {
    if let Some(last) = codings.iter_mut().next_back() {
        let mut value = BytesMut::with_capacity(last.len() + 9);
        value.extend_from_slice(last.as_bytes());
        value.extend_from_slice(b", chunked");
        if let Ok(value) = HeaderValue::from_maybe_shared(value.freeze()) {
            *last = value;
        }
    }
}

/// The names the request's `Trailer` fields declare (hyper sends only those as trailers).
fn trailer_names(headers: &HeaderMap) -> Option<Vec<HeaderName>> {
    let names: Vec<HeaderName> = headers
        .get_all(header::TRAILER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|listed| listed.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    (!names.is_empty()).then_some(names)
}
