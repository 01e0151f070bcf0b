//! The fast codec against hyper's HTTP/1 on one corpus: the requests a server reads from a
//! client's bytes, the response a client reads from an endpoint's, and every refusal, must be
//! the same for both engines (`super::fuzzing` runs each).

use super::fuzzing::{BODY_REFUSED, hyper_requests, hyper_response, read_requests, read_response};
use http::Method;

/// Client bytes: ordinary requests, edge framing, pipelining, every refusal.
const REQUESTS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /p?q=1 HTTP/1.1\r\nHost: a\r\nX: 1\r\nx: 2\r\nY: 3\r\n\r\n",
    b"GET http://a.example/p HTTP/1.1\r\nHost: a\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    b"PURGE /x HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhel",
    b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    b"POST / HTTP/1.1\r\nContent-Length: 3 \r\n\r\nabc",
    b"POST / HTTP/1.1\r\nContent-Length: 3,3\r\n\r\nabc",
    b"POST / HTTP/1.1\r\nContent-Length: 0x3\r\n\r\nabc",
    b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551614\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /2 HTTP/1.1\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;a\nb\r\nx\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX0\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
    b"GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\nConnection: close\r\n\r\nGET /3 HTTP/1.1\r\n\r\n",
    b"GET /1 HTTP/1.0\r\n\r\nGET /2 HTTP/1.0\r\n\r\n",
    b"GET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /2 HTTP/1.0\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
    b"GET / HTTP/1.1\r\nX : a\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
    b"GET / HTTP/1.1\nHost: a\n\n",
    b"GET / HTTP/1.1\r\nHost: a\n\r\n",
    b"GET / HTTP/1.1\r\nX: \x80\xff\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: \x01\r\n\r\n",
    b"G(T / HTTP/1.1\r\n\r\n",
    b"GET /a b HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.2\r\n\r\n",
    b"GET / HTTP/2.0\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    // Found by fuzzing: hyper skips leading CR and LF bytes before it looks for the preface.
    b"\rPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"\r\n\n\rPRI * HTTP/2.0\r\n\r\nSM\r\n\r\nGET",
    b"\rGET / HTTP/1.1\r\n\r\n",
    // Found by fuzzing: what is refused once the head is off the buffer (the target's form, the
    // framing fields) is followed by the preface there, and hyper answers nothing; what its
    // tokenizer refuses is answered 400 whatever follows.
    b"GET http://?.example/p HTTP/1.1\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"GET / HTTP/1.1\r\nX : a\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    b"garbage\r\n\r\n",
    b"\r\nGET / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\n",
    b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    b"",
    // The head sent on: hop-by-hop fields, the fields `Connection` names, forwarding fields.
    b"GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Custom\r\nX-Custom: 1\r\nKeep-Alive: 5\r\n\r\n",
    b"GET / HTTP/1.1\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nX: 1\r\n\r\n",
    b"GET / HTTP/1.1\r\nConnection: keep-alive\r\nConnection: x-a\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
    b"GET / HTTP/1.1\r\nConnection: keep-alive, TE\r\nTE: trailers\r\n\r\n",
    b"GET / HTTP/1.1\r\nTE: deflate, Trailers\r\n\r\n",
    b"GET / HTTP/1.1\r\nTE: gzip\r\nTE: trailers\r\n\r\n",
    b"GET / HTTP/1.1\r\nTE: trailers;q=1\r\n\r\n",
    b"GET / HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\n\r\n",
    b"GET / HTTP/1.1\r\nX-Forwarded-For:\r\nX-Forwarded-For: 2.2.2.2\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: b\r\n\r\n",
    b"GET / HTTP/1.1\r\nConnection: host, x-forwarded-for,x-forwarded-proto\r\nHost: a\r\nX-Forwarded-For: 9.9.9.9\r\nX-Forwarded-Proto: https\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"GET http://b.example:8080/p?q=1 HTTP/1.1\r\n\r\n",
    b"GET http://b.example HTTP/1.1\r\nHost: c\r\n\r\n",
    b"GET / HTTP/1.1\r\nProxy-Connection: keep-alive\r\nUpgrade: h2c\r\n\r\n",
    b"GET / HTTP/1.1\r\nConnection: \x80x-a\r\nX-A: 1\r\n\r\n",
    b"GET / HTTP/1.1\r\nConnection: ,\t x-a\t,, keep-alive\r\nX-A: 1\r\nKeep-Alive: 1\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: x-t\r\n\r\n0\r\n\r\n",
    b"GET /g HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"PUT /p HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
    b"DELETE /d HTTP/1.1\r\nHost: a\r\n\r\n",
];

