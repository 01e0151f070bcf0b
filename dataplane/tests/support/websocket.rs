//! A WebSocket-speaking backend and client for the upgrade tests: the backend accepts upgrades
//! (answering RFC 6455's accept for the key it got) and echoes raw bytes; the client sends a
//! handshake and reads the head, then echoes through the tunnel.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::PATIENCE;

/// RFC 6455's own example: this key's accept value is the one below.
pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
pub const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// RFC 6455's `Sec-WebSocket-Accept` for `key`.
pub fn accept_for(key: &str) -> String {
    use base64::Engine as _;
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// A backend that accepts WebSocket upgrades (answering RFC 6455's accept for the key it got)
/// and echoes whatever bytes come through; `/declined` gets `426` instead.
pub async fn echo_backend() -> (SocketAddr, JoinSet<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
        let mut connections = JoinSet::new();
        while let Ok((stream, _)) = listener.accept().await {
            connections.spawn(async move {
                let service = service_fn(|mut req: Request<Incoming>| async move {
                    if req.uri().path() == "/declined" {
                        let mut r = Response::new(Empty::<Bytes>::new());
                        *r.status_mut() = StatusCode::UPGRADE_REQUIRED;
                        return Ok::<_, Infallible>(r);
                    }
                    // Any key (the sidecar makes its own for a WebSocket that came over
                    // HTTP/2), answered as RFC 6455 says: KEY gets ACCEPT.
                    let accept = req
                        .headers()
                        .get("sec-websocket-key")
                        .and_then(|k| k.to_str().ok())
                        .map(accept_for);
                    let key_ok = accept.is_some();
                    let upgrade_ok = req
                        .headers()
                        .get("upgrade")
                        .is_some_and(|u| u.as_bytes().eq_ignore_ascii_case(b"websocket"));
                    if !key_ok || !upgrade_ok {
                        let mut r = Response::new(Empty::<Bytes>::new());
                        *r.status_mut() = StatusCode::BAD_REQUEST;
                        return Ok(r);
                    }
                    let upgraded = hyper::upgrade::on(&mut req);
                    tokio::spawn(async move {
                        let Ok(upgraded) = upgraded.await else { return };
                        let mut io = TokioIo::new(upgraded);
                        let mut buf = [0u8; 1024];
                        loop {
                            match io.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => {
                                    if io.write_all(&buf[..n]).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    });
                    let mut r = Response::new(Empty::<Bytes>::new());
                    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                    let h = r.headers_mut();
                    h.insert("upgrade", http::HeaderValue::from_static("websocket"));
                    h.insert("connection", http::HeaderValue::from_static("Upgrade"));
                    if let Some(accept) = accept.and_then(|a| a.parse().ok()) {
                        h.insert("sec-websocket-accept", accept);
                    }
                    Ok(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    (addr, tasks)
}

/// Send a WebSocket handshake for `path` and read the response head; returns the stream (the
/// tunnel, when it was accepted) and the head.
pub async fn handshake(proxy: SocketAddr, path: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: chat.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut byte))
            .await
            .expect("head in time")
            .expect("read");
        assert!(
            n > 0,
            "closed before the head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

/// Write `bytes` into the tunnel and read as many back.
pub async fn echo(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    stream.write_all(bytes).await.expect("write");
    let mut back = vec![0u8; bytes.len()];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut back))
        .await
        .expect("echo in time")
        .expect("read");
    back
}
