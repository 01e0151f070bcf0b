//! The two HTTP/1 engines side by side: one corpus of client bytes and endpoint answers (plain,
//! edge framing, refusals, pipelining, early closes, trailers, hand-offs to hyper) sent through
//! a sidecar on `--http1-engine hyper` and one on `fast`, each in front of its own recording
//! endpoint. The bytes each endpoint received and the bytes each client read must be the same
//! (the `Date` value aside), refusals included.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use rollcall_dataplane::h1::head::BodyLength;
use rollcall_dataplane::pool::{Http1Engine, Tuning};
use rollcall_dataplane::sidecar::RunOptions;
use support::raw::{answer_length, body_end};
use support::{Harness, config, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One exchange: what the client sends, what the endpoint answers to every request, and how
/// many answers the client reads (it then reads on to the close when the last one closes).
struct Case {
    name: &'static str,
    client: Vec<u8>,
    answer: &'static [u8],
    answers: usize,
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Answer: 1\r\n\r\nhello";
const GET: &str = "GET /a?b=c HTTP/1.1\r\nHost: example\r\nUser-Agent: t\r\n\r\n";

fn case(
    name: &'static str,
    client: impl Into<Vec<u8>>,
    answer: &'static [u8],
    answers: usize,
) -> Case {
    Case {
        name,
        client: client.into(),
        answer,
        answers,
    }
}

/// An answer made at run time, kept for the test's life.
fn leaked(answer: Vec<u8>) -> &'static [u8] {
    Box::leak(answer.into_boxed_slice())
}

fn corpus() -> Vec<Case> {
    let many_fields: String = (0..101).map(|i| format!("X-F{i}: v\r\n")).collect();
    let mut large = b"HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n".to_vec();
    large.extend(std::iter::repeat_n(b'x', 20_000));
    let mut large_chunks = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for size in [9000, 100, 5000] {
        large_chunks.extend(format!("{size:x}\r\n").bytes());
        large_chunks.extend(std::iter::repeat_n(b'y', size));
        large_chunks.extend(b"\r\n");
    }
    large_chunks.extend(b"0\r\n\r\n");
    let upload = format!(
        "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{}",
        "z".repeat(100_000)
    );
    vec![
        case("large answer", GET, leaked(large), 1),
        case("large chunked answer", GET, leaked(large_chunks), 1),
        case("large upload (streamed)", upload, OK, 1),
        case("get", GET, OK, 1),
        case(
            "chunked answer",
            GET,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n5\r\nhello\r\n6;e=1\r\n world\r\n0\r\n\r\n",
            1,
        ),
        case("own reason phrase", GET, b"HTTP/1.1 201 Made It\r\nContent-Length: 0\r\n\r\n", 1),
        case(
            "fields in order, repeated",
            GET,
            b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-B: 2\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\nConnection: keep-alive, x-b\r\n\r\nok",
            1,
        ),
        case(
            "post with a length",
            "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nContent-Type: text/plain\r\n\r\nhello world",
            OK,
            1,
        ),
        case(
            "chunked upload with extensions and trailers",
            "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nx-sum: 9\r\n\r\n",
            OK,
            1,
        ),
        case("pipelined", format!("{GET}{GET}GET /c HTTP/1.1\r\nHost: y\r\n\r\n"), OK, 3),
        case(
            "pipelined after a body",
            format!("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc{GET}"),
            OK,
            2,
        ),
        case("client closes", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", OK, 1),
        case("head", "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", 1),
        case("no content", GET, b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n", 1),
        case("not modified", GET, b"HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\n", 1),
        case("http/1.0 endpoint, body to the close", GET, b"HTTP/1.0 200 OK\r\nX-A: 1\r\n\r\nuntil the close", 1),
        case(
            "trailers to a client that takes them",
            "GET / HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-status\r\n\r\n2\r\nok\r\n0\r\nx-status: 0\r\nx-undeclared: 1\r\n\r\n",
            1,
        ),
        case(
            "trailers to a client that does not",
            GET,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-status\r\n\r\n2\r\nok\r\n0\r\nx-status: 0\r\n\r\n",
            1,
        ),
        case("repeated length in the answer", GET, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", 1),
        case(
            "length under a coding in the answer",
            GET,
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nb\r\nhello world\r\n0\r\n\r\n",
            1,
        ),
        case(
            "interim answers before the answer",
            GET,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            1,
        ),
        case("endpoint error", GET, b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", 1),
        case("hop-by-hop fields", "GET / HTTP/1.1\r\nHost: x\r\nConnection: x-private\r\nX-Private: 1\r\nKeep-Alive: 5\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n", OK, 1),
        case("absolute form", "GET http://example/z HTTP/1.1\r\nHost: example\r\n\r\n", OK, 1),
        case("http/1.0 client", "GET / HTTP/1.0\r\nHost: x\r\n\r\n", OK, 1),
        case(
            "http/1.0 client keeping the connection",
            "GET /1 HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /2 HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /3 HTTP/1.0\r\nHost: x\r\n\r\n",
            OK,
            3,
        ),
        case(
            "http/1.0 client, chunked answer",
            "GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            1,
        ),
        case(
            "http/1.0 client, http/1.0 endpoint",
            "GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            1,
        ),
        case("http/1.0 head", "HEAD / HTTP/1.0\r\nHost: x\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", 1),
        case(
            "http/1.0 post",
            "POST /p HTTP/1.0\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            OK,
            1,
        ),
        case(
            "expect 100-continue, body sent at once",
            "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
            OK,
            2,
        ),
        case(
            "expect 100-continue, chunked body",
            "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            OK,
            2,
        ),
        case(
            "expect 100-continue without a body",
            "GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
            OK,
            1,
        ),
        case(
            "expect 100-continue from an http/1.0 client",
            "POST /p HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
            OK,
            1,
        ),
        case("http/1.0 with a coding", "POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", OK, 1),
        case(
            "upgrade (hyper's)",
            "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\nConnection: close\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno",
            1,
        ),
        case("differing lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", OK, 1),
        case("invalid length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\na", OK, 1),
        case(
            "length and coding",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            OK,
            1,
        ),
        case("coding not chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", OK, 1),
        case("obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  2\r\n\r\n", OK, 1),
        case("bare LF line ends", "GET / HTTP/1.1\nHost: x\n\n", OK, 1),
        case("too many fields", format!("GET / HTTP/1.1\r\nHost: x\r\n{many_fields}\r\n"), OK, 1),
        case("bad chunk size", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", OK, 1),
        case("tls bytes", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03abcdefgh".to_vec(), OK, 1),
        case("garbage", "\x00\x01\x02 hello\r\n\r\n", OK, 1),
        case("head cut short", "GET / HTTP/1.1\r\nHost: x\r\n", OK, 0),
        // Answers 0: the client half-closes after sending, then reads to the end.
        case(
            "an HTTP/2 preface after a request",
            format!("{GET}PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            OK,
            0,
        ),
        case(
            "a refusal after an http/1.0 keep-alive request",
            "GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
            OK,
            2,
        ),
    ]
}

#[tokio::test]
async fn both_engines_send_the_endpoint_and_the_client_the_same_bytes() {
    same_on_both(corpus(), true).await;
}

/// The sidecar's own answers (an empty pool), made once a small body has been read: the same
/// interim answer first, the same answer, the connection kept or ended the same way.
#[tokio::test]
async fn both_engines_answer_the_same_without_an_endpoint() {
    let cases = vec![
        case("get", GET, OK, 1),
        case(
            "expect 100-continue",
            "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
            OK,
            2,
        ),
        case(
            "chunked upload",
            "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            OK,
            1,
        ),
    ];
    same_on_both(cases, false).await;
}

async fn same_on_both(cases: Vec<Case>, with_endpoint: bool) {
    let mut differences = Vec::new();
    for case in cases {
        let hyper = run(&case, Http1Engine::Hyper, with_endpoint).await;
        let fast = run(&case, Http1Engine::Fast, with_endpoint).await;
        if hyper != fast {
            differences.push(format!(
                "{}:\n  hyper: {:?}\n  fast:  {:?}",
                case.name, hyper, fast
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "the engines differ:\n{}",
        differences.join("\n")
    );
}

/// What the endpoint received (each request's bytes) and what the client read.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    endpoint: Vec<String>,
    client: String,
}

/// A sidecar on `engine`, whatever `ROLLCALL_HTTP1_ENGINE` says, with `tuning` otherwise.
async fn sidecar_on(engine: Http1Engine, yaml: &str, tuning: Tuning) -> Harness {
    let run = RunOptions {
        tuning: Tuning {
            http1_engine: engine,
            ..tuning
        },
        ..RunOptions::default()
    };
    Harness::start_exactly(yaml, run).await
}

async fn run(case: &Case, engine: Http1Engine, with_endpoint: bool) -> Seen {
    let endpoint = Recorder::spawn(case.answer).await;
    let endpoints = if with_endpoint {
        vec![endpoint.addr]
    } else {
        Vec::new()
    };
    let h = sidecar_on(engine, &config(&endpoints, "{}"), Tuning::default()).await;
    let listen = h.listen("web").await;
    let client = within(exchange(listen, &case.client, case.answers)).await;
    let endpoint = endpoint.requests.lock().clone();
    Seen {
        endpoint: endpoint
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect(),
        client: without_detail(String::from_utf8_lossy(&undated(&client)).into_owned()),
    }
}

/// The sidecar's own answer says why in words after its first clause (`reading the request
/// body failed: ...`), and each engine's endpoint client words the cause its own way (hyper's
/// "error from user's Body stream", the fast engine's framing error itself): that detail and
/// the length it makes are masked; the status, the reason field and the first clause are not.
fn without_detail(answer: String) -> String {
    if !answer.contains("\r\nx-rollcall-reason: ") || answer.matches("HTTP/1.").count() != 1 {
        return answer;
    }
    let Some((head, body)) = answer.split_once("\r\n\r\n") else {
        return answer;
    };
    let head: Vec<&str> = head
        .split("\r\n")
        .map(|line| {
            if line.starts_with("content-length: ") {
                "content-length: *"
            } else {
                line
            }
        })
        .collect();
    let clause = body.split_once(": ").map_or(body, |(first, _)| first);
    format!("{}\r\n\r\n{clause}: *", head.join("\r\n"))
}

/// Send `bytes`, read `answers` answers (to the close when the last says it closes, or when
/// none is expected).
async fn exchange(addr: SocketAddr, bytes: &[u8], answers: usize) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let _ = stream.write_all(bytes).await;
    if answers == 0 {
        let _ = stream.shutdown().await;
    }
    let mut read = Vec::new();
    let mut at = 0;
    let mut complete = 0;
    let mut closing = answers == 0;
    loop {
        while complete < answers {
            match answer_length(&read[at..], bytes) {
                Some((len, closes)) => {
                    at += len;
                    complete += 1;
                    closing |= closes;
                }
                None => break,
            }
        }
        if complete == answers && !closing {
            return read;
        }
        let mut chunk = [0u8; 8192];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return read,
            Ok(n) => read.extend_from_slice(&chunk[..n]),
        }
    }
}

/// `bytes` with every `date:` value blanked (each engine says its own now).
fn undated(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut at = 0;
    while let Some(found) = out[at..]
        .windows(8)
        .position(|w| w.eq_ignore_ascii_case(b"\r\ndate: "))
    {
        let start = at + found + 8;
        let end = (start + 29).min(out.len());
        out[start..end].fill(b'*');
        at = end;
    }
    out
}

/// An endpoint that records each request's bytes and answers every one with the same bytes,
/// closing after an answer framed by the close.
struct Recorder {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Recorder {
    async fn spawn(answer: &'static [u8]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let closes = answer.starts_with(b"HTTP/1.0")
            || answer
                .windows(17)
                .any(|w| w.eq_ignore_ascii_case(b"connection: close"));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let recorded = Arc::clone(&recorded);
                tokio::spawn(serve_recorded(stream, answer, closes, recorded));
            }
        });
        Self { addr, requests }
    }
}

async fn serve_recorded(
    mut stream: TcpStream,
    answer: &'static [u8],
    closes: bool,
    recorded: Arc<Mutex<Vec<Vec<u8>>>>,
) {
    let mut buf = Vec::new();
    loop {
        let Some(len) = one_request(&buf) else {
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        recorded.lock().push(buf.drain(..len).collect());
        if stream.write_all(answer).await.is_err() || closes {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

/// The length of the whole request at the start of `buf`.
fn one_request(buf: &[u8]) -> Option<usize> {
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut fields);
    let httparse::Status::Complete(head) = request.parse(buf).ok()? else {
        return None;
    };
    let field = |name: &str| {
        request
            .headers
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| String::from_utf8_lossy(f.value).into_owned())
    };
    let length = if field("transfer-encoding").is_some() {
        BodyLength::Chunked
    } else if let Some(n) = field("content-length") {
        BodyLength::Length(n.trim().parse().ok()?)
    } else {
        BodyLength::Empty
    };
    body_end(buf, head, length)
}

/// The fast engine counts the connections it hands to hyper's server, by reason, and hyper's
/// server then serves them: HTTP/2 with prior knowledge, and an upgrade.
#[tokio::test]
async fn the_fast_engine_counts_what_it_hands_to_hyper() {
    let endpoint = Recorder::spawn(OK).await;
    let h = sidecar_on(
        Http1Engine::Fast,
        &config(&[endpoint.addr], "{}"),
        Tuning::default(),
    )
    .await;
    let listen = h.listen("web").await;

    let mut h2 = rollcall_testkit::client::Conn::h2c(listen)
        .await
        .expect("h2c");
    let reply = h2.get("/").await.expect("an h2c answer");
    assert_eq!(reply.status, http::StatusCode::OK);
    h.wait_for_metric(r#"rollcall_http1_handoffs_total{pool="web",reason="http2"} 1"#)
        .await;

    let upgrade = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\nConnection: close\r\n\r\n";
    let answer = within(exchange(listen, upgrade.as_bytes(), 1)).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200 OK"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    h.wait_for_metric(r#"rollcall_http1_handoffs_total{pool="web",reason="upgrade"} 1"#)
        .await;
    // An ordinary request is the fast engine's own.
    within(exchange(listen, GET.as_bytes(), 1)).await;
    let metrics = h.metrics();
    for line in [
        r#"rollcall_http1_handoffs_total{pool="web",reason="http2"} 1"#,
        r#"rollcall_http1_handoffs_total{pool="web",reason="upgrade"} 1"#,
    ] {
        assert!(
            metrics.contains(line),
            "{line} after a plain request:\n{metrics}"
        );
    }
}

/// An answer that never ends (an endless stream) is cut when the grace period of a shutdown is
/// over, on both engines: the sidecar's shutdown ends, and so does the client's read.
#[tokio::test]
async fn shutdown_cuts_an_endless_answer_after_the_grace_period() {
    for engine in [Http1Engine::Hyper, Http1Engine::Fast] {
        let endpoint = endless_endpoint().await;
        let tuning = Tuning {
            response_body_idle: std::time::Duration::ZERO,
            ..Tuning::default()
        };
        let h = sidecar_on(
            engine,
            &config(&[endpoint], "{healthCheck: {type: None}}"),
            tuning,
        )
        .await;
        let mut client = TcpStream::connect(h.listen("web").await)
            .await
            .expect("connect");
        client.write_all(GET.as_bytes()).await.expect("send");
        let mut seen = Vec::new();
        while !seen.windows(5).any(|w| w == b"1\r\nx\r") {
            let mut chunk = [0u8; 1024];
            let n = within(client.read(&mut chunk)).await.expect("read");
            assert!(n > 0, "{engine:?}: closed before the stream began");
            seen.extend_from_slice(&chunk[..n]);
        }
        let runtime = Arc::clone(&h.sidecar.runtime);
        within(runtime.shutdown_within(std::time::Duration::from_millis(300))).await;
        let mut rest = Vec::new();
        let _ = within(client.read_to_end(&mut rest)).await;
    }
}

/// An endpoint whose every answer is an endless chunked stream, a chunk every 20 ms.
async fn endless_endpoint() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while one_request(&buf).is_none() {
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                if stream.write_all(head).await.is_err() {
                    return;
                }
                while stream.write_all(b"1\r\nx\r\n").await.is_ok() {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            });
        }
    });
    addr
}

/// Two pipelined requests, then the client's side ends: both engines answer the first (its
/// answer was due before the end was seen) and end the second, which was in flight when it was
/// (whether the endpoint saw it is a race, so only the client's bytes are compared).
#[tokio::test]
async fn pipelined_requests_then_the_clients_end_read_the_same_on_both_engines() {
    let case = case("pipelined, then the end", format!("{GET}{GET}"), OK, 0);
    let hyper = run(&case, Http1Engine::Hyper, true).await;
    let fast = run(&case, Http1Engine::Fast, true).await;
    assert_eq!(hyper.client, fast.client);
    assert_eq!(
        fast.client.matches("HTTP/1.1 200 OK").count(),
        1,
        "{}",
        fast.client
    );
}
