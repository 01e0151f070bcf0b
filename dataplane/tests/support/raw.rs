//! A raw HTTP/1.1 client over a plain socket, for what a well-behaved client library will not
//! send: malformed chunked bodies, uploads trickled over seconds, requests that stop half way.
//! It writes bytes as told, then reads the answer to the end of the connection.

use std::net::SocketAddr;
use std::time::Duration;

use rollcall_dataplane::h1::body::Decoder;
use rollcall_dataplane::h1::head::BodyLength;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What came back, parsed just enough for assertions.
#[derive(Debug)]
pub struct RawReply {
    pub status: u16,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked when the answer was chunked.
    pub body: Vec<u8>,
}

impl RawReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One piece of what the client sends, and how long it waits before sending it.
pub struct Piece {
    pub after: Duration,
    pub bytes: Vec<u8>,
}

impl Piece {
    pub fn now(bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            after: Duration::ZERO,
            bytes: bytes.into(),
        }
    }

    pub fn after(after: Duration, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            after,
            bytes: bytes.into(),
        }
    }
}

/// Send `pieces` (the client's trickle is the behaviour under test, so its pauses are real),
/// then read until the sidecar closes. `None` when it closed without an answer.
pub async fn exchange(addr: SocketAddr, pieces: Vec<Piece>) -> std::io::Result<Option<RawReply>> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    for piece in pieces {
        if !piece.after.is_zero() {
            tokio::time::sleep(piece.after).await;
        }
        if stream.write_all(&piece.bytes).await.is_err() {
            break;
        }
    }
    let mut raw = Vec::new();
    // A reset after the answer was written still leaves the answer readable.
    let _ = stream.read_to_end(&mut raw).await;
    Ok(parse(&raw))
}

/// A chunked POST head to `path`; the caller sends the chunks.
pub fn chunked_head(path: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: sidecar\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// One chunk in chunked encoding.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// The last chunk.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

fn parse(raw: &[u8]) -> Option<RawReply> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Some(RawReply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..line_end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        rest = &rest[line_end + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    body
}

/// The length of the whole answer at the start of `buf` (to `request`, whose method decides
/// whether a body follows), and whether it ends the connection; `None` while it is incomplete.
pub fn answer_length(buf: &[u8], request: &[u8]) -> Option<(usize, bool)> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut fields);
    let httparse::Status::Complete(head) = response.parse(buf).ok()? else {
        return None;
    };
    let field = |name: &str| {
        response
            .headers
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| String::from_utf8_lossy(f.value).to_ascii_lowercase())
    };
    let status = response.code?;
    let connection = field("connection").unwrap_or_default();
    let closes = connection.contains("close")
        || (response.version == Some(0) && !connection.contains("keep-alive"));
    let head_request = request.starts_with(b"HEAD");
    let length = if head_request || status == 204 || status == 304 || status < 200 {
        BodyLength::Empty
    } else if field("transfer-encoding").is_some() {
        BodyLength::Chunked
    } else if let Some(n) = field("content-length") {
        BodyLength::Length(n.trim().parse().ok()?)
    } else {
        BodyLength::UntilClose
    };
    body_end(buf, head, length).map(|at| (at, closes))
}

/// Where a body framed by `length` that starts at `head` ends in `buf`; `None` while more is to
/// come (a body framed by the close ends only with it).
pub fn body_end(buf: &[u8], head: usize, length: BodyLength) -> Option<usize> {
    let mut decoder = Decoder::new(length);
    let mut at = head;
    loop {
        if decoder.is_done() {
            return Some(at);
        }
        let decoded = decoder.decode(&buf[at..]).ok()?;
        at += decoded.consumed;
        if decoded.ended {
            return Some(at);
        }
        if decoded.consumed == 0 || at == buf.len() {
            return None;
        }
    }
}
