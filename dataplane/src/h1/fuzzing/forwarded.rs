//! The heads each engine passes on, for the comparison in `super`: a request's line and fields
//! as they go to an endpoint, a response's status and fields as they go to the client. The
//! codec's side is written by `crate::h1::rewrite` and read back; the hyper engine's is its
//! `HeaderMap` after `crate::proxy::headers`' rules.

use super::super::head::{BodyLength, Field, RequestHead};
use super::super::rewrite::{write_request_head, write_response_fields};
use super::{hyper_fields, in_name_order};
use crate::proxy::headers::{
    ClientAddr, prepare_request_fields, prepare_response_fields, request_host,
};
use crate::proxy::request::origin_form;

/// A request head as it goes on to an endpoint: its method and origin-form target (or why
/// there is none), and its fields in name order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarded {
    pub line: String,
    pub fields: Vec<(String, Vec<u8>)>,
}

/// The client every forwarded request is from.
fn client() -> ClientAddr {
    ClientAddr::new(std::net::SocketAddr::from(([192, 0, 2, 7], 40_000)))
}

/// The head the codec writes for an endpoint, read back. It must be one whole, valid head, and
/// say `Transfer-Encoding: chunked` exactly when the body is chunked (the hyper engine's client
/// adds that itself, so it is checked here and left out of the comparison).
pub(super) fn forwarded_by_codec(data: &[u8], head: &RequestHead, fields: &[Field]) -> Forwarded {
    let mut out = Vec::new();
    if let Err(error) = write_request_head(data, head, fields, &client(), &mut out) {
        return Forwarded {
            line: format!("refused: {error}"),
            fields: Vec::new(),
        };
    }
    let mut parsed = vec![httparse::EMPTY_HEADER; super::super::head::MAX_FIELDS + 8];
    let mut request = httparse::Request::new(&mut parsed);
    let len = request.parse(&out);
    assert!(
        matches!(len, Ok(httparse::Status::Complete(n)) if n == out.len()),
        "the codec wrote a head that does not parse back: {len:?} {:?}",
        String::from_utf8_lossy(&out)
    );
    let line = format!(
        "{} {}",
        request.method.unwrap_or_default(),
        request.path.unwrap_or_default()
    );
    let mut fields: Vec<(String, Vec<u8>)> = request
        .headers
        .iter()
        .map(|f| (f.name.to_ascii_lowercase(), f.value.to_vec()))
        .collect();
    let framing: Vec<usize> = (0..fields.len())
        .filter(|&i| fields[i].0 == "transfer-encoding")
        .collect();
    let chunked = head.body == BodyLength::Chunked;
    assert!(
        framing.len() == usize::from(chunked) && framing.iter().all(|&i| fields[i].1 == b"chunked"),
        "the codec framed a {:?} body with {framing:?} in {:?}",
        head.body,
        String::from_utf8_lossy(&out)
    );
    if let Some(&i) = framing.first() {
        fields.remove(i);
    }
    Forwarded {
        line,
        fields: in_name_order(fields),
    }
}

/// The fields the codec passes on to the client from a response, read back.
pub(super) fn response_forwarded_by_codec(data: &[u8], fields: &[Field], status: u16) -> Forwarded {
    let mut out = Vec::new();
    write_response_fields(data, fields, &mut out);
    out.extend_from_slice(b"\r\n");
    let mut parsed = vec![httparse::EMPTY_HEADER; super::super::head::MAX_FIELDS + 1];
    let read = httparse::parse_headers(&out, &mut parsed);
    let Ok(httparse::Status::Complete((len, fields))) = read else {
        panic!("the codec wrote fields that do not parse back: {read:?}");
    };
    assert_eq!(len, out.len(), "{:?}", String::from_utf8_lossy(&out));
    Forwarded {
        line: status.to_string(),
        fields: in_name_order(
            fields
                .iter()
                .map(|f| (f.name.to_ascii_lowercase(), f.value.to_vec()))
                .collect(),
        ),
    }
}

/// The fields the hyper engine passes on to the client from a response hyper's client read.
pub(super) fn response_forwarded_by_hyper_engine(parts: &http::response::Parts) -> Forwarded {
    let mut headers = parts.headers.clone();
    prepare_response_fields(&mut headers);
    Forwarded {
        line: parts.status.as_u16().to_string(),
        fields: hyper_fields(&headers),
    }
}

/// The head the hyper engine sends an endpoint for a request hyper's server read.
pub(super) fn forwarded_by_hyper_engine(parts: &http::request::Parts) -> Forwarded {
    let mut headers = parts.headers.clone();
    let host = request_host(&headers, &parts.uri);
    prepare_request_fields(&mut headers, &client(), host.as_ref());
    match origin_form(&parts.uri) {
        Ok(origin) => Forwarded {
            line: format!("{} {origin}", parts.method),
            fields: hyper_fields(&headers),
        },
        Err(error) => Forwarded {
            line: format!("refused: {error}"),
            fields: Vec::new(),
        },
    }
}
