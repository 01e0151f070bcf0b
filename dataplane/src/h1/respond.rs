//! The head a client is sent for an endpoint's response, written straight from the parsed one,
//! as the hyper engine writes it: hyper's server, handed the response hyper's client read with
//! its hop-by-hop fields removed. The status line carries the endpoint's version and reason
//! phrase; the fields go on as `super::rewrite::NextHop` decides; `Content-Length` is said once
//! when the body has a length or answers HEAD, and dropped otherwise (always when
//! `Transfer-Encoding` overrides it); a body of unknown length goes chunked to an HTTP/1.1 answer and
//! until the close from HTTP/1.0; `Trailer` survives only where a chunked body may carry
//! trailers, its values on one line; `Date` is added when the endpoint sent none; and
//! `Connection: close` when this answer ends the connection. `respond_tests` compares the two
//! on every case.
//!
//! For an HTTP/1.1 client: an HTTP/1.0 client, a 1xx interim answer and an upgrade are not for
//! this path.

use http::Method;

use super::head::{BodyLength, Field, MAX_FIELDS, ResponseHead};
use super::rewrite::NextHop;

/// How the body that follows the head goes to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outgoing {
    /// Nothing follows the head.
    Empty,
    /// This many bytes, as the endpoint framed them.
    Length(u64),
    /// Chunks (`super::encode`), ended by the last chunk.
    Chunked,
    /// The bytes until the connection closes, which it must after them.
    UntilClose,
}

