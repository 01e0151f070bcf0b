//! The fast HTTP/1 codec beside hyper's on the same bytes, for the `h1_wire` fuzz target, the
//! corpus replay in `tests/tests/fuzz_corpus.rs` and `differential_tests`: the requests (or
//! the response) each engine reads from a connection's bytes, and where each refuses them,
//! must be the same. A difference panics, which is what the fuzzer looks for.

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Empty};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::body::{BodyError, Decoder};
use super::head::{Field, parse_request, parse_response};

pub mod answer;
pub mod connection;
mod forwarded;
pub mod sent;

pub use forwarded::Forwarded;
use forwarded::{
    forwarded_by_codec, forwarded_by_hyper_engine, response_forwarded_by_codec,
    response_forwarded_by_hyper_engine,
};

/// One message as an engine read it: what forwarding it would carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The method and target, or the status.
    pub start: String,
    /// Field names lowercased, values as sent, in order.
    pub fields: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    /// Trailer fields the same way.
    pub trailers: Vec<(String, Vec<u8>)>,
    /// A request's line and fields as they would go on to an endpoint (hop-by-hop fields out,
    /// forwarding fields in), or a response's status and fields as they would go on to the
    /// client, the same way.
    pub forwarded: Option<Forwarded>,
}

/// What an engine made of a connection's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading {
    pub messages: Vec<Message>,
    /// How it ended: `None` cleanly (or waiting for more), `Some(status)` a refused head (the
    /// status a server answers; 0 for a refused response head), `Some(1)` a refused body.
    pub refused: Option<u16>,
}

/// A body refused (invalid framing or cut short), in [`Reading::refused`].
pub const BODY_REFUSED: u16 = 1;

/// Fuzz entry (`h1_wire`): the first byte picks the side. Even: the rest is what a client
/// sent; odd: the first byte also picks the request's method (bits 1-2) and the rest is what
/// the endpoint answered. Panics where the engines differ; true when the fast codec read a
/// whole message.
pub fn wire(data: &[u8]) -> bool {
    let Some((&pick, rest)) = data.split_first() else {
        return false;
    };
    if pick % 2 == 0 {
        let ours = read_requests(rest);
        let hypers = hyper_requests(rest);
        assert_eq!(ours, hypers, "the engines read these requests differently");
        // The first request's head as the endpoint reads it must match too.
        sent::compare(rest);
        return !ours.messages.is_empty();
    }
    let methods = [Method::GET, Method::HEAD, Method::POST, Method::CONNECT];
    let method = &methods[usize::from(pick >> 1) % methods.len()];
    let ours = read_response(method, rest);
    let hypers = hyper_response(method, rest);
    assert_eq!(ours, hypers, "the engines read this response differently");
    // A final answer the fast path would forward: the head the client gets must match too.
    let forwarded = ours.refused.is_none()
        && ours.messages.first().is_some_and(|m| {
            m.start != "101" && !(*method == Method::CONNECT && m.start.starts_with('2'))
        });
    if forwarded {
        answer::compare(method, rest);
    }
    !ours.messages.is_empty()
}

/// The requests the fast codec reads from `data`, as a server that answers each.
pub fn read_requests(mut data: &[u8]) -> Reading {
    let mut messages = Vec::new();
    let mut fields = Vec::new();
    loop {
        let head = match parse_request(data, &mut fields) {
            Ok(Some(head)) => head,
            Ok(None) => {
                return Reading {
                    messages,
                    refused: None,
                };
            }
            Err(error) => {
                return Reading {
                    messages,
                    refused: error.status(),
                };
            }
        };
        // The target as a `Uri` shows it, as hyper hands it on.
        let target = http::Uri::try_from(&data[head.target.clone()])
            .map_or_else(|e| e.to_string(), |uri| uri.to_string());
        let start = format!("{} {target}", head.method);
        let mut message = Message {
            start,
            fields: named(data, &fields),
            body: Vec::new(),
            trailers: Vec::new(),
            forwarded: Some(forwarded_by_codec(data, &head, &fields)),
        };
        let mut decoder = Decoder::new(head.body);
        data = &data[head.len..];
        if let Err(BodyError::Invalid(_) | BodyError::Incomplete) =
            read_body(&mut decoder, &mut data, &mut message, false)
        {
            return Reading {
                messages,
                refused: Some(BODY_REFUSED),
            };
        }
        messages.push(message);
        if !head.keep_alive || head.upgrade {
            return Reading {
                messages,
                refused: None,
            };
        }
    }
}

