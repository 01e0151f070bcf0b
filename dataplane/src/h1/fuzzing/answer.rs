//! The head a client is sent for an endpoint's answer, from both engines: the hyper engine
//! (hyper's client reads the endpoint's bytes, the hop-by-hop fields go, hyper's server writes
//! the answer) and `crate::h1::respond`. Compared as a client reads them: status line and
//! fields (field order aside, as HTTP allows), `Date` aside where the endpoint sent none (each
//! engine says its own now).

use bytes::Bytes;
use http::Method;
use http_body_util::Empty;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::h1::head::parse_response;
use crate::h1::respond::{Outgoing, write_response_head};
use crate::proxy::headers::prepare_response_fields;

/// Panics where the engines write different heads to the client for the endpoint's `answer`
/// to a `method` request (a valid, final answer: not 101, not CONNECT's 2xx), on a connection
/// that stays open and on one that closes after it.
pub fn compare(method: &Method, answer: &[u8]) {
    let dated = answer
        .windows(7)
        .any(|w| w.eq_ignore_ascii_case(b"\r\ndate:"));
    for closing in [false, true] {
        let (ours, _) = ours(method, closing, answer);
        let Some(hypers) = hypers(method, closing, answer) else {
            panic!(
                "hyper's server wrote no head for {method} {:?}",
                String::from_utf8_lossy(answer)
            );
        };
        let Some(fast) = fast_engines(method, closing, answer) else {
            panic!(
                "the fast engine wrote no head for {method} {:?}",
                String::from_utf8_lossy(answer)
            );
        };
        assert_eq!(
            seen(&fast, dated),
            seen(&hypers, dated),
            "the fast engine's writer and hyper's server answer {method} closing={closing} differently: {:?}",
            String::from_utf8_lossy(answer)
        );
        assert_eq!(
            seen(&ours, dated),
            seen(&hypers, dated),
            "the engines answer {method} closing={closing} differently: {:?}",
            String::from_utf8_lossy(answer)
        );
    }
}

/// A head as compared: version, status, reason, then the fields in name order.
pub type Seen = (u8, u16, String, Vec<(String, String)>);

fn request(method: &Method, closing: bool) -> String {
    let close = if closing { "Connection: close\r\n" } else { "" };
    format!("{method} / HTTP/1.1\r\nHost: a\r\n{close}\r\n")
}

pub fn seen(head: &[u8], endpoint_dated: bool) -> Seen {
    let mut fields = [httparse::EMPTY_HEADER; crate::h1::head::MAX_FIELDS + 8];
    let mut response = httparse::Response::new(&mut fields);
    let parsed = response.parse(head);
    assert!(
        matches!(parsed, Ok(httparse::Status::Complete(n)) if n == head.len()),
        "not one whole head: {parsed:?} {:?}",
        String::from_utf8_lossy(head)
    );
    let mut named: Vec<(String, String)> = response
        .headers
        .iter()
        .map(|f| {
            let name = f.name.to_ascii_lowercase();
            let value = if name == "date" && !endpoint_dated {
                "<now>".to_owned()
            } else {
                String::from_utf8_lossy(f.value).into_owned()
            };
            (name, value)
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    (
        response.version.unwrap_or(9),
        response.code.unwrap_or(0),
        response.reason.unwrap_or("?").to_owned(),
        named,
    )
}

/// The head hyper's server writes to the client for the endpoint's `answer`; `None` when it
/// closes the connection without one.
pub fn hypers(method: &Method, closing: bool, answer: &[u8]) -> Option<Vec<u8>> {
    let request = request(method, closing);
    let answer = answer.to_vec();
    let method = method.clone();
    super::runtime().block_on(async move {
        let service = hyper::service::service_fn(move |_req| {
            let (method, answer) = (method.clone(), answer.clone());
            async move {
                let response = read_by_hyper_engine(&method, &answer)
                    .await
                    .expect("an answer");
                Ok::<_, hyper::Error>(response)
            }
        });
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(server), service),
        );
        client.write_all(request.as_bytes()).await.expect("sent");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), client.read(&mut byte))
                .await
                .expect("the head in time")
                .expect("read");
            if n == 0 {
                assert!(head.is_empty(), "the connection closed inside the head");
                return None;
            }
            head.push(byte[0]);
        }
        Some(head)
    })
}

/// The answer as the hyper engine hands it to a server: hyper's client reads the endpoint's
/// `answer` to a `method` request, and the hop-by-hop fields go.
async fn read_by_hyper_engine(
    method: &Method,
    answer: &[u8],
) -> Option<http::Response<hyper::body::Incoming>> {
    let answer = answer.to_vec();
    let (client, mut endpoint) = tokio::io::duplex(64 * 1024);
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(client))
            .await
            .ok()?;
    tokio::spawn(conn);
    tokio::spawn(async move {
        let _ = endpoint.write_all(&answer).await;
        let _ = endpoint.shutdown().await;
        let mut sink = Vec::new();
        let _ = endpoint.read_to_end(&mut sink).await;
    });
    let upstream = http::Request::builder()
        .method(method.clone())
        .uri("/")
        .header("host", "endpoint")
        .body(Empty::<Bytes>::new())
        .ok()?;
    let response = sender.send_request(upstream).await.ok()?;
    // What the hyper engine does to it (`proxy::response_body`).
    let (mut parts, body) = response.into_parts();
    prepare_response_fields(&mut parts.headers);
    Some(http::Response::from_parts(parts, body))
}

/// The head the fast engine's writer (`crate::proxy::fast::response_head`) writes to the client
/// for the same answer; `None` when it refuses it (the connection then closes without one).
pub fn fast_engines(method: &Method, closing: bool, answer: &[u8]) -> Option<Vec<u8>> {
    use crate::proxy::fast::response_head::{BodySize, write_head};
    let response = super::runtime().block_on(read_by_hyper_engine(method, answer))?;
    let (mut parts, body) = response.into_parts();
    let mut out = Vec::new();
    write_head(
        &mut parts,
        BodySize::of(&body),
        method,
        !closing,
        false,
        &mut out,
    )
    .ok()?;
    Some(out)
}

/// The head `super::respond` writes for the same, and how its body goes.
pub fn ours(method: &Method, closing: bool, answer: &[u8]) -> (Vec<u8>, Outgoing) {
    let mut data = answer;
    let mut fields = Vec::new();
    let head = loop {
        let head = parse_response(data, method, &mut fields)
            .expect("a valid answer")
            .expect("a whole head");
        // Interim answers go no further, as in the hyper engine.
        if (100..200).contains(&head.status) && head.status != 101 {
            data = &data[head.len..];
            continue;
        }
        break head;
    };
    let mut out = Vec::new();
    let outgoing = write_response_head(
        data,
        &head,
        &fields,
        method,
        closing,
        |out: &mut Vec<u8>| out.extend_from_slice(b"Sun, 06 Dec 2026 20:00:00 GMT"),
        &mut out,
    );
    (out, outgoing)
}
