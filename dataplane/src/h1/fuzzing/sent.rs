//! The bytes of the head an endpoint receives for a client's first request, from both engines,
//! as the endpoint reads them: the hyper engine (hyper's server reads the request, the
//! engine's own `prepare_request_fields`, `Target::of` and `build_request` make the upstream
//! request, hyper's client writes it, with its body as the engine's `client_body` hands it
//! over: whole when it has a length, streamed when chunked) against
//! `crate::h1::rewrite::write_request_head`. Compared as the endpoint reads them: request line
//! and fields, field order aside.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Method;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::head::parse_request;
use super::super::rewrite::write_request_head;
use crate::proxy::headers::{ClientAddr, prepare_request_fields, request_host};
use crate::proxy::request::{Target, build_request};
use crate::upstream::{BoxError, ProxyBody};

/// A head as the endpoint reads it: request line, then fields in name order.
pub type Seen = (String, Vec<(String, Vec<u8>)>);

/// A streamed body of unknown length, as a chunked upload reaches the hyper engine's client.
struct Streamed(VecDeque<Bytes>);

impl Body for Streamed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

fn client() -> ClientAddr {
    ClientAddr::new(std::net::SocketAddr::from(([192, 0, 2, 7], 40_000)))
}

pub fn seen(head: &[u8]) -> Seen {
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut fields);
    let parsed = request.parse(head);
    assert!(
        matches!(parsed, Ok(httparse::Status::Complete(n)) if n == head.len()),
        "not one whole head: {parsed:?} {:?}",
        String::from_utf8_lossy(head)
    );
    let line = format!(
        "{} {} HTTP/1.{}",
        request.method.unwrap_or_default(),
        request.path.unwrap_or_default(),
        request.version.unwrap_or(9)
    );
    let mut named: Vec<(String, Vec<u8>)> = request
        .headers
        .iter()
        .map(|f| (f.name.to_ascii_lowercase(), f.value.to_vec()))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    (line, named)
}

/// Panics where the endpoint would read a different head for the first request in `data`
/// from the two engines.
pub fn compare(data: &[u8]) {
    // A request whose body does not arrive whole is never sent on by the hyper engine (it
    // reads a small body first); the comparison is of requests that arrive whole.
    if super::read_requests(data).messages.is_empty() {
        return;
    }
    let Some(ours) = ours(data) else {
        return;
    };
    let Some(hypers) = hypers(data) else {
        panic!(
            "the codec forwards a request the hyper engine does not: {:?}",
            String::from_utf8_lossy(data)
        );
    };
    assert_eq!(
        seen(&ours),
        seen(&hypers),
        "the engines send the endpoint different heads for {:?}",
        String::from_utf8_lossy(data)
    );
}

/// The head the codec writes for the first request in `data`, when it reads one that the fast
/// path would forward (not an upgrade).
pub fn ours(data: &[u8]) -> Option<Vec<u8>> {
    let mut fields = Vec::new();
    let head = parse_request(data, &mut fields).ok()??;
    if head.upgrade {
        return None;
    }
    let mut out = Vec::new();
    write_request_head(data, &head, &fields, &client(), &mut out).ok()?;
    Some(out)
}

/// The head hyper's client writes to the endpoint for the first request in `data`.
pub fn hypers(data: &[u8]) -> Option<Vec<u8>> {
    let data = data.to_vec();
    super::runtime().block_on(async move {
        let (sent_tx, sent_rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
        let sent_tx = parking_lot::Mutex::new(Some(sent_tx));
        let service =
            hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let sent_tx = sent_tx.lock().take();
                async move {
                    if let Some(sent_tx) = sent_tx {
                        forward(req, sent_tx).await;
                    }
                    Ok::<_, std::convert::Infallible>(http::Response::new(Full::<Bytes>::default()))
                }
            });
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .half_close(true)
                .serve_connection(hyper_util::rt::TokioIo::new(server), service),
        );
        let _ = client.write_all(&data).await;
        let _ = client.shutdown().await;
        tokio::time::timeout(std::time::Duration::from_secs(5), sent_rx)
            .await
            .ok()?
            .ok()
    })
}

/// What the hyper engine does with one request, up to its head reaching the endpoint.
async fn forward(
    req: http::Request<hyper::body::Incoming>,
    sent: tokio::sync::oneshot::Sender<Vec<u8>>,
) {
    let (mut parts, body) = req.into_parts();
    if parts.method == Method::CONNECT {
        return;
    }
    let chunked = parts.headers.get(http::header::TRANSFER_ENCODING).is_some();
    let Ok(collected) = body.collect().await else {
        return;
    };
    let bytes = collected.to_bytes();
    let body: ProxyBody = if chunked {
        Streamed(
            VecDeque::from([bytes])
                .into_iter()
                .filter(|b| !b.is_empty())
                .collect(),
        )
        .boxed_unsync()
    } else {
        Full::new(bytes)
            .map_err(|never| -> BoxError { match never {} })
            .boxed_unsync()
    };
    let host = request_host(&parts.headers, &parts.uri);
    prepare_request_fields(&mut parts.headers, &client(), host.as_ref());
    let Ok(target) = Target::of(&parts, host.as_ref(), false) else {
        return;
    };
    let upstream = build_request(&parts, &target, body, false, None);
    let (endpoint_side, mut endpoint) = tokio::io::duplex(64 * 1024);
    let Ok((mut sender, conn)) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(endpoint_side)).await
    else {
        return;
    };
    tokio::spawn(conn);
    tokio::spawn(async move {
        let _ = sender.send_request(upstream).await;
    });
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match endpoint.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let _ = sent.send(head);
}
