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
use http::{HeaderMap, HeaderName, Method, Version};
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
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    // `Uri`'s own rendering, as hyper writes it.
    let _ = write!(out, "{} ", parts.uri);
    out.extend_from_slice(if parts.version == Version::HTTP_10 {
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
    out.extend_from_slice(b"\r\n");
    framing
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
