//! The request head an endpoint is sent, written straight from a parsed head into the outgoing
//! buffer: the request line in origin form, the client's fields minus the hop-by-hop ones and
//! those `Connection` names, `TE: trailers` kept for gRPC, `X-Forwarded-For/-Proto/-Host` and
//! `Host` said once, then the framing field the body needs. The rules are the hyper engine's
//! (`crate::proxy::headers::prepare_request_fields`, `crate::proxy::request::origin_form`),
//! applied to field positions instead of a `HeaderMap`, with no allocation for an origin-form
//! target; `rewrite_tests` and the `h1_wire` fuzz target hold the two to the same result.

use super::head::{BodyLength, Field, RequestHead};
use crate::proxy::headers::ClientAddr;

/// The hop-by-hop fields (RFC 9110 §7.6.1, and the `Keep-Alive`/`Proxy-Connection` of older
/// clients), lowercase.
const HOP_BY_HOP: [&[u8]; 6] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"transfer-encoding",
    b"upgrade",
];

/// A request target that cannot be sent in origin form; the hyper engine answers it 400 too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadTarget(pub String);

impl std::fmt::Display for BadTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadTarget {}

/// What one pass over the client's fields found.
#[derive(Default)]
struct Survey {
    /// Which hop-by-hop fields are there, in [`HOP_BY_HOP`] order.
    hop_by_hop: [bool; HOP_BY_HOP.len()],
    connection_fields: usize,
    /// The first `Host` field.
    host: Option<usize>,
}

/// Append the head to send an HTTP/1.1 endpoint for `head` (parsed from `buf`, its fields in
/// `fields`) to `out`, for a client `client`. A chunked body goes on chunked; a length is said
/// by the client's own `Content-Length`, which is not hop-by-hop.
pub fn write_request_head(
    buf: &[u8],
    head: &RequestHead,
    fields: &[Field],
    client: &ClientAddr,
    out: &mut Vec<u8>,
) -> Result<(), BadTarget> {
    let name = |field: &Field| &buf[field.name.clone()];
    let value = |field: &Field| &buf[field.value.clone()];
    let target = &buf[head.target.clone()];
    // Absolute form (or authority form) is rare: parsed as the hyper engine parses it.
    let not_origin_form = target.first() != Some(&b'/') && target != b"*";
    let uri = match not_origin_form {
        true => Some(http::Uri::try_from(target).map_err(|e| BadTarget(e.to_string()))?),
        false => None,
    };
    let origin_of_uri = match &uri {
        Some(uri) => Some(
            crate::proxy::request::origin_form(uri)
                .map_err(BadTarget)?
                .to_string(),
        ),
        None => None,
    };
    // A fragment is the client's own (RFC 9110 §4.2.4): never sent, as `Uri` drops it.
    let without_fragment = target.split(|&b| b == b'#').next().unwrap_or(target);
    let origin: &[u8] = origin_of_uri
        .as_ref()
        .map_or(without_fragment, |o| o.as_bytes());

    let mut survey = Survey::default();
    for (i, field) in fields.iter().enumerate() {
        let name = name(field);
        if let Some(at) = HOP_BY_HOP.iter().position(|h| name.eq_ignore_ascii_case(h)) {
            survey.hop_by_hop[at] = true;
            if at == 0 {
                survey.connection_fields += 1;
            }
        } else if survey.host.is_none() && name.eq_ignore_ascii_case(b"host") {
            survey.host = Some(i);
        }
    }
    // Most requests that carry `Connection` say only `keep-alive`, which names no field.
    let names_fields = survey.hop_by_hop[0]
        && (survey.connection_fields > 1
            || !fields
                .iter()
                .find(|f| name(f).eq_ignore_ascii_case(b"connection"))
                .is_some_and(|f| value(f).eq_ignore_ascii_case(b"keep-alive")));
    let named = |field_name: &[u8]| names_fields && connection_names(buf, fields, field_name);
    let forwarded = |field: &Field| {
        let field_name = name(field);
        !HOP_BY_HOP
            .iter()
            .any(|h| field_name.eq_ignore_ascii_case(h))
            && !named(field_name)
    };
    // The authority of an absolute-form target stands in for a missing `Host`.
    let host: Option<&[u8]> = match survey.host {
        Some(i) => Some(value(&fields[i])),
        None => uri
            .as_ref()
            .and_then(http::Uri::authority)
            .map(|a| a.as_str().as_bytes()),
    };
    // `TE: trailers` survives (gRPC needs it end to end), judged on the first `TE` field left
    // once the fields `Connection` names are gone.
    let keep_te_trailers = survey.hop_by_hop[3]
        && !named(b"te")
        && fields
            .iter()
            .find(|f| name(f).eq_ignore_ascii_case(b"te"))
            .map(value)
            .filter(|v| visible(v))
            .is_some_and(|v| {
                v.split(|&b| b == b',')
                    .any(|t| trim(t).eq_ignore_ascii_case(b"trailers"))
            });

    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(origin);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut forwarded_for_written = false;
    let mut saw_proto = false;
    let mut saw_forwarded_host = false;
    for field in fields.iter().filter(|f| forwarded(f)) {
        let field_name = name(field);
        if field_name.eq_ignore_ascii_case(b"host") {
            continue; // said once, below
        }
        if field_name.eq_ignore_ascii_case(b"x-forwarded-for") {
            // The first one carries the chain on, with this client appended; the rest go.
            if !std::mem::replace(&mut forwarded_for_written, true) {
                out.extend_from_slice(b"x-forwarded-for: ");
                if !value(field).is_empty() {
                    out.extend_from_slice(value(field));
                    out.extend_from_slice(b", ");
                }
                out.extend_from_slice(client.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            continue;
        }
        saw_proto |= field_name.eq_ignore_ascii_case(b"x-forwarded-proto");
        saw_forwarded_host |= field_name.eq_ignore_ascii_case(b"x-forwarded-host");
        write_field(out, field_name, value(field));
    }
    if !forwarded_for_written {
        write_field(out, b"x-forwarded-for", client.as_bytes());
    }
    if !saw_proto {
        write_field(out, b"x-forwarded-proto", b"http");
    }
    if let Some(host) = host {
        if !saw_forwarded_host {
            write_field(out, b"x-forwarded-host", host);
        }
        write_field(out, b"host", host);
    }
    if keep_te_trailers {
        write_field(out, b"te", b"trailers");
    }
    if head.body == BodyLength::Chunked {
        write_field(out, b"transfer-encoding", b"chunked");
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Whether a `Connection` field names `field_name` (its `keep-alive` option names none). Only
/// values of visible ASCII count, as `HeaderValue::to_str` reads them in the hyper engine.
fn connection_names(buf: &[u8], fields: &[Field], field_name: &[u8]) -> bool {
    fields
        .iter()
        .filter(|f| buf[f.name.clone()].eq_ignore_ascii_case(b"connection"))
        .map(|f| &buf[f.value.clone()])
        .filter(|v| visible(v))
        .flat_map(|v| v.split(|&b| b == b','))
        .map(trim)
        .any(|option| {
            option.eq_ignore_ascii_case(field_name) && !option.eq_ignore_ascii_case(b"keep-alive")
        })
}

/// Visible ASCII, spaces and tabs: what `HeaderValue::to_str` accepts.
fn visible(value: &[u8]) -> bool {
    value
        .iter()
        .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
}

fn trim(bytes: &[u8]) -> &[u8] {
    bytes.trim_ascii()
}

fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}
