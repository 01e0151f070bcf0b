//! Header rules of a forwarding proxy (RFC 9110 §7.6.1): hop-by-hop fields, and the fields named
//! in `Connection`, belong to one connection and are removed in both directions; the original
//! client, scheme and host are passed on in `X-Forwarded-For/-Proto/-Host`. `Upgrade` is removed
//! like any other hop-by-hop field; the upgrade path (`super::upgrade`) puts back what it carries.

use std::net::SocketAddr;

use http::Uri;
use http::header::{self, Entry, HeaderMap, HeaderName, HeaderValue};

/// The header carrying why the sidecar answered a request itself (`super::answer`, and the
/// trailers-only gRPC answers of `super::grpc`).
pub const REASON_HEADER: &str = "x-rollcall-reason";

/// A static, not a const: a const array would be built anew at every use, inside the loop too.
static HOP_BY_HOP: [HeaderName; HOP_BY_HOP_COUNT] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

const HOP_BY_HOP_COUNT: usize = 6;
/// Where `Connection` and `TE` stand in `HOP_BY_HOP`: each needs a look at its value; and
/// `Transfer-Encoding`, which overrides a response's `Content-Length`.
const CONNECTION_AT: usize = 0;
const TE_AT: usize = 3;
const TRANSFER_ENCODING_AT: usize = 4;

/// What one pass over a message's fields found: which hop-by-hop fields are there, and how many
/// `Content-Length` fields.
struct Survey {
    present: [bool; HOP_BY_HOP_COUNT],
    lengths: usize,
}

