//! The response head a client gets, from both engines: the hyper engine (hyper's client reads
//! the endpoint's bytes, the hop-by-hop fields go, hyper's server writes the answer) against
//! `super::respond`, on one corpus of endpoint answers, request methods and closing
//! connections. Status line and fields must be the same (field order aside, as HTTP allows),
//! `Date` aside where the endpoint sent none (each engine says its own now).

use http::Method;

use super::fuzzing::answer::{fast_engines, hypers, ours, seen};
use super::respond::Outgoing;

#[test]
fn both_engines_write_the_same_head_to_the_client() {
    let get = Method::GET;
    let head = Method::HEAD;
    let post = Method::POST;
    let cases: &[(&Method, bool, &str, Outgoing)] = &[
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: 1\r\n\r\nhello",
            Outgoing::Length(5),
        ),
        (
            &get,
            true,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: 1\r\n\r\nhello",
            Outgoing::Length(5),
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nDate: Sat, 05 Dec 2026 10:00:00 GMT\r\nContent-Length: 0\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: 1\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            Outgoing::Length(5),
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nTrailer: x-a\r\nX: 1\r\nTrailer: x-b\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nx-a: 1\r\n\r\n",
            Outgoing::Chunked,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nTrailer: x-a\r\nContent-Length: 1\r\n\r\na",
            Outgoing::Length(1),
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\n\r\nuntil the close",
            Outgoing::Chunked,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw",
            Outgoing::Chunked,
        ),
        (
            &get,
            false,
            "HTTP/1.0 200 OK\r\nTrailer: x-a\r\n\r\nuntil the close",
            Outgoing::UntilClose,
        ),
        (
            &get,
            false,
            "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            Outgoing::Length(2),
        ),
        (
            &head,
            false,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTrailer: x\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &head,
            false,
            "HTTP/1.1 200 OK\r\nX: 1\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &head,
            false,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\nTrailer: x\r\n\r\n",
            Outgoing::Empty,
        ),
        // Found by fuzzing: a length that a transfer coding overrides is not passed on (the
        // hyper engine passed it, and so cut the body to it, or dropped the connection when it
        // was not a number).
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            Outgoing::Chunked,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\nhello, and more",
            Outgoing::Chunked,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\nTransfer-Encoding: gzip\r\n\r\nraw",
            Outgoing::Chunked,
        ),
        (
            &head,
            false,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            Outgoing::Empty,
        ),
        // Found by the fuzz corpus: the answer to HEAD keeps its length whatever the status.
        (
            &head,
            false,
            "HTTP/1.1 204 OK\r\nContent-Length: 5\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &head,
            false,
            "HTTP/1.1 304 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 9\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 Fine\r\nContent-Length: 0\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 599 Odd\r\nContent-Length: 0\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            true,
            "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nProxy-Connection: x\r\nContent-Length: 0\r\n\r\n",
            Outgoing::Empty,
        ),
        (
            &post,
            false,
            "HTTP/1.1 201 Created\r\nLocation: /x\r\nContent-Length: 2\r\n\r\nok",
            Outgoing::Length(2),
        ),
        // Lines not written as `Name: value` (no space, spaces and a tab around the value,
        // an empty value, a bare LF ending): each field is rewritten, not copied as it came.
        (
            &get,
            false,
            "HTTP/1.1 200 OK\r\nX-Tight:1\r\nX-Loose:  2 \t \r\nX-Tab:\t3\r\nX-Empty:\r\nX-Lf: 4\nServer: S\r\nContent-Length: 2\r\n\r\nok",
            Outgoing::Length(2),
        ),
        (
            &get,
            false,
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            Outgoing::Length(2),
        ),
    ];
    for (method, closing, answer, outgoing) in cases {
        let dated = answer.to_ascii_lowercase().contains("\r\ndate:");
        let (head, how) = ours(method, *closing, answer.as_bytes());
        let hypers = hypers(method, *closing, answer.as_bytes()).expect("hyper answers");
        assert_eq!(
            seen(&head, dated),
            seen(&hypers, dated),
            "{method} closing={closing} {answer:?}"
        );
        assert_eq!(how, *outgoing, "{method} {answer:?}");
        // The codec's head is what the fast engine writes for an answer kept raw
        // (`upstream::RawAnswer`): byte for byte too.
        assert_eq!(
            undated(&head, dated),
            undated(&hypers, dated),
            "codec, byte for byte: {method} closing={closing} {answer:?}"
        );
        // The fast engine's own writer (typed, `proxy::fast::response_head`), byte for byte
        // once the date is set aside: it writes what hyper's server writes, in its order.
        let fast =
            fast_engines(method, *closing, answer.as_bytes()).expect("the fast engine answers");
        assert_eq!(
            undated(&fast, dated),
            undated(&hypers, dated),
            "fast engine: {method} closing={closing} {answer:?}"
        );
    }
}

/// A head as bytes, its `date` value blanked unless the endpoint sent it.
fn undated(head: &[u8], endpoint_dated: bool) -> String {
    let text = String::from_utf8_lossy(head).into_owned();
    if endpoint_dated {
        return text;
    }
    text.lines()
        .map(|line| {
            if line.starts_with("date: ") {
                "date: *"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
