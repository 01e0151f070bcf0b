//! Hostile callers of the controller's roster port, speaking raw HTTP/2 (tonic's client will
//! not leave a message unfinished): a flood of `Watch` streams that carry no token and declare
//! a message of megabytes they never send, and a stream of garbage tokens. Each stream's answer
//! is counted by its `grpc-status`. For the end-to-end tests and `bench/flood.sh`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;

/// A stream refused or reset by the server before any answer.
pub const REFUSED: i32 = -1;
/// A stream with no answer in the time allowed.
pub const UNANSWERED: i32 = -2;

/// The path of the roster service's `Watch`.
pub const WATCH_PATH: &str = "/rollcall.v1.Roster/Watch";

/// How a flood went: answers by `grpc-status`; `REFUSED` (-1): the stream or connection was
/// refused or reset before an answer (the server's stream limit, a closing connection);
/// `UNANSWERED` (-2): no answer within the time allowed, the stream left hanging.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub by_status: BTreeMap<i32, usize>,
}

impl Tally {
    pub fn count(&self, status: i32) -> usize {
        self.by_status.get(&status).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.by_status.values().sum()
    }

    fn add(&mut self, other: &Tally) {
        for (status, n) in &other.by_status {
            *self.by_status.entry(*status).or_default() += n;
        }
    }
}

/// A gRPC length prefix declaring `len` bytes (uncompressed).
fn prefix(len: u32) -> Bytes {
    let mut p = vec![0u8];
    p.extend_from_slice(&len.to_be_bytes());
    Bytes::from(p)
}

/// The `grpc-status` of a response's headers (a trailers-only answer carries it there).
fn status_of(headers: &http::HeaderMap) -> i32 {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

/// The head of a gRPC `Watch` call to `addr`, with `token` as its bearer token.
fn watch_request(addr: SocketAddr, token: Option<&str>) -> Result<http::Request<()>, http::Error> {
    let mut request = http::Request::post(format!("http://{addr}{WATCH_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    request.body(())
}

/// The `grpc-status` a stream was answered with within `within`, or why there was none.
async fn answer(response: h2::client::ResponseFuture, within: Duration) -> i32 {
    match tokio::time::timeout(within, response).await {
        Ok(Ok(r)) => status_of(r.headers()),
        Ok(Err(_)) => REFUSED,
        Err(_) => UNANSWERED,
    }
}

/// Open `connections` plaintext HTTP/2 connections to `addr`, and on each `streams` Watch
/// streams with `token` (none when `None`), each sending a prefix that declares `declared`
/// bytes and 1 KiB of them, never finishing. Waits up to `within` for each answer, and keeps
/// every stream open until all are answered, so nothing is released early.
pub async fn flood(
    addr: SocketAddr,
    connections: usize,
    streams: usize,
    token: Option<&str>,
    declared: u32,
    within: Duration,
) -> Tally {
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let token = token.map(str::to_string);
        tasks.push(tokio::spawn(async move {
            one_connection(addr, streams, token.as_deref(), declared, within).await
        }));
    }
    let mut tally = Tally::default();
    for task in tasks {
        if let Ok(t) = task.await {
            tally.add(&t);
        }
    }
    tally
}

async fn one_connection(
    addr: SocketAddr,
    streams: usize,
    token: Option<&str>,
    declared: u32,
    within: Duration,
) -> Tally {
    let mut tally = Tally::default();
    let failed = |tally: &mut Tally, n: usize| *tally.by_status.entry(REFUSED).or_default() += n;
    let Ok(tcp) = TcpStream::connect(addr).await else {
        failed(&mut tally, streams);
        return tally;
    };
    let Ok((client, connection)) = h2::client::handshake(tcp).await else {
        failed(&mut tally, streams);
        return tally;
    };
    let driver = tokio::spawn(connection);
    // Held until every stream is answered: the flood never finishes a message.
    let mut open = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..streams {
        let mut client = match tokio::time::timeout(within, client.clone().ready()).await {
            Ok(Ok(c)) => c,
            Ok(Err(_)) => {
                failed(&mut tally, 1);
                continue;
            }
            Err(_) => {
                *tally.by_status.entry(UNANSWERED).or_default() += 1;
                continue;
            }
        };
        let Ok(request) = watch_request(addr, token) else {
            failed(&mut tally, 1);
            continue;
        };
        let Ok((response, mut body)) = client.send_request(request, false) else {
            failed(&mut tally, 1);
            continue;
        };
        let _ = body.send_data(prefix(declared), false);
        let _ = body.send_data(Bytes::from(vec![0x5a; 1024]), false);
        open.push(body);
        // Answered in order of sending: a stream answered only once its body arrived whole
        // would hold its slot, and the next `ready()` would wait, which the timeout counts.
        answers.push(tokio::spawn(answer(response, within)));
    }
    for answer in answers {
        let status = answer.await.unwrap_or(REFUSED);
        *tally.by_status.entry(status).or_default() += 1;
    }
    drop(open);
    driver.abort();
    tally
}

/// Send `count` Watch requests with distinct, well-formed but unsigned JWTs to `addr`, as fast
/// as the server answers, on as many connections as it takes (a server may close a connection
/// it throttles). Answers by `grpc-status`.
pub async fn garbage_tokens(addr: SocketAddr, count: usize, within: Duration) -> Tally {
    let mut tally = Tally::default();
    let mut sent = 0;
    while sent < count {
        let Ok(tcp) = TcpStream::connect(addr).await else {
            *tally.by_status.entry(REFUSED).or_default() += count - sent;
            break;
        };
        let Ok((client, connection)) = h2::client::handshake(tcp).await else {
            *tally.by_status.entry(REFUSED).or_default() += count - sent;
            break;
        };
        let driver = tokio::spawn(connection);
        let mut client = client;
        while sent < count {
            let Ok(Ok(ready)) = tokio::time::timeout(within, client.ready()).await else {
                break;
            };
            client = ready;
            let Ok(request) = watch_request(addr, Some(&forged_jwt(sent))) else {
                break;
            };
            let Ok((response, mut body)) = client.send_request(request, false) else {
                break;
            };
            sent += 1;
            let _ = body.send_data(prefix(0), true);
            let status = answer(response, within).await;
            *tally.by_status.entry(status).or_default() += 1;
        }
        driver.abort();
    }
    tally
}

/// A JWT-shaped token no API server signed: header, claims with an expiry, a bogus signature.
pub fn forged_jwt(n: usize) -> String {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let header = b64(r#"{"alg":"RS256","kid":"forged"}"#);
    let claims = b64(&format!(
        r#"{{"aud":["rollcall"],"exp":4102444800,"sub":"system:serviceaccount:shop:x{n}"}}"#
    ));
    format!("{header}.{claims}.{}", b64(&format!("not-a-signature-{n}")))
}

/// Resident set size of process `pid` in KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}