/// Endpoint bytes: the method that was sent, then what came back.
const RESPONSES: &[(&str, &str)] = &[
    ("GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
    ("GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel"),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\nhello",
    ),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello",
    ),
    ("GET", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nhello"),
    ("GET", "HTTP/1.1 200 OK\r\n\r\nuntil the close"),
    ("GET", "HTTP/1.0 200 OK\r\n\r\nuntil the close"),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
    ),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    ),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw bytes",
    ),
    (
        "GET",
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    ),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nq\r\n",
    ),
    (
        "GET",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ),
    (
        "GET",
        "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    ),
    (
        "GET",
        "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    ),
    ("GET", "HTTP/1.1 304 Not Modified\r\n\r\n"),
    ("HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"),
    ("CONNECT", "HTTP/1.1 200 OK\r\n\r\n"),
    ("GET", "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n"),
    ("GET", "HTTP/1.1 099 Low\r\n\r\n"),
    ("GET", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"),
    ("GET", "HTTP/1.1 200 OK\r\n"),
    ("GET", "garbage"),
    ("GET", ""),
    // The fields passed on to the client.
    (
        "GET",
        "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-End: 2\r\nContent-Length: 0\r\n\r\n",
    ),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nConnection: close\r\nProxy-Connection: close\r\nUpgrade: h2\r\nTE: trailers\r\nContent-Length: 0\r\n\r\n",
    ),
    (
        "GET",
        "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: te\r\nTE: trailers\r\nTrailer: x-t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n\r\n",
    ),
];

#[test]
fn both_engines_read_the_same_requests_and_refuse_the_same_ones() {
    let mut refusals = 0;
    for text in REQUESTS {
        let ours = read_requests(text);
        let hypers = hyper_requests(text);
        assert_eq!(ours, hypers, "{:?}", String::from_utf8_lossy(text));
        refusals += usize::from(ours.refused.is_some());
    }
    // The corpus is not all accepted: the refusals are compared too.
    assert!(refusals >= 20, "{refusals} refusals");
}

#[test]
fn both_engines_read_the_same_responses_and_refuse_the_same_ones() {
    let mut refusals = 0;
    for (method, text) in RESPONSES {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let ours = read_response(&method, text.as_bytes());
        let hypers = hyper_response(&method, text.as_bytes());
        assert_eq!(ours, hypers, "{method} {text:?}");
        refusals += usize::from(ours.refused.is_some());
    }
    assert!(refusals >= 8, "{refusals} refusals");
}

#[test]
fn a_smuggling_attempt_is_one_request_with_its_chunked_body_on_both_engines() {
    let text = REQUESTS[15];
    let reading = read_requests(text);
    // The length is overridden and the connection closes: the trailing request is never read.
    assert_eq!(reading.messages.len(), 1, "{reading:?}");
    assert_eq!(reading.messages[0].body, b"x");
    assert!(
        reading.messages[0]
            .fields
            .iter()
            .all(|(n, _)| n != "content-length")
    );
    assert_eq!(reading.refused, None);
    assert_ne!(BODY_REFUSED, 400);
}

#[test]
fn both_engines_send_the_endpoint_the_same_head() {
    let mut compared = 0;
    for text in REQUESTS {
        let whole = !read_requests(text).messages.is_empty();
        if whole && super::fuzzing::sent::ours(text).is_some() {
            super::fuzzing::sent::compare(text);
            compared += 1;
        }
    }
    assert!(compared >= 40, "{compared} requests compared");
}
