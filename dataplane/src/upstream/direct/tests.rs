//! The sidecar's own endpoint client against hyper's: every request of a corpus (framing
//! fields a request path can hand over, bodies whole, streamed, with trailers, or none) is
//! written by both, and the endpoint must read the same bytes, byte for byte, head and body.
//! Then the client itself, on real sockets: answers framed every way, keep-alive and its
//! refusals, interim answers, an answer that arrives while the upload is still going, and an
//! endpoint that closes or breaks its answer.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Version};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::request_head::{plain_head, write_plain_head, write_request_head};
use super::*;
use crate::h1::write::BodyWriter;
use crate::upstream::{BoxError, OpenGuard, ProxyBody, Release, SendError};

/// A body of unknown length, as a chunked upload reaches the endpoint client.
struct Streamed(VecDeque<Frame<Bytes>>);

impl Body for Streamed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    None,
    Whole,
    Streamed,
    StreamedWithTrailers,
}

fn body(kind: Kind) -> ProxyBody {
    let never = |never| -> BoxError { match never {} };
    match kind {
        Kind::None => Empty::new().map_err(never).boxed_unsync(),
        Kind::Whole => Full::new(Bytes::from_static(b"hello"))
            .map_err(never)
            .boxed_unsync(),
        Kind::Streamed | Kind::StreamedWithTrailers => {
            let mut frames = VecDeque::from([
                Frame::data(Bytes::from_static(b"hel")),
                Frame::data(Bytes::new()),
                Frame::data(Bytes::from(vec![b'x'; 5000])),
            ]);
            if matches!(kind, Kind::StreamedWithTrailers) {
                let mut trailers = HeaderMap::new();
                trailers.insert("x-sum", HeaderValue::from_static("7"));
                trailers.insert("content-type", HeaderValue::from_static("text/plain"));
                trailers.insert("x-undeclared", HeaderValue::from_static("1"));
                frames.push_back(Frame::trailers(trailers));
            }
            Streamed(frames).boxed_unsync()
        }
    }
}

fn request(
    method: &Method,
    fields: &[(&str, &str)],
    kind: Kind,
    version: Version,
) -> Request<ProxyBody> {
    let mut request = Request::new(body(kind));
    *request.method_mut() = method.clone();
    *request.uri_mut() = "/path?q=1".parse().expect("uri");
    *request.version_mut() = version;
    for (name, value) in fields {
        request.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            HeaderValue::from_str(value).expect("value"),
        );
    }
    request
}

/// Every framing a request can arrive with, on every kind of body.
fn corpus() -> Vec<Request<ProxyBody>> {
    let fields: &[&[(&str, &str)]] = &[
        &[("host", "web")],
        &[("host", "web"), ("content-length", "5"), ("x-after", "1")],
        &[("content-length", "5, 5"), ("host", "web")],
        &[("content-length", "abc"), ("host", "web"), ("x-last", "z")],
        &[
            ("transfer-encoding", "chunked"),
            ("host", "web"),
            ("x-last", "z"),
        ],
        &[("transfer-encoding", "gzip"), ("host", "web")],
        &[
            ("transfer-encoding", "gzip"),
            ("transfer-encoding", "br"),
            ("x-last", "z"),
        ],
        &[
            ("content-length", "5"),
            ("transfer-encoding", "chunked"),
            ("x-last", "z"),
        ],
        &[
            ("host", "web"),
            ("trailer", "x-sum, content-type"),
            ("x-last", "z"),
        ],
        &[
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("x-last", "z"),
        ],
    ];
    let mut all = Vec::new();
    for method in [Method::GET, Method::POST, Method::HEAD, Method::PUT] {
        for fields in fields {
            for kind in [
                Kind::None,
                Kind::Whole,
                Kind::Streamed,
                Kind::StreamedWithTrailers,
            ] {
                for version in [Version::HTTP_11, Version::HTTP_10] {
                    all.push(request(&method, fields, kind, version));
                }
            }
        }
    }
    all
}

/// What our client writes for `request`: its head, then its body as framed. A request the
/// plain path takes must come out of it byte for byte as out of the full one.
async fn ours(request: Request<ProxyBody>) -> Vec<u8> {
    let (mut parts, mut body) = request.into_parts();
    let plain = (parts.version == Version::HTTP_11)
        .then(|| plain_head(&parts, &body))
        .flatten()
        .map(|plain| {
            let mut out = Vec::new();
            let framing = write_plain_head(&parts, &parts.uri, plain, &mut out);
            (out, framing)
        });
    let mut out = Vec::new();
    let framing = write_request_head(&mut parts, &body, &mut out);
    if let Some((plain_out, plain_framing)) = plain {
        assert_eq!(
            (String::from_utf8_lossy(&plain_out), &plain_framing),
            (String::from_utf8_lossy(&out), &framing),
            "the plain head differs from the full one"
        );
    }
    let trailers = match &framing {
        Framing::Chunked(names) => names.clone(),
        _ => None,
    };
    let mut writer = BodyWriter::new(&framing, trailers);
    let mut sink = Vec::new();
    let written = std::future::poll_fn(|cx| {
        writer.poll_write(Pin::new(&mut sink), Pin::new(&mut body), &mut out, cx)
    })
    .await;
    // A body that breaks its head's promise is cut where hyper's client cuts it.
    let _ = written;
    sink
}

