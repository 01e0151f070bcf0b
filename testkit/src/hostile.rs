//! Hostile callers of the controller's roster port, speaking raw HTTP/2 over plaintext or TLS
//! (tonic's client will not leave a message unfinished): a flood of `Watch` streams that carry
//! no token and declare a message of megabytes they never send, a burst of garbage tokens sent
//! at once over many connections, and connections that never say anything. Each stream's
//! answer is counted by its `grpc-status`. For the end-to-end tests and `bench/flood.sh`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How a hostile caller reaches the roster port.
#[derive(Clone)]
pub enum Dial {
    /// Plaintext HTTP/2 (h2c).
    Plain,
    /// TLS (ALPN h2), trusting one CA and checking the certificate for one name: the caller
    /// completes the handshake, as anyone who can reach the port can.
    Tls {
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    },
}

/// A connection of either kind.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Dial {
    /// TLS trusting the PEM certificates in `ca_pem`, expecting a certificate for `name`.
    pub fn tls(ca_pem: &[u8], name: &str) -> anyhow::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca_pem) {
            let cert: CertificateDer<'static> = cert?;
            roots.add(cert)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self::Tls {
            config: Arc::new(config),
            name: ServerName::try_from(name.to_string())?,
        })
    }

    /// A connection to `addr`, handshake done.
    pub async fn connect(&self, addr: SocketAddr) -> std::io::Result<Box<dyn Io>> {
        let tcp = TcpStream::connect(addr).await?;
        match self {
            Self::Plain => Ok(Box::new(tcp)),
            Self::Tls { config, name } => {
                let tls = TlsConnector::from(config.clone())
                    .connect(name.clone(), tcp)
                    .await?;
                Ok(Box::new(tls))
            }
        }
    }

    /// The URL scheme, for request heads.
    fn scheme(&self) -> &'static str {
        match self {
            Self::Plain => "http",
            Self::Tls { .. } => "https",
        }
    }
}

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
fn watch_request(
    addr: SocketAddr,
    dial: &Dial,
    token: Option<&str>,
) -> Result<http::Request<()>, http::Error> {
    let scheme = dial.scheme();
    let mut request = http::Request::post(format!("{scheme}://{addr}{WATCH_PATH}"))
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

/// Open `connections` HTTP/2 connections to `addr` (as `dial` says), and on each `streams`
/// Watch streams with `token` (none when `None`), each sending a prefix that declares
/// `declared` bytes and 1 KiB of them, never finishing. Waits up to `within` for each answer,
/// and keeps every stream open until all are answered, so nothing is released early.
pub async fn flood(
    addr: SocketAddr,
    dial: &Dial,
    connections: usize,
    streams: usize,
    token: Option<&str>,
    declared: u32,
    within: Duration,
) -> Tally {
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let token = token.map(str::to_string);
        let dial = dial.clone();
        tasks.push(tokio::spawn(async move {
            one_connection(addr, &dial, streams, token.as_deref(), declared, within).await
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
    dial: &Dial,
    streams: usize,
    token: Option<&str>,
    declared: u32,
    within: Duration,
) -> Tally {
    let mut tally = Tally::default();
    let failed = |tally: &mut Tally, n: usize| *tally.by_status.entry(REFUSED).or_default() += n;
    let Ok(io) = dial.connect(addr).await else {
        failed(&mut tally, streams);
        return tally;
    };
    let Ok((client, connection)) = h2::client::handshake(io).await else {
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
        let Ok(request) = watch_request(addr, dial, token) else {
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

/// Send `count` Watch requests with distinct, well-formed but unsigned JWTs to `addr`, all at
/// once: spread over `connections` connections opened together, each sending its share
/// without waiting for answers (as many streams at a time as the server allows), and opening
/// a new connection when the server closes one. Answers by `grpc-status`.
pub async fn garbage_tokens(
    addr: SocketAddr,
    dial: &Dial,
    count: usize,
    connections: usize,
    within: Duration,
) -> Tally {
    let share = count.div_ceil(connections.max(1));
    let mut tasks = Vec::new();
    for first in (0..count).step_by(share.max(1)) {
        let (dial, end) = (dial.clone(), (first + share).min(count));
        tasks.push(tokio::spawn(async move {
            garbage_share(addr, &dial, first..end, within).await
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

/// Tokens `numbers` of a burst, on one connection after another.
async fn garbage_share(
    addr: SocketAddr,
    dial: &Dial,
    numbers: std::ops::Range<usize>,
    within: Duration,
) -> Tally {
    let mut tally = Tally::default();
    let mut next = numbers.start;
    while next < numbers.end {
        let connected = match dial.connect(addr).await {
            Ok(io) => h2::client::handshake(io).await.ok(),
            Err(_) => None,
        };
        let Some((mut client, connection)) = connected else {
            *tally.by_status.entry(REFUSED).or_default() += numbers.end - next;
            break;
        };
        let driver = tokio::spawn(connection);
        let mut answers = Vec::new();
        while next < numbers.end {
            let Ok(Ok(ready)) = tokio::time::timeout(within, client.ready()).await else {
                break;
            };
            client = ready;
            let Ok(request) = watch_request(addr, dial, Some(&forged_jwt(next))) else {
                break;
            };
            let Ok((response, mut body)) = client.send_request(request, false) else {
                break;
            };
            next += 1;
            let _ = body.send_data(prefix(0), true);
            answers.push(tokio::spawn(answer(response, within)));
        }
        for answer in answers {
            let status = answer.await.unwrap_or(REFUSED);
            *tally.by_status.entry(status).or_default() += 1;
        }
        driver.abort();
    }
    tally
}

/// Open `count` TCP connections to `addr` that never send a byte (no TLS ClientHello, no
/// HTTP/2 preface), as fast as they connect; those that could not connect are left out.
pub async fn idle_connections(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(count);
    for _ in 0..count {
        if let Ok(tcp) = TcpStream::connect(addr).await {
            open.push(tcp);
        }
    }
    open
}

/// How many of `connections` the server has closed (a read sees the end or an error) within
/// `within`, waiting on all of them at once.
pub async fn closed_by_server(connections: &mut [TcpStream], within: Duration) -> usize {
    let reads = connections.iter_mut().map(|tcp| async move {
        let mut byte = [0u8; 1];
        // A server that closes sends nothing first: plaintext h2 or a TLS handshake never
        // starts without the client's bytes.
        matches!(
            tokio::time::timeout(within, tcp.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    });
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .filter(|closed| *closed)
        .count()
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