/// Append the head of the answer to a `method` request to `out`, for the endpoint's response
/// `head` (parsed from `buf`, its fields in `fields`). `closing`: the connection ends after
/// this answer. `date` appends today's `Date` value, asked for only when the endpoint sent
/// none. Returns how the body goes out.
pub fn write_response_head(
    buf: &[u8],
    head: &ResponseHead,
    fields: &[Field],
    method: &Method,
    closing: bool,
    date: impl FnOnce(&mut Vec<u8>),
    out: &mut Vec<u8>,
) -> Outgoing {
    let status = head.status;
    let no_content = matches!(status, 204 | 304) || (100..200).contains(&status);
    let head_request = *method == Method::HEAD;
    let may_have_body = !no_content && !head_request;
    let may_chunk = may_have_body && head.http11;

    out.extend_from_slice(if head.http11 {
        b"HTTP/1.1 "
    } else {
        b"HTTP/1.0 "
    });
    out.extend_from_slice(status_digits(status).as_slice());
    out.push(b' ');
    out.extend_from_slice(&buf[head.reason.clone()]);
    out.extend_from_slice(b"\r\n");

    // Each name told apart once; the full survey of what `Connection` names (and `TE`) only
    // when there is something to survey: a `Connection` that says more than `keep-alive`, or
    // a `TE`.
    // The parser takes at most `MAX_FIELDS`; every field needs its name class below.
    debug_assert!(fields.len() <= MAX_FIELDS);
    let mut names = [Name::Other; MAX_FIELDS];
    let mut survey = false;
    for (name, field) in names.iter_mut().zip(fields) {
        *name = Name::of(&buf[field.name.clone()]);
        survey |= match name {
            Name::Connection => !buf[field.value.clone()].eq_ignore_ascii_case(b"keep-alive"),
            Name::Te => true,
            _ => false,
        };
    }
    let names = &names[..fields.len().min(MAX_FIELDS)];
    let next_hop = survey.then(|| NextHop::survey(buf, fields));
    // A `Content-Length` that `Transfer-Encoding` overrides is not passed on (RFC 9112 §6.3).
    let coded = names.contains(&Name::TransferEncoding);
    let mut said_length = false;
    let mut said_date = false;
    // Most answers name each field once: then no field looks for others of its name.
    let repeated = repeats_a_name(buf, fields);
    // As hyper's field map writes them: a name's fields together, where the name first came,
    // the name in lower case.
    for (at, (field, kind)) in fields.iter().zip(names).enumerate() {
        let name = &buf[field.name.clone()];
        let forwarded = kind.forwarded()
            && next_hop
                .as_ref()
                .is_none_or(|next_hop| next_hop.forwards(name));
        if !forwarded || (repeated && fields[..at].iter().any(|f| same_name(buf, f, name))) {
            continue;
        }
        let rest = if repeated { &fields[at + 1..] } else { &[] };
        let later = rest.iter().filter(|f| same_name(buf, f, name));
        match kind {
            Name::ContentLength => {
                // The answer to HEAD says the length of what GET would get, as the endpoint
                // said it, whatever the status; otherwise only a body with a length says one.
                // Once either way: hyper's server drops the connection instead of answering
                // HEAD when the endpoint repeated the field (the parser has refused differing
                // values).
                let says_length =
                    !coded && (head_request || matches!(head.body, BodyLength::Length(_)));
                if says_length && !said_length {
                    write_field(out, b"content-length", &buf[field.value.clone()]);
                    said_length = true;
                }
            }
            Name::Trailer => {
                // Every `Trailer` value on one line, where a chunked body could carry trailers.
                if may_chunk {
                    out.extend_from_slice(b"trailer: ");
                    out.extend_from_slice(&buf[field.value.clone()]);
                    for trailer in later {
                        out.extend_from_slice(b", ");
                        out.extend_from_slice(&buf[trailer.value.clone()]);
                    }
                    out.extend_from_slice(b"\r\n");
                }
            }
            _ => {
                said_date |= *kind == Name::Date;
                copy_field(out, buf, field);
                for same in later {
                    copy_field(out, buf, same);
                }
            }
        }
    }
    if next_hop.is_some_and(|next_hop| next_hop.te_trailers) {
        write_field(out, b"te", b"trailers");
    }
    if closing {
        write_field(out, b"connection", b"close");
    }
    let outgoing = match head.body {
        _ if !may_have_body => Outgoing::Empty,
        BodyLength::Length(n) => Outgoing::Length(n),
        BodyLength::Empty => {
            write_field(out, b"content-length", b"0");
            Outgoing::Empty
        }
        BodyLength::Chunked | BodyLength::UntilClose if may_chunk => {
            write_field(out, b"transfer-encoding", b"chunked");
            Outgoing::Chunked
        }
        BodyLength::Chunked | BodyLength::UntilClose => Outgoing::UntilClose,
    };
    if !said_date {
        out.extend_from_slice(b"date: ");
        date(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    outgoing
}

/// A status code's three digits.
fn status_digits(status: u16) -> [u8; 3] {
    let digit = |n: u16| b'0' + (n % 10) as u8;
    [digit(status / 100), digit(status / 10), digit(status)]
}

/// A field name this writer treats apart from the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Name {
    Other,
    Date,
    ContentLength,
    Trailer,
    TransferEncoding,
    Connection,
    Te,
    /// `Keep-Alive`, `Proxy-Connection`, `Upgrade`: hop-by-hop, nothing more.
    HopByHop,
}

impl Name {
    /// Told apart by length first, so most names cost one comparison of lengths.
    fn of(name: &[u8]) -> Self {
        let is = |wanted: &[u8]| name.eq_ignore_ascii_case(wanted);
        match name.len() {
            2 if is(b"te") => Name::Te,
            4 if is(b"date") => Name::Date,
            7 if is(b"trailer") => Name::Trailer,
            7 if is(b"upgrade") => Name::HopByHop,
            10 if is(b"connection") => Name::Connection,
            10 if is(b"keep-alive") => Name::HopByHop,
            14 if is(b"content-length") => Name::ContentLength,
            16 if is(b"proxy-connection") => Name::HopByHop,
            17 if is(b"transfer-encoding") => Name::TransferEncoding,
            _ => Name::Other,
        }
    }

    /// Not a hop-by-hop field (`super::rewrite`'s list: these are its six).
    fn forwarded(self) -> bool {
        !matches!(
            self,
            Name::Connection | Name::Te | Name::TransferEncoding | Name::HopByHop
        )
    }
}

/// Whether `field`'s name is `name`, in any case.
fn same_name(buf: &[u8], field: &Field, name: &[u8]) -> bool {
    field.name.len() == name.len() && buf[field.name.clone()].eq_ignore_ascii_case(name)
}

/// Whether two of `fields` have the same name (in any case). Lengths first: most pairs differ
/// there.
fn repeats_a_name(buf: &[u8], fields: &[Field]) -> bool {
    fields.iter().enumerate().any(|(at, field)| {
        let name = &buf[field.name.clone()];
        fields[at + 1..].iter().any(|f| same_name(buf, f, name))
    })
}

/// `field`'s line as [`write_field`] writes it. Most endpoints write each line as that already
/// (`Name: value` and CRLF): then the line is copied whole and its name lowered in place.
fn copy_field(out: &mut Vec<u8>, buf: &[u8], field: &Field) {
    let (name, value) = (field.name.clone(), field.value.clone());
    let line_end = value.end + 2;
    if value.start == name.end + 2
        && buf.get(name.end..value.start) == Some(b": ")
        && buf.get(value.end..line_end) == Some(b"\r\n")
    {
        let start = out.len();
        out.extend_from_slice(&buf[name.start..line_end]);
        out[start..start + name.len()].make_ascii_lowercase();
    } else {
        write_field(out, &buf[name], &buf[value]);
    }
}

/// A field's line, its name in lower case as hyper writes names (copied, then lowered in
/// place: a loop the compiler runs over many bytes at once).
fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.reserve(name.len() + value.len() + 4);
    let start = out.len();
    out.extend_from_slice(name);
    out[start..].make_ascii_lowercase();
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}