/// What hyper's client writes for `request`, read as an endpoint reads it: `expected` bytes,
/// and then nothing more that was already sent.
async fn hypers(request: Request<ProxyBody>, expected: usize) -> Vec<u8> {
    let (client_side, mut endpoint) = tokio::io::duplex(1 << 20);
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(client_side))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    tokio::spawn(async move {
        let _ = sender.send_request(request).await;
    });
    let mut got = vec![0u8; expected];
    let read = tokio::time::timeout(Duration::from_secs(5), endpoint.read_exact(&mut got)).await;
    if !matches!(read, Ok(Ok(_))) {
        // Fewer bytes than ours: show what there was.
        let mut some = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_millis(200), endpoint.read_to_end(&mut some)).await;
        return some;
    }
    // hyper writes a request in one go from its connection task: anything more is in the pipe
    // by the time that task yields.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let mut more = [0u8; 64];
    if let Some(Ok(n)) = futures_util::FutureExt::now_or_never(endpoint.read(&mut more)) {
        got.extend_from_slice(&more[..n]);
    }
    got
}

#[tokio::test]
async fn an_endpoint_reads_the_same_bytes_from_our_client_as_from_hypers() {
    let mut differences = Vec::new();
    let count = corpus().len();
    for (ours_request, hypers_request) in corpus().into_iter().zip(corpus()) {
        let what = format!(
            "{} {:?} {:?} body={:?}",
            ours_request.method(),
            ours_request.version(),
            ours_request.headers(),
            ours_request.body().size_hint().exact()
        );
        let ours = ours(ours_request).await;
        let hypers = hypers(hypers_request, ours.len()).await;
        if ours != hypers {
            differences.push(format!(
                "{what}\n  ours:  {:?}\n  hyper: {:?}",
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&hypers)
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {count} requests differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// An endpoint on 127.0.0.1 that answers each request head it reads (its body, if any, is
/// read as far as it arrives) with the next of `answers`, then closes once they are spent
/// (or, with `linger`, keeps the connection open, silent).
async fn endpoint(answers: Vec<&'static [u8]>, linger: bool) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let mut seen = Vec::new();
        for answer in answers {
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let mut chunk = [0u8; 4096];
                match stream.read(&mut chunk).await {
                    Ok(n) if n > 0 => seen.extend_from_slice(&chunk[..n]),
                    _ => return,
                }
            }
            seen.clear();
            if stream.write_all(answer).await.is_err() {
                return;
            }
        }
        if linger {
            std::future::pending::<()>().await;
        }
    });
    addr
}

async fn connect(addr: std::net::SocketAddr, cut: &CancellationToken) -> DirectConn {
    let io = TcpStream::connect(addr).await.expect("connect");
    let open = OpenGuard::new(std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)));
    DirectConn::new(io, cut, open)
}

fn get() -> Request<ProxyBody> {
    request(
        &Method::GET,
        &[("host", "web")],
        Kind::None,
        Version::HTTP_11,
    )
}

/// A GET on a new connection to `addr`, as [`exchange`] reads it.
async fn get_from(
    addr: std::net::SocketAddr,
) -> Result<(u16, Vec<u8>, Option<DirectConn>), String> {
    exchange(connect(addr, &CancellationToken::new()).await, get(), false).await
}

/// Send, read the body whole; the answer's status, body, and the connection if it came back.
async fn exchange(
    conn: DirectConn,
    request: Request<ProxyBody>,
    reused: bool,
) -> Result<(u16, Vec<u8>, Option<DirectConn>), String> {
    let (response, release) = match send(conn, request, reused).await {
        Ok(sent) => sent,
        Err(SendError::NotSent { error, .. }) => return Err(format!("not sent: {error}")),
        Err(SendError::Sent { error, malformed }) => {
            return Err(format!("sent (malformed: {malformed}): {error}"));
        }
    };
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes()
        .to_vec();
    let Release::Direct(slot) = release else {
        return Err("not a direct release".into());
    };
    let conn = slot.lock().take();
    Ok((status, body, conn))
}