/// The response to a `method` request the fast codec reads from `data`, the endpoint closing
/// after it; interim answers are passed over, as hyper's client does.
pub fn read_response(method: &Method, mut data: &[u8]) -> Reading {
    let mut fields = Vec::new();
    let refused = |status| Reading {
        messages: Vec::new(),
        refused: Some(status),
    };
    let head = loop {
        match parse_response(data, method, &mut fields) {
            Ok(Some(head)) if (100..200).contains(&head.status) && head.status != 101 => {
                data = &data[head.len..];
            }
            Ok(Some(head)) => break head,
            // The endpoint closed before the head was complete.
            Ok(None) => return refused(0),
            Err(_) => return refused(0),
        }
    };
    let mut message = Message {
        start: head.status.to_string(),
        fields: named(data, &fields),
        body: Vec::new(),
        trailers: Vec::new(),
        forwarded: Some(response_forwarded_by_codec(data, &fields, head.status)),
    };
    let mut decoder = Decoder::new(head.body);
    data = &data[head.len..];
    if head.status == 101 {
        return Reading {
            messages: vec![message],
            refused: None,
        };
    }
    match read_body(&mut decoder, &mut data, &mut message, true) {
        Ok(()) => Reading {
            messages: vec![message],
            refused: None,
        },
        Err(_) => refused(BODY_REFUSED),
    }
}

/// Decode a body from `data` (advanced past it); `closes`: the connection ends after `data`.
fn read_body(
    decoder: &mut Decoder,
    data: &mut &[u8],
    message: &mut Message,
    closes: bool,
) -> Result<(), BodyError> {
    while !decoder.is_done() {
        let decoded = decoder.decode(data)?;
        message.body.extend_from_slice(&data[decoded.data.clone()]);
        *data = &data[decoded.consumed..];
        if decoded.ended {
            break;
        }
        if data.is_empty() {
            if closes {
                decoder.closed()?;
                break;
            }
            return Err(BodyError::Incomplete);
        }
    }
    let trailers = decoder.trailers();
    if !trailers.is_empty() {
        let mut parsed = vec![httparse::EMPTY_HEADER; super::head::MAX_FIELDS];
        let mut section = trailers.to_vec();
        section.extend_from_slice(b"\r\n");
        if let Ok(httparse::Status::Complete((_, fields))) =
            httparse::parse_headers(&section, &mut parsed)
        {
            message.trailers = in_name_order(
                fields
                    .iter()
                    .map(|f| (f.name.to_ascii_lowercase(), f.value.to_vec()))
                    .collect(),
            );
        }
    }
    Ok(())
}

fn named(data: &[u8], fields: &[Field]) -> Vec<(String, Vec<u8>)> {
    in_name_order(
        fields
            .iter()
            .map(|f| {
                let name = String::from_utf8_lossy(&data[f.name.clone()]).to_ascii_lowercase();
                (name, data[f.value.clone()].to_vec())
            })
            .collect(),
    )
}

/// Fields as HTTP compares them: the order of one name's values matters, the order between
/// names does not.
fn in_name_order(mut fields: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    fields
}

fn hyper_fields(headers: &http::HeaderMap) -> Vec<(String, Vec<u8>)> {
    in_name_order(
        headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect(),
    )
}

/// A current-thread runtime for one comparison.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

