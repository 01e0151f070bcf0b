//! The chunked encoder against hyper's: the same response head, data pieces and trailers,
//! written by hyper's HTTP/1 server and by `super::encode`, must give the same body bytes.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::{Body, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::encode::{CHUNK_END, accepts_trailers, chunk_head, write_last_chunk};
use super::head::{parse_request, parse_response};

/// A body of the frames it was given.
struct Frames(VecDeque<Frame<Bytes>>);

impl Body for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

fn fields_of(section: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    for line in section.split("\r\n").filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').expect("name: value");
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a field name"),
            HeaderValue::from_str(value.trim()).expect("a field value"),
        );
    }
    map
}

/// The request the client sends, with its `TE` field (empty: none).
fn request(te: &str) -> String {
    let te = if te.is_empty() {
        String::new()
    } else {
        format!("TE: {te}\r\n")
    };
    format!("GET / HTTP/1.1\r\nHost: a\r\n{te}Connection: close\r\n\r\n")
}

/// The body hyper's server writes for a chunked response with `fields`, `pieces` of data and
/// then `trailers` (each `name: value\r\n`), to a client that sent `te`.
fn hypers(te: &str, fields: &str, pieces: &[&str], trailers: &str) -> Vec<u8> {
    let request = request(te);
    let mut frames: VecDeque<Frame<Bytes>> = pieces
        .iter()
        .map(|p| Frame::data(Bytes::copy_from_slice(p.as_bytes())))
        .collect();
    if !trailers.is_empty() {
        frames.push_back(Frame::trailers(fields_of(trailers)));
    }
    let headers = fields_of(fields);
    let written = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async move {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let body = parking_lot::Mutex::new(Some((headers, Frames(frames))));
            let service = hyper::service::service_fn(move |_req| {
                let (headers, frames) = body.lock().take().expect("one request");
                async move {
                    let mut response = http::Response::new(frames);
                    *response.headers_mut() = headers;
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let serve = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(server), service);
            let talk = async move {
                let _ = client.write_all(request.as_bytes()).await;
                let mut out = Vec::new();
                let _ = client.read_to_end(&mut out).await;
                out
            };
            let (_, out) = tokio::join!(serve, talk);
            out
        });
    let at = written
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    written[at + 4..].to_vec()
}

/// The body `super::encode` writes for the same.
fn ours(te: &str, fields: &str, pieces: &[&str], trailers: &str) -> Vec<u8> {
    let request = request(te);
    let mut request_fields = Vec::new();
    parse_request(request.as_bytes(), &mut request_fields)
        .expect("a valid request")
        .expect("a whole head");
    let to_client_without_te = !accepts_trailers(request.as_bytes(), &request_fields);
    let head = format!("HTTP/1.1 200 OK\r\n{fields}\r\n");
    let mut parsed = Vec::new();
    parse_response(head.as_bytes(), &http::Method::GET, &mut parsed)
        .expect("a valid head")
        .expect("a whole head");
    let mut out = Vec::new();
    for piece in pieces {
        chunk_head(piece.len(), &mut out);
        out.extend_from_slice(piece.as_bytes());
        out.extend_from_slice(CHUNK_END);
    }
    write_last_chunk(
        head.as_bytes(),
        &parsed,
        trailers.as_bytes(),
        to_client_without_te,
        &mut out,
    );
    out
}

#[test]
fn chunks_and_declared_trailers_are_written_as_hyper_writes_them() {
    let big = "x".repeat(0x1abc);
    let cases: &[(&str, &str, &[&str], &str)] = &[
        ("", "", &["hello"], ""),
        ("", "", &["a", "bc", big.as_str()], ""),
        ("", "", &[], ""),
        // Undeclared trailers are dropped.
        ("trailers", "", &["a"], "x-checksum: 1\r\n"),
        (
            "trailers",
            "Trailer: x-checksum\r\n",
            &["a"],
            "x-checksum: 1\r\n",
        ),
        // Declared, but the client did not accept trailers.
        ("", "Trailer: x-checksum\r\n", &["a"], "x-checksum: 1\r\n"),
        (
            "gzip",
            "Trailer: x-checksum\r\n",
            &["a"],
            "x-checksum: 1\r\n",
        ),
        (
            "gzip, Trailers",
            "Trailer: x-checksum\r\n",
            &["a"],
            "x-checksum: 1\r\n",
        ),
        (
            "trailers",
            "Trailer: X-Checksum, x-other\r\n",
            &["a"],
            "x-checksum: 1\r\nx-undeclared: 2\r\nx-other: 3\r\n",
        ),
        (
            "trailers",
            "Trailer: x-a\r\nTrailer: x-b\r\n",
            &["a"],
            "x-b: 2\r\n",
        ),
        // Declared, but fields that may not be trailers stay behind.
        (
            "trailers",
            "Trailer: content-length, set-cookie, x-ok, host\r\n",
            &["a"],
            "content-length: 1\r\nset-cookie: a=b\r\nx-ok: 1\r\nhost: h\r\n",
        ),
        (
            "trailers",
            "Trailer: x-a\r\n",
            &["a"],
            "x-a: 1\r\nx-a: 2\r\n",
        ),
        ("trailers", "Trailer: , x-a ,\r\n", &[], "x-a: 1\r\n"),
    ];
    let mut with_trailers = 0;
    for (te, fields, pieces, trailers) in cases {
        let ours = ours(te, fields, pieces, trailers);
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&hypers(te, fields, pieces, trailers)),
            "{te:?} {fields:?} {pieces:?} {trailers:?}"
        );
        with_trailers += usize::from(!ours.ends_with(b"0\r\n\r\n"));
    }
    // Some cases do send trailers: the comparison is not only of empty endings.
    assert!(with_trailers >= 5, "{with_trailers}");
}

#[test]
fn a_chunk_head_is_its_length_in_upper_case_hex() {
    for (len, head) in [
        (1, "1\r\n"),
        (0xabc, "ABC\r\n"),
        (usize::MAX, "FFFFFFFFFFFFFFFF\r\n"),
    ] {
        let mut out = Vec::new();
        chunk_head(len, &mut out);
        assert_eq!(out, head.as_bytes());
    }
}
