//! A chunked body on its way out to the next hop, written as hyper writes one: each piece of
//! data its own chunk (`{len:X}\r\n`, the data, `\r\n`; the data is written from where it
//! lies, never copied into a chunk buffer), then the last chunk with the trailer fields the
//! message declared in its `Trailer` field. An undeclared trailer is dropped, and so is one
//! that may not be a trailer at all (RFC 9110 §6.5.1: framing, routing, authentication and
//! the like), as hyper's encoder drops them; and a server sends trailers only to a client
//! that said `TE: trailers`, as hyper's server does. `encode_tests` holds the two to the same
//! bytes.

use super::head::{Field, MAX_FIELDS, list_has};

/// What closes every chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";

/// Fields that never travel as trailers (hyper's list).
pub(crate) const NOT_TRAILERS: [&[u8]; 12] = [
    b"authorization",
    b"cache-control",
    b"content-encoding",
    b"content-length",
    b"content-range",
    b"content-type",
    b"host",
    b"max-forwards",
    b"set-cookie",
    b"trailer",
    b"transfer-encoding",
    b"te",
];

/// Append the line that opens a chunk of `len` bytes (`len` > 0: an empty chunk would end the
/// body).
pub fn chunk_head(len: usize, out: &mut Vec<u8>) {
    debug_assert!(len > 0, "an empty chunk ends the body");
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut rest = len;
    loop {
        at -= 1;
        digits[at] = DIGITS[rest % 16];
        rest /= 16;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

/// Append the end of a chunked body: the last chunk, the fields of `trailers` (a trailer
/// section as the body decoder kept it) that the message head (`head`, its `fields`) declared
/// in `Trailer` and that may be trailers, then the empty line. `to_client_without_te`: the body
/// is a response to a client that did not accept trailers ([`accepts_trailers`]); none go.
/// The rare body with declared trailers pays one allocation.
pub fn write_last_chunk(
    head: &[u8],
    fields: &[Field],
    trailers: &[u8],
    to_client_without_te: bool,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"0\r\n");
    if !to_client_without_te
        && !trailers.is_empty()
        && fields.iter().any(|f| is_trailer_field(head, f))
    {
        let mut section = [httparse::EMPTY_HEADER; MAX_FIELDS];
        // The decoder kept the section without its closing empty line, and only a valid one.
        let mut closed = Vec::with_capacity(trailers.len() + 2);
        closed.extend_from_slice(trailers);
        closed.extend_from_slice(b"\r\n");
        if let Ok(httparse::Status::Complete((_, parsed))) =
            httparse::parse_headers(&closed, &mut section)
        {
            for trailer in parsed.iter() {
                let name = trailer.name.as_bytes();
                if declared(head, fields, name)
                    && !NOT_TRAILERS.iter().any(|n| name.eq_ignore_ascii_case(n))
                {
                    out.extend_from_slice(name);
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(trailer.value);
                    out.extend_from_slice(b"\r\n");
                }
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether a request (`head`, its `fields`) accepts trailers in its answer: a `TE` field lists
/// `trailers`.
pub fn accepts_trailers(head: &[u8], fields: &[Field]) -> bool {
    fields.iter().any(|f| {
        head[f.name.clone()].eq_ignore_ascii_case(b"te")
            && list_has(&head[f.value.clone()], b"trailers")
    })
}

fn is_trailer_field(head: &[u8], field: &Field) -> bool {
    head[field.name.clone()].eq_ignore_ascii_case(b"trailer")
}

/// Whether a `Trailer` field of the head names `name`. Only values of visible ASCII count, as
/// `HeaderValue::to_str` reads them in hyper.
fn declared(head: &[u8], fields: &[Field], name: &[u8]) -> bool {
    fields
        .iter()
        .any(|f| is_trailer_field(head, f) && list_has(&head[f.value.clone()], name))
}
