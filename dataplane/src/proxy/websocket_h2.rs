//! WebSocket over HTTP/2 (RFC 8441): a client's extended CONNECT (`:protocol websocket`, which
//! the listener allows by advertising SETTINGS_ENABLE_CONNECT_PROTOCOL) is carried to the
//! endpoint as the HTTP/1.1 WebSocket upgrade every WebSocket server understands, with a
//! handshake key of the sidecar's own; the endpoint's `101` is checked against that key
//! (RFC 6455's `Sec-WebSocket-Accept`) and goes back to the client as the `200` HTTP/2 expects.
//! From there the tunnel is `super::upgrade`'s, the same as for HTTP/1.1. Pure functions on
//! request and response heads; Envoy translates the same way.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version, request, response};
use hyper::ext::Protocol;

/// RFC 6455's GUID, appended to the key before hashing.
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const SEC_WEBSOCKET_KEY: HeaderName = HeaderName::from_static("sec-websocket-key");
const SEC_WEBSOCKET_ACCEPT: HeaderName = HeaderName::from_static("sec-websocket-accept");
const SEC_WEBSOCKET_VERSION: HeaderName = HeaderName::from_static("sec-websocket-version");

/// Whether a request is an HTTP/2 extended CONNECT (it names a `:protocol`).
pub(super) fn is_extended_connect<B>(req: &http::Request<B>) -> bool {
    req.method() == Method::CONNECT && req.extensions().get::<Protocol>().is_some()
}

/// Turn an extended CONNECT for `websocket` into the HTTP/1.1 upgrade request the endpoint
/// gets (`GET`, `Host` from `:authority`, `Upgrade: websocket`, a fresh `Sec-WebSocket-Key`);
/// returns that key. Any other protocol is refused with the reason, for a `501`.
pub(super) fn to_http1(parts: &mut request::Parts, random: [u8; 16]) -> Result<String, String> {
    let protocol = parts
        .extensions
        .remove::<Protocol>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    if !protocol.eq_ignore_ascii_case("websocket") {
        return Err(format!(
            "extended CONNECT for `{protocol}` is not supported; only websocket is"
        ));
    }
    if let Some(authority) = parts.uri.authority()
        && let Ok(host) = HeaderValue::from_str(authority.as_str())
    {
        parts.headers.insert(header::HOST, host);
    }
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    parts.uri = target
        .parse()
        .map_err(|_| format!("the path `{target}` is not a request target"))?;
    parts.method = Method::GET;
    parts.version = Version::HTTP_11;
    let key = STANDARD.encode(random);
    let value = HeaderValue::from_str(&key).map_err(|e| e.to_string())?;
    let headers = &mut parts.headers;
    headers.insert(SEC_WEBSOCKET_KEY, value);
    headers
        .entry(SEC_WEBSOCKET_VERSION)
        .or_insert(HeaderValue::from_static("13"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    Ok(key)
}

/// The `Sec-WebSocket-Accept` an endpoint must answer `key` with.
pub(super) fn accept_for(key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{WEBSOCKET_GUID}").as_bytes(),
    );
    STANDARD.encode(digest.as_ref())
}

/// Check the endpoint's `101` against the key sent, and turn it into the `200` the HTTP/2
/// client gets (the handshake headers are HTTP/1.1's and go; subprotocol and extensions stay).
pub(super) fn to_h2_response(parts: &mut response::Parts, key: &str) -> Result<(), String> {
    let accept = parts
        .headers
        .get(&SEC_WEBSOCKET_ACCEPT)
        .and_then(|v| v.to_str().ok());
    if accept != Some(accept_for(key).as_str()) {
        return Err(format!(
            "the endpoint's WebSocket handshake answers the wrong key (Sec-WebSocket-Accept {})",
            accept.unwrap_or("missing")
        ));
    }
    parts.status = StatusCode::OK;
    parts.version = Version::HTTP_2;
    for name in [
        header::UPGRADE,
        header::CONNECTION,
        SEC_WEBSOCKET_ACCEPT,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
    ] {
        parts.headers.remove(name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(protocol: &'static str) -> request::Parts {
        let mut req = http::Request::builder()
            .method(Method::CONNECT)
            .version(Version::HTTP_2)
            .uri("http://chat.example:8080/room/1?x=2")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-protocol", "chat")
            .body(())
            .unwrap();
        req.extensions_mut().insert(Protocol::from_static(protocol));
        assert!(is_extended_connect(&req));
        req.into_parts().0
    }

    #[test]
    fn rfc_6455s_example_key_gets_its_example_accept() {
        assert_eq!(
            accept_for("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn a_websocket_connect_becomes_an_http1_upgrade_with_a_key_of_our_own() {
        let mut parts = connect("websocket");
        let key = to_http1(&mut parts, *b"the sample nonce").unwrap();
        assert_eq!(key, "dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(parts.method, Method::GET);
        assert_eq!(parts.version, Version::HTTP_11);
        assert_eq!(parts.uri, "/room/1?x=2");
        let h = &parts.headers;
        assert_eq!(h["host"], "chat.example:8080");
        assert_eq!(h["upgrade"], "websocket");
        assert_eq!(h["connection"], "upgrade");
        assert_eq!(h["sec-websocket-key"], key.as_str());
        assert_eq!(h["sec-websocket-version"], "13");
        assert_eq!(h["sec-websocket-protocol"], "chat");
        assert!(parts.extensions.get::<Protocol>().is_none());
    }

    #[test]
    fn another_protocol_is_refused_with_its_name() {
        let mut parts = connect("connect-udp");
        let refusal = to_http1(&mut parts, [0; 16]).unwrap_err();
        assert!(refusal.contains("connect-udp"), "{refusal}");
    }

    #[test]
    fn the_101_becomes_a_200_only_when_it_answers_our_key() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let switching = |accept: Option<&'static str>| {
            let mut r = http::Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header("upgrade", "websocket")
                .header("connection", "Upgrade")
                .header("sec-websocket-protocol", "chat");
            if let Some(accept) = accept {
                r = r.header("sec-websocket-accept", accept);
            }
            r.body(()).unwrap().into_parts().0
        };
        let mut parts = switching(Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        to_h2_response(&mut parts, key).unwrap();
        assert_eq!(parts.status, StatusCode::OK);
        assert!(parts.headers.get("upgrade").is_none());
        assert!(parts.headers.get("connection").is_none());
        assert!(parts.headers.get("sec-websocket-accept").is_none());
        assert_eq!(parts.headers["sec-websocket-protocol"], "chat");
        for wrong in [Some("bm90IHRoZSByaWdodCBvbmU="), None] {
            let mut parts = switching(wrong);
            let error = to_h2_response(&mut parts, key).unwrap_err();
            assert!(error.contains("wrong key"), "{error}");
        }
    }
}