#[tokio::test]
async fn a_connection_carries_request_after_request_and_comes_back_after_each() {
    let addr = endpoint(
        vec![
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-t: 1\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ],
        true,
    )
    .await;
    let cut = CancellationToken::new();
    let mut conn = connect(addr, &cut).await;
    for (i, (status, body)) in [(200, &b"ok"[..]), (200, b"abc"), (204, b"")]
        .into_iter()
        .enumerate()
    {
        let (got_status, got_body, back) = exchange(conn, get(), i > 0).await.expect("answered");
        assert_eq!(
            (got_status, got_body.as_slice()),
            (status, body),
            "answer {i}"
        );
        conn = back.expect("the connection comes back after a whole answer");
    }
}

#[tokio::test]
async fn an_answer_that_ends_the_connection_does_not_give_it_back() {
    for answer in [
        &b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"[..],
        b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
        // Until the close: the body is what came before it.
        b"HTTP/1.1 200 OK\r\n\r\nok",
        // Something unasked after the answer.
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n",
    ] {
        let addr = endpoint(vec![answer], false).await;
        let (status, body, back) = get_from(addr).await.expect("answered");
        assert_eq!((status, body.as_slice()), (200, &b"ok"[..]));
        assert!(back.is_none(), "{:?}", String::from_utf8_lossy(answer));
    }
}

#[tokio::test]
async fn interim_answers_are_skipped() {
    let addr = endpoint(
        vec![b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n"],
        true,
    )
    .await;
    let (status, _, back) = get_from(addr).await.expect("answered");
    assert_eq!(status, 201);
    assert!(back.is_some());
}

#[tokio::test]
async fn a_broken_answer_is_the_endpoints_protocol_error_and_a_close_is_a_reset() {
    let cases: [(Vec<&'static [u8]>, bool, &str); 3] = [
        (
            vec![b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n"],
            true,
            "sent (malformed: true)",
        ),
        (vec![], false, "sent (malformed: false)"),
        // A body cut short by the close fails the body, not the head.
        (
            vec![b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nok"],
            false,
            "body:",
        ),
    ];
    for (answers, linger, expected) in cases {
        let error = get_from(endpoint(answers, linger).await).await.err();
        assert!(
            error.as_deref().is_some_and(|e| e.starts_with(expected)),
            "{expected}: {error:?}"
        );
    }
}

#[tokio::test]
async fn a_pooled_connection_the_endpoint_closed_gives_the_request_back_unsent() {
    let addr = endpoint(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"],
        false,
    )
    .await;
    let (_, _, back) = get_from(addr).await.expect("answered");
    let conn = back.expect("kept");
    // The endpoint closes once its one answer is spent: wait until the socket says so.
    let mut probe = [0u8; 1];
    let _ = conn.0.io.peek(&mut probe).await;
    assert!(!conn.is_usable());
    match send(conn, get(), true).await {
        Err(SendError::NotSent { body, .. }) => assert!(body.is_end_stream(), "the body is back"),
        Err(SendError::Sent { error, .. }) => panic!("sent: {error}"),
        Ok(_) => panic!("answered on a closed connection"),
    }
}

/// An upload that never ends: its first piece, then nothing.
struct Endless(bool);

impl Body for Endless {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Pending
        } else {
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"start")))))
        }
    }
}

#[tokio::test]
async fn an_answer_before_the_upload_ends_is_read_and_the_connection_closes_after_it() {
    let addr = endpoint(
        vec![b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 3\r\n\r\nbig"],
        true,
    )
    .await;
    let cut = CancellationToken::new();
    let mut upload = Request::new(Endless(false).boxed_unsync());
    *upload.method_mut() = Method::POST;
    *upload.uri_mut() = "/upload".parse().expect("uri");
    let (status, body, back) = exchange(connect(addr, &cut).await, upload, false)
        .await
        .expect("answered");
    assert_eq!((status, body.as_slice()), (413, &b"big"[..]));
    assert!(
        back.is_none(),
        "a connection with half an upload on it is not reused"
    );
}

#[tokio::test]
async fn closing_the_endpoints_connections_ends_an_answer_in_flight() {
    let addr = endpoint(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npart"],
        true,
    )
    .await;
    let cut = CancellationToken::new();
    let (response, _release) = match send(connect(addr, &cut).await, get(), false).await {
        Ok(sent) => sent,
        Err(_) => panic!("no answer"),
    };
    let mut body = response.into_body();
    let first = body.frame().await.expect("a frame").expect("data");
    assert_eq!(first.into_data().ok().as_deref(), Some(&b"part"[..]));
    cut.cancel();
    let next = body.frame().await;
    assert!(
        matches!(next, Some(Err(_))),
        "the body fails once the connection is cut"
    );
    assert!(body.is_end_stream());
}