/// The requests hyper's HTTP/1 server reads from `data`, sent by a client that then closes its
/// side, and the status it refused them with, if it did.
pub fn hyper_requests(data: &[u8]) -> Reading {
    let seen: Arc<Mutex<Reading>> = Arc::new(Mutex::new(Reading {
        messages: Vec::new(),
        refused: None,
    }));
    let data = data.to_vec();
    let record = Arc::clone(&seen);
    let written = runtime().block_on(async move {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let service =
            hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let record = Arc::clone(&record);
                async move {
                    let (parts, body) = req.into_parts();
                    let mut message = Message {
                        start: format!("{} {}", parts.method, parts.uri),
                        fields: hyper_fields(&parts.headers),
                        body: Vec::new(),
                        trailers: Vec::new(),
                        forwarded: Some(forwarded_by_hyper_engine(&parts)),
                    };
                    match body.collect().await {
                        Ok(collected) => {
                            if let Some(trailers) = collected.trailers() {
                                message.trailers = hyper_fields(trailers);
                            }
                            message.body = collected.to_bytes().to_vec();
                            record.lock().messages.push(message);
                        }
                        Err(_) => record.lock().refused = Some(BODY_REFUSED),
                    }
                    Ok::<_, std::convert::Infallible>(http::Response::new(Empty::<Bytes>::new()))
                }
            });
        // Half-close: the client has sent everything and shut its side; every request is still
        // served.
        let serve = hyper::server::conn::http1::Builder::new()
            .half_close(true)
            .serve_connection(hyper_util::rt::TokioIo::new(server), service);
        let (mut read_half, mut write_half) = tokio::io::split(client);
        let write = async move {
            let _ = write_half.write_all(&data).await;
            let _ = write_half.shutdown().await;
        };
        let read = async move {
            let mut out = Vec::new();
            let _ = read_half.read_to_end(&mut out).await;
            out
        };
        let (_, _, out) = tokio::join!(serve, write, read);
        out
    });
    let mut reading = seen.lock().clone();
    // Hyper's own answer to a refused head is the last status it wrote.
    if reading.refused.is_none()
        && let Some(status) = last_status(&written)
        && status >= 400
    {
        reading.refused = Some(status);
    }
    reading
}

/// The response hyper's HTTP/1 client reads from `data` for a `method` request, the endpoint
/// closing after it.
pub fn hyper_response(method: &Method, data: &[u8]) -> Reading {
    let data = data.to_vec();
    let method = method.clone();
    runtime().block_on(async move {
        let refused = |status| Reading {
            messages: Vec::new(),
            refused: Some(status),
        };
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let Ok((mut sender, conn)) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(client)).await
        else {
            return refused(0);
        };
        let driving = tokio::spawn(async move {
            let _ = conn.await;
        });
        let endpoint = tokio::spawn(async move {
            let _ = server.write_all(&data).await;
            let _ = server.shutdown().await;
            let mut sink = Vec::new();
            let _ = server.read_to_end(&mut sink).await;
        });
        let request = http::Request::builder()
            .method(method)
            .uri("/")
            .header("host", "endpoint")
            .body(Empty::<Bytes>::new());
        let Ok(request) = request else {
            return refused(0);
        };
        let reading = match sender.send_request(request).await {
            Err(_) => refused(0),
            Ok(response) => {
                let (parts, body) = response.into_parts();
                let mut message = Message {
                    start: parts.status.as_u16().to_string(),
                    fields: hyper_fields(&parts.headers),
                    body: Vec::new(),
                    trailers: Vec::new(),
                    forwarded: Some(response_forwarded_by_hyper_engine(&parts)),
                };
                match body.collect().await {
                    Ok(collected) => {
                        if let Some(trailers) = collected.trailers() {
                            message.trailers = hyper_fields(trailers);
                        }
                        message.body = collected.to_bytes().to_vec();
                        Reading {
                            messages: vec![message],
                            refused: None,
                        }
                    }
                    Err(_) => refused(BODY_REFUSED),
                }
            }
        };
        driving.abort();
        endpoint.abort();
        reading
    })
}

/// The status of the last response head in `written` (a server's output of bodiless answers).
fn last_status(written: &[u8]) -> Option<u16> {
    let mut last = None;
    let mut rest = written;
    while !rest.is_empty() {
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut fields);
        match response.parse(rest) {
            Ok(httparse::Status::Complete(len)) => {
                last = response.code;
                rest = &rest[len..];
            }
            _ => break,
        }
    }
    last
}
