//! Header rules of a forwarding proxy (RFC 9110 §7.6.1): hop-by-hop fields, and the fields named
//! in `Connection`, belong to one connection and are removed in both directions; the original
//! client, scheme and host are passed on in `X-Forwarded-For/-Proto/-Host`. Upgrades (WebSocket)
//! are not proxied yet, so `Upgrade` is removed like any other hop-by-hop field.

use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Remove hop-by-hop fields, including every field the `Connection` header names. A `TE:
/// trailers` request field survives because gRPC needs it end to end.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    let keep_te_trailers = headers
        .get(header::TE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
        });
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    if keep_te_trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// Add `X-Forwarded-For` (appending the client to any chain already there), and set
/// `X-Forwarded-Proto` and `X-Forwarded-Host` when the client did not.
pub fn add_forwarded(headers: &mut HeaderMap, client: SocketAddr, host: Option<&HeaderValue>) {
    let client_ip = client.ip().to_string();
    let chain = match headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
        Some(prior) if !prior.is_empty() => format!("{prior}, {client_ip}"),
        _ => client_ip,
    };
    if let Ok(value) = HeaderValue::from_str(&chain) {
        headers.insert(X_FORWARDED_FOR, value);
    }
    if !headers.contains_key(&X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    }
    if let Some(host) = host
        && !headers.contains_key(&X_FORWARDED_HOST)
    {
        headers.insert(X_FORWARDED_HOST, host.clone());
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
        add_forwarded(
            &mut h,
            client,
            Some(&HeaderValue::from_static("shop.local")),
        );
        assert_eq!(h.get("x-forwarded-for").unwrap(), "1.2.3.4, 10.0.0.7");
        assert_eq!(h.get("x-forwarded-proto").unwrap(), "http");
        assert_eq!(h.get("x-forwarded-host").unwrap(), "shop.local");

        let mut fresh = HeaderMap::new();
        add_forwarded(&mut fresh, client, None);
        assert_eq!(fresh.get("x-forwarded-for").unwrap(), "10.0.0.7");
        assert!(!fresh.contains_key("x-forwarded-host"));
    }
}
