//! The head an endpoint is sent, byte for byte, for the cases a forwarding proxy must get right
//! (the differential tests hold it to the hyper engine's; these pin what both must do).

use super::head::parse_request;
use super::rewrite::write_request_head;
use crate::proxy::headers::ClientAddr;

fn forwarded(request: &str) -> String {
    let client = ClientAddr::new(std::net::SocketAddr::from(([192, 0, 2, 7], 40_000)));
    let mut fields = Vec::new();
    let head = parse_request(request.as_bytes(), &mut fields)
        .expect("a valid request")
        .expect("a whole head");
    let mut out = b"left alone|".to_vec();
    write_request_head(request.as_bytes(), &head, &fields, &client, &mut out).expect("a target");
    let out = String::from_utf8(out).expect("text");
    out.strip_prefix("left alone|")
        .expect("appended, not overwritten")
        .to_owned()
}

#[test]
fn an_ordinary_request_keeps_its_fields_and_gains_the_forwarding_ones() {
    assert_eq!(
        forwarded(
            "GET /p?q=1 HTTP/1.1\r\nHost: a\r\nUser-Agent: t\r\nConnection: keep-alive\r\n\r\n"
        ),
        "GET /p?q=1 HTTP/1.1\r\nUser-Agent: t\r\nx-forwarded-for: 192.0.2.7\r\n\
         x-forwarded-proto: http\r\nx-forwarded-host: a\r\nhost: a\r\n\r\n"
    );
}

#[test]
fn hop_by_hop_fields_and_the_fields_connection_names_stay_behind() {
    let out = forwarded(
        "POST / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Secret\r\nX-Secret: s\r\n\
         Keep-Alive: 5\r\nProxy-Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\
         Upgrade: h2c\r\nX-Kept: k\r\n\r\n",
    );
    assert_eq!(
        out,
        "POST / HTTP/1.1\r\nX-Kept: k\r\nx-forwarded-for: 192.0.2.7\r\n\
         x-forwarded-proto: http\r\nx-forwarded-host: a\r\nhost: a\r\n\
         transfer-encoding: chunked\r\n\r\n"
    );
}

#[test]
fn te_trailers_survives_for_grpc_and_other_codings_do_not() {
    let out = forwarded("POST /s/M HTTP/1.1\r\nHost: a\r\nTE: gzip, trailers\r\n\r\n");
    assert!(out.ends_with("host: a\r\nte: trailers\r\n\r\n"), "{out}");
    let out = forwarded("POST /s/M HTTP/1.1\r\nHost: a\r\nTE: gzip\r\n\r\n");
    assert!(!out.to_ascii_lowercase().contains("te: "), "{out}");
    // Named by `Connection`: gone even when it says trailers.
    let out = forwarded("GET / HTTP/1.1\r\nConnection: TE\r\nTE: trailers\r\n\r\n");
    assert!(!out.to_ascii_lowercase().contains("te: "), "{out}");
}

#[test]
fn the_forwarded_for_chain_grows_and_a_client_cannot_shorten_it() {
    let out = forwarded(
        "GET / HTTP/1.1\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\n\
         X-Forwarded-Proto: https\r\nX-Forwarded-Host: h\r\n\r\n",
    );
    assert_eq!(
        out,
        "GET / HTTP/1.1\r\nx-forwarded-for: 10.0.0.1, 192.0.2.7\r\n\
         X-Forwarded-Proto: https\r\nX-Forwarded-Host: h\r\n\r\n"
    );
    let out = forwarded(
        "GET / HTTP/1.1\r\nConnection: x-forwarded-for\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n",
    );
    assert!(out.contains("\r\nx-forwarded-for: 192.0.2.7\r\n"), "{out}");
    assert!(!out.contains("6.6.6.6"), "{out}");
}

#[test]
fn an_absolute_target_goes_in_origin_form_and_names_the_host() {
    assert_eq!(
        forwarded("GET http://b.example:8080/p?q#frag HTTP/1.1\r\n\r\n"),
        "GET /p?q HTTP/1.1\r\nx-forwarded-for: 192.0.2.7\r\nx-forwarded-proto: http\r\n\
         x-forwarded-host: b.example:8080\r\nhost: b.example:8080\r\n\r\n"
    );
    // A `Host` field wins over the target's authority, and is said once.
    let out = forwarded("GET http://b.example HTTP/1.1\r\nHost: c\r\nHost: d\r\n\r\n");
    assert!(out.starts_with("GET / HTTP/1.1\r\n"), "{out}");
    assert_eq!(out.matches("host: ").count(), 2, "{out}");
    assert!(out.contains("\r\nhost: c\r\n"), "{out}");
}

#[test]
fn a_fragment_is_never_sent() {
    assert!(forwarded("GET /a#b HTTP/1.1\r\n\r\n").starts_with("GET /a HTTP/1.1\r\n"));
}

#[test]
fn a_response_passes_on_its_fields_but_the_hop_by_hop_ones() {
    let response = "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
                    Keep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\nX-End: 2\r\n\r\n";
    let mut fields = Vec::new();
    super::head::parse_response(response.as_bytes(), &http::Method::GET, &mut fields)
        .expect("a valid response")
        .expect("a whole head");
    let mut out = Vec::new();
    super::rewrite::write_response_fields(response.as_bytes(), &fields, &mut out);
    assert_eq!(String::from_utf8(out).unwrap(), "X-End: 2\r\n");
}
