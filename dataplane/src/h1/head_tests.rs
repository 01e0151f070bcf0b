//! Request and response heads: framing, connection facts and every refusal, with its status.

use http::Method;

use super::head::{BodyLength, HeadError, MAX_HEAD_BYTES, parse_request, parse_response};

fn request(text: &str) -> Result<Option<super::head::RequestHead>, HeadError> {
    parse_request(text.as_bytes(), &mut Vec::new())
}

fn request_body(text: &str) -> BodyLength {
    match request(text) {
        Ok(Some(head)) => head.body,
        other => panic!("{text:?}: {other:?}"),
    }
}

fn refused(text: &str) -> u16 {
    match request(text) {
        Err(error) => error.status().unwrap_or(0),
        other => panic!("{text:?} was not refused: {other:?}"),
    }
}

#[test]
fn a_request_head_gives_its_parts_as_positions_in_the_buffer() {
    let text =
        b"POST /orders?id=7 HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello";
    let mut fields = Vec::new();
    let head = parse_request(text, &mut fields).unwrap().unwrap();
    assert_eq!(head.len, text.len() - 5);
    assert_eq!(head.method, Method::POST);
    assert_eq!(&text[head.target.clone()], b"/orders?id=7");
    assert!(head.http11 && head.keep_alive && !head.expect_continue && !head.upgrade);
    assert_eq!(head.body, BodyLength::Length(5));
    let names: Vec<&[u8]> = fields.iter().map(|f| &text[f.name.clone()]).collect();
    assert_eq!(names, [&b"Host"[..], b"Content-Length", b"X-A"]);
    assert_eq!(&text[fields[2].value.clone()], b"1");
}