fn survey(headers: &HeaderMap) -> Survey {
    let mut survey = Survey {
        present: [false; HOP_BY_HOP_COUNT],
        lengths: 0,
    };
    for (name, _) in headers {
        if let Some(i) = HOP_BY_HOP.iter().position(|h| h == name) {
            survey.present[i] = true;
        } else if *name == header::CONTENT_LENGTH {
            survey.lengths += 1;
        }
    }
    survey
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The client of one connection as `X-Forwarded-For` names it, formatted once for every
/// request the connection carries (formatting an address per request was a measurable share of
/// the request path's cost).
#[derive(Clone, Debug)]
pub struct ClientAddr {
    forwarded_for: HeaderValue,
}

impl ClientAddr {
    pub fn new(addr: SocketAddr) -> Self {
        let forwarded_for = HeaderValue::from_str(&addr.ip().to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown"));
        Self { forwarded_for }
    }

    /// The client as `X-Forwarded-For` names it.
    pub fn as_bytes(&self) -> &[u8] {
        self.forwarded_for.as_bytes()
    }
}

/// Remove hop-by-hop fields, including every field the `Connection` header names. A `TE:
/// trailers` request field survives because gRPC needs it end to end.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let present = survey(headers).present;
    strip_surveyed(headers, present);
}

/// [`strip_hop_by_hop`] once [`survey`] has said which hop-by-hop fields are there at all;
/// most messages carry none or only `Connection`, so most of the hashed removals are skipped.
fn strip_surveyed(headers: &mut HeaderMap, present: [bool; HOP_BY_HOP_COUNT]) {
    if !present.contains(&true) {
        return;
    }
    // Most messages that carry `Connection` say only `keep-alive`, which names no field to
    // remove (its `Keep-Alive` field goes below): no need to take the value apart.
    let names_fields = present[CONNECTION_AT] && {
        let mut values = headers.get_all(header::CONNECTION).iter();
        let first = values.next().map(HeaderValue::as_bytes);
        values.next().is_some() || !first.is_some_and(|v| v.eq_ignore_ascii_case(b"keep-alive"))
    };
    if names_fields {
        let named: Vec<HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            // The common option; a `Keep-Alive` field is removed below when there is one.
            .filter(|name| !name.eq_ignore_ascii_case("keep-alive"))
            .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    let keep_te_trailers = present[TE_AT]
        && headers
            .get(header::TE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
            });
    for (name, present) in HOP_BY_HOP.iter().zip(present) {
        if present {
            headers.remove(name);
        }
    }
    if keep_te_trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// An endpoint's response fields as they go to the client: a `Content-Length` that
/// `Transfer-Encoding` overrides is removed (RFC 9112 §6.3: the coding framed the body, and the
/// client's framing is the sidecar's to choose), a repeated one said once, then the hop-by-hop
/// fields go.
pub fn prepare_response_fields(headers: &mut HeaderMap) {
    // One pass finds both; the common answer (one length, no coding) pays no lookup for it.
    let survey = survey(headers);
    if survey.lengths > 0 && survey.present[TRANSFER_ENCODING_AT] {
        headers.remove(header::CONTENT_LENGTH);
    } else if survey.lengths > 1
        && let Some(first) = headers.get(header::CONTENT_LENGTH).cloned()
    {
        // A length repeated (with one value: hyper's client refuses differing ones) is said
        // once; hyper's server would drop the connection rather than answer HEAD with two.
        headers.insert(header::CONTENT_LENGTH, first);
    }
    strip_surveyed(headers, survey.present);
}

/// The host a request names: its first `Host` field, else the authority of an absolute-form
/// target. Read before [`prepare_request_fields`], which may remove the field.
pub fn request_host(headers: &HeaderMap, uri: &Uri) -> Option<HeaderValue> {
    headers.get(header::HOST).cloned().or_else(|| {
        uri.authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    })
}

/// A request's fields as they go to an endpoint: hop-by-hop fields out, the forwarding fields
/// in, and `Host` said once, as [`request_host`] read it.
pub fn prepare_request_fields(
    headers: &mut HeaderMap,
    client: &ClientAddr,
    host: Option<&HeaderValue>,
) {
    strip_hop_by_hop(headers);
    add_forwarded(headers, client, host);
    if let Some(host) = host {
        headers.insert(header::HOST, host.clone());
    }
}

/// Add `X-Forwarded-For` (appending the client to any chain already there), and set
/// `X-Forwarded-Proto` and `X-Forwarded-Host` when the client did not.
pub fn add_forwarded(headers: &mut HeaderMap, client: &ClientAddr, host: Option<&HeaderValue>) {
    match headers.entry(X_FORWARDED_FOR) {
        Entry::Occupied(mut entry) if !entry.get().is_empty() => {
            let prior = entry.get().as_bytes();
            let mut chain = Vec::with_capacity(prior.len() + 2 + client.forwarded_for.len());
            chain.extend_from_slice(prior);
            chain.extend_from_slice(b", ");
            chain.extend_from_slice(client.forwarded_for.as_bytes());
            if let Ok(chain) = HeaderValue::from_bytes(&chain) {
                entry.insert(chain);
            }
        }
        Entry::Occupied(mut entry) => {
            entry.insert(client.forwarded_for.clone());
        }
        Entry::Vacant(entry) => {
            entry.insert(client.forwarded_for.clone());
        }
    }
    if let Entry::Vacant(entry) = headers.entry(X_FORWARDED_PROTO) {
        entry.insert(HeaderValue::from_static("http"));
    }
    if let Some(host) = host
        && let Entry::Vacant(entry) = headers.entry(X_FORWARDED_HOST)
    {
        entry.insert(host.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        m
    }

    #[test]
    fn a_response_length_that_a_transfer_coding_overrides_does_not_reach_the_client() {
        let mut h = map(&[
            ("transfer-encoding", "chunked"),
            ("content-length", "2"),
            ("x-kept", "1"),
        ]);
        prepare_response_fields(&mut h);
        assert_eq!(h, map(&[("x-kept", "1")]));
        // Without a transfer coding the length is the body's framing, and stays.
        let mut h = map(&[("content-length", "2"), ("connection", "close")]);
        prepare_response_fields(&mut h);
        assert_eq!(h, map(&[("content-length", "2")]));
    }

    #[test]
    fn hop_by_hop_and_connection_named_fields_are_removed() {
        let mut h = map(&[
            ("connection", "keep-alive, x-session-secret"),
            ("keep-alive", "timeout=5"),
            ("x-session-secret", "s"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-connection", "keep-alive"),
            ("te", "gzip"),
            ("accept", "*/*"),
        ]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h.contains_key("accept"));
    }

    #[test]
    fn te_trailers_survives_for_grpc() {
        let mut h = map(&[("te", "trailers, deflate")]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.get("te").unwrap(), "trailers");
    }

    #[test]
    fn forwarded_for_appends_to_an_existing_chain() {
        let client: SocketAddr = "10.0.0.7:5555".parse().unwrap();
        let mut h = map(&[("x-forwarded-for", "1.2.3.4")]);
        let client = ClientAddr::new(client);
        add_forwarded(
            &mut h,
            &client,
            Some(&HeaderValue::from_static("shop.local")),
        );
        assert_eq!(h.get("x-forwarded-for").unwrap(), "1.2.3.4, 10.0.0.7");
        assert_eq!(h.get("x-forwarded-proto").unwrap(), "http");
        assert_eq!(h.get("x-forwarded-host").unwrap(), "shop.local");

        let mut fresh = HeaderMap::new();
        add_forwarded(&mut fresh, &client, None);
        assert_eq!(fresh.get("x-forwarded-for").unwrap(), "10.0.0.7");
        assert!(!fresh.contains_key("x-forwarded-host"));
    }

    #[test]
    fn a_message_without_hop_by_hop_fields_is_left_as_it_is() {
        let mut h = map(&[
            ("accept", "*/*"),
            ("x-trace", "a"),
            ("x-trace", "b"),
            ("content-length", "3"),
        ]);
        let before = h.clone();
        strip_hop_by_hop(&mut h);
        assert_eq!(h, before);
    }

    #[test]
    fn connection_keep_alive_goes_and_the_rest_stays() {
        let mut h = map(&[
            ("connection", "Keep-Alive"),
            ("keep-alive", "timeout=5"),
            ("content-type", "text/plain"),
        ]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h.contains_key("content-type"));
    }

    #[test]
    fn an_empty_forwarded_for_is_replaced_and_ipv6_clients_are_written_bare() {
        let client = ClientAddr::new("[2001:db8::7]:443".parse().unwrap());
        let mut h = map(&[("x-forwarded-for", ""), ("x-forwarded-proto", "https")]);
        add_forwarded(&mut h, &client, None);
        assert_eq!(h.get("x-forwarded-for").unwrap(), "2001:db8::7");
        assert_eq!(
            h.get("x-forwarded-proto").unwrap(),
            "https",
            "the client's word stays"
        );
        // Every request of the connection gets the same entry.
        let mut second = HeaderMap::new();
        add_forwarded(&mut second, &client, None);
        assert_eq!(second.get("x-forwarded-for").unwrap(), "2001:db8::7");
    }
}
