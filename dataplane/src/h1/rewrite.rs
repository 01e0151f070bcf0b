//! What goes on to the next hop, written straight from a parsed head into the outgoing buffer.
//! A request's head for the endpoint: the request line in origin form, the client's fields minus the hop-by-hop ones and
//! those `Connection` names, `TE: trailers` kept for gRPC, `X-Forwarded-For/-Proto/-Host` and
//! `Host` said once, then the framing field the body needs; a response's fields for the client,
//! minus the hop-by-hop ones the same way ([`NextHop`] decides both). The rules are the hyper engine's
//! (`crate::proxy::headers::prepare_request_fields`, `crate::proxy::request::origin_form`),
//! applied to field positions instead of a `HeaderMap`, with no allocation for an origin-form
//! target; `rewrite_tests` and the `h1_wire` fuzz target hold the two to the same result.

use super::head::{BodyLength, Field, RequestHead, list_has, visible};
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
/// Where `Connection` and `TE` stand in [`HOP_BY_HOP`].
const CONNECTION_AT: usize = 0;
const TE_AT: usize = 3;

/// A request target that cannot be sent in origin form; the hyper engine answers it 400 too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadTarget(pub String);

impl std::fmt::Display for BadTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadTarget {}

/// Which of a message's fields go on to the next hop, from one pass over them: not the
/// hop-by-hop ones, not those a `Connection` field names (its `keep-alive` option names none);
/// `TE: trailers` is said again when the first `TE` field left asks for trailers.
pub struct NextHop<'a> {
    buf: &'a [u8],
    fields: &'a [Field],
    /// Some `Connection` field names more than `keep-alive`.
    names_fields: bool,
    /// `TE: trailers` goes on (gRPC needs it end to end).
    pub te_trailers: bool,
    /// The first `Host` field's value.
    pub host: Option<&'a [u8]>,
}

impl<'a> NextHop<'a> {
    pub fn survey(buf: &'a [u8], fields: &'a [Field]) -> Self {
        let mut present = [false; HOP_BY_HOP.len()];
        let mut connection_fields = 0;
        let mut host = None;
        for field in fields {
            let name = &buf[field.name.clone()];
            if let Some(at) = HOP_BY_HOP.iter().position(|h| name.eq_ignore_ascii_case(h)) {
                present[at] = true;
                connection_fields += usize::from(at == CONNECTION_AT);
            } else if host.is_none() && name.eq_ignore_ascii_case(b"host") {
                host = Some(&buf[field.value.clone()]);
            }
        }
        let first_value = |wanted: &[u8]| {
            fields
                .iter()
                .find(|f| buf[f.name.clone()].eq_ignore_ascii_case(wanted))
                .map(|f| &buf[f.value.clone()])
        };
        // Most messages that carry `Connection` say only `keep-alive`, which names no field.
        let names_fields = present[CONNECTION_AT]
            && (connection_fields > 1
                || !first_value(b"connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case(b"keep-alive")));
        let mut next_hop = NextHop {
            buf,
            fields,
            names_fields,
            te_trailers: false,
            host,
        };
        // Judged on the first `TE` field left once the fields `Connection` names are gone.
        next_hop.te_trailers = present[TE_AT]
            && !next_hop.named(b"te")
            && first_value(b"te").is_some_and(|v| list_has(v, b"trailers"));
        next_hop
    }

    /// Whether a field named `name` goes on.
    pub fn forwards(&self, name: &[u8]) -> bool {
        !HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) && !self.named(name)
    }

    /// The fields that go on, in order.
    pub fn forwarded(&self) -> impl Iterator<Item = &'a Field> + '_ {
        self.fields
            .iter()
            .filter(|f| self.forwards(&self.buf[f.name.clone()]))
    }

    /// Whether a `Connection` field names `name`. Only values of visible ASCII count, as
    /// `HeaderValue::to_str` reads them in the hyper engine.
    fn named(&self, name: &[u8]) -> bool {
        self.names_fields
            && self
                .fields
                .iter()
                .filter(|f| self.buf[f.name.clone()].eq_ignore_ascii_case(b"connection"))
                .map(|f| &self.buf[f.value.clone()])
                .filter(|v| visible(v))
                .flat_map(|v| v.split(|&b| b == b','))
                .map(<[u8]>::trim_ascii)
                .any(|option| {
                    option.eq_ignore_ascii_case(name) && !option.eq_ignore_ascii_case(b"keep-alive")
                })
    }
}

/// Append the fields of a response (parsed from `buf`) that go on to the client to `out`, as
/// `name: value` lines; the framing fields are the connection's to write.
pub fn write_response_fields(buf: &[u8], fields: &[Field], out: &mut Vec<u8>) {
    let next_hop = NextHop::survey(buf, fields);
    // A `Content-Length` that `Transfer-Encoding` overrides goes too (RFC 9112 §6.3), and a
    // repeated one is said once.
    let coded = fields
        .iter()
        .any(|f| buf[f.name.clone()].eq_ignore_ascii_case(b"transfer-encoding"));
    let mut said_length = false;
    for field in next_hop.forwarded() {
        let name = &buf[field.name.clone()];
        if name.eq_ignore_ascii_case(b"content-length")
            && (coded || std::mem::replace(&mut said_length, true))
        {
            continue;
        }
        write_field(out, name, &buf[field.value.clone()]);
    }
    if next_hop.te_trailers {
        write_field(out, b"te", b"trailers");
    }
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
    let next_hop = NextHop::survey(buf, fields);
    // The authority of an absolute-form target stands in for a missing `Host`.
    let host: Option<&[u8]> = next_hop.host.or_else(|| {
        uri.as_ref()
            .and_then(http::Uri::authority)
            .map(|a| a.as_str().as_bytes())
    });

    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(origin);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut forwarded_for_written = false;
    let mut saw_proto = false;
    let mut saw_forwarded_host = false;
    for field in next_hop.forwarded() {
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
    if next_hop.te_trailers {
        write_field(out, b"te", b"trailers");
    }
    if head.body == BodyLength::Chunked {
        write_field(out, b"transfer-encoding", b"chunked");
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}