#[test]
fn an_incomplete_head_waits_until_it_can_no_longer_fit() {
    assert_eq!(request("GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
    assert_eq!(request(""), Ok(None));
    let mut long = String::from("GET / HTTP/1.1\r\nX: ");
    long.push_str(&"a".repeat(MAX_HEAD_BYTES));
    assert_eq!(request(&long), Err(HeadError::TooLarge));
}

#[test]
fn request_framing_follows_rfc_9112() {
    assert_eq!(request_body("GET / HTTP/1.1\r\n\r\n"), BodyLength::Empty);
    assert_eq!(
        request_body("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
        BodyLength::Empty
    );
    assert_eq!(
        request_body("POST / HTTP/1.1\r\ncontent-length: 12\r\n\r\n"),
        BodyLength::Length(12)
    );
    assert_eq!(
        request_body("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"),
        BodyLength::Chunked
    );
    // Equal lengths repeated are one length, forwarded once.
    let text = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nX: y\r\nContent-Length: 3\r\n\r\n";
    let mut fields = Vec::new();
    let head = parse_request(text, &mut fields).unwrap().unwrap();
    assert_eq!(head.body, BodyLength::Length(3));
    assert_eq!(fields.len(), 2);
}

#[test]
fn a_transfer_coding_overrides_content_length_and_closes_the_connection() {
    for text in [
        "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: nonsense\r\n\r\n",
    ] {
        let mut fields = Vec::new();
        let head = parse_request(text.as_bytes(), &mut fields)
            .unwrap()
            .unwrap();
        assert_eq!(head.body, BodyLength::Chunked, "{text:?}");
        assert!(head.length_overridden && !head.keep_alive, "{text:?}");
        assert_eq!(fields.len(), 1, "no Content-Length is forwarded: {text:?}");
    }
}

#[test]
fn refusals_carry_hypers_statuses() {
    let cases = [
        (
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            400,
        ),
        ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 1 \r\n\r\n", 200),
        ("POST / HTTP/1.1\r\nContent-Length: 1,1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n", 400),
        (
            "POST / HTTP/1.1\r\nContent-Length: 18446744073709551614\r\n\r\n",
            431,
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
            400,
        ),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            400,
        ),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX : a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX\r\n\r\n", 400),
        ("G(T / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\n\r\n", 400),
        // HTTP/2 with prior knowledge: no HTTP/1 answer.
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0),
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n", 400),
        ("\r\n\rPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0),
        ("\rGET / HTTP/1.1\r\n\r\n", 400),
        ("GET /a b HTTP/1.1\r\n\r\n", 400),
        // Refused once the head is taken off the buffer: the preface just past it is HTTP/2.
        (
            "GET http://?.example/ HTTP/1.1\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            0,
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            0,
        ),
        // Refused by the tokenizer: answered, whatever follows.
        (
            "GET / HTTP/1.1\r\nX : a\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            400,
        ),
    ];
    for (text, status) in cases {
        let got = match request(text) {
            Ok(Some(_)) => 200,
            Ok(None) => 0,
            Err(error) => error.status().unwrap_or(0),
        };
        assert_eq!(got, status, "{text:?}");
    }
    // TLS bytes on a plain port.
    let hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    assert_eq!(
        parse_request(hello, &mut Vec::new()).map_err(HeadError::status),
        Err(Some(400))
    );
    let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
    assert_eq!(refused(&format!("GET / HTTP/1.1\r\n{many}\r\n")), 431);
    let target = "/".repeat(super::head::MAX_TARGET_BYTES + 1);
    assert_eq!(refused(&format!("GET {target} HTTP/1.1\r\n\r\n")), 414);
}

#[test]
fn connection_facts_are_read_as_hyper_reads_them() {
    let head = |text: &str| request(text).unwrap().unwrap();
    assert!(!head("GET / HTTP/1.0\r\n\r\n").keep_alive);
    assert!(head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    assert!(!head("GET / HTTP/1.1\r\nConnection: upgrade, close\r\n\r\n").keep_alive);
    // A later keep-alive never undoes a close.
    assert!(
        !head("GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n").keep_alive
    );
    assert!(head("POST / HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n").expect_continue);
    assert!(
        !head("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expect_continue,
        "an HTTP/1.0 client gets no interim answer"
    );
    assert!(head("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n").upgrade);
    assert!(!head("GET / HTTP/1.0\r\nUpgrade: websocket\r\n\r\n").upgrade);
    assert!(head("CONNECT a:443 HTTP/1.1\r\n\r\n").upgrade);
}

#[test]
fn response_framing_depends_on_the_status_and_the_request_method() {
    let body = |method: Method, text: &str| {
        parse_response(text.as_bytes(), &method, &mut Vec::new())
            .unwrap()
            .unwrap()
            .body
    };
    let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(body(Method::GET, chunked), BodyLength::Chunked);
    assert_eq!(body(Method::HEAD, chunked), BodyLength::Empty);
    assert_eq!(body(Method::CONNECT, chunked), BodyLength::Empty);
    for status in [
        "100 Continue",
        "101 Switching",
        "204 No Content",
        "304 Not Modified",
    ] {
        let text = format!("HTTP/1.1 {status}\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(body(Method::GET, &text), BodyLength::Empty, "{status}");
    }
    assert_eq!(
        body(Method::GET, "HTTP/1.1 200 OK\r\n\r\n"),
        BodyLength::UntilClose
    );
    assert_eq!(
        body(
            Method::GET,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"
        ),
        BodyLength::UntilClose
    );
    // Both: the coding decides.
    assert_eq!(
        body(
            Method::GET,
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
        ),
        BodyLength::Chunked
    );
    assert_eq!(
        body(
            Method::GET,
            "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\n"
        ),
        BodyLength::Length(3)
    );
    let refused =
        |text: &str| parse_response(text.as_bytes(), &Method::GET, &mut Vec::new()).is_err();
    assert!(refused("HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n"));
    assert!(refused("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"));
    assert!(refused(
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    ));
    assert!(refused("HTTP/1.1 099 Low\r\n\r\n"));
    assert!(refused("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n"));
    let keep = |text: &str| {
        parse_response(text.as_bytes(), &Method::GET, &mut Vec::new())
            .unwrap()
            .unwrap()
            .keep_alive
    };
    assert!(keep("HTTP/1.1 200 OK\r\n\r\n"));
    assert!(!keep("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"));
    assert!(!keep("HTTP/1.0 200 OK\r\n\r\n"));
}

#[test]
fn a_head_still_arriving_is_parsed_again_only_when_new_bytes_may_end_it() {
    use super::head::may_end_head;
    let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    // The end split anywhere across two reads is still seen (three bytes of overlap).
    for split in 1..head.len() {
        assert!(may_end_head(head, split), "split at {split}");
    }
    assert!(!may_end_head(b"GET / HTTP/1.1\r\nHost: a\r\n", 5));
    assert!(!may_end_head(b"GET / HTTP/1.1\r\nHost: a\r\nX: b", 20));
    assert!(may_end_head(b"GET / HTTP/1.1\nHost: a\n\n", 10), "bare LF");
    assert!(
        may_end_head(b"GET / HTTP/1.1\nHost: a\n\r\n", 10),
        "LF then CRLF"
    );
    // Bytes before the overlap are not looked at again.
    assert!(!may_end_head(b"\r\n\r\nGET / HTTP/1.1\r\nHost", 10));
}
