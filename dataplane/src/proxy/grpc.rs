//! gRPC on the request path. A gRPC call answers HTTP 200 and carries its real outcome in
//! `grpc-status`: in the response headers when there is no message at all ("trailers-only",
//! typical of errors), otherwise in the trailers after the body. So, for a request whose
//! `content-type` is `application/grpc`:
//! - a `grpc-status` in the response headers is judged at once, as the HTTP status it stands
//!   for ([`http_equivalent`], the table Envoy's `grpc_http1_reverse_bridge` and the gRPC
//!   spec's HTTP mapping use): `UNAVAILABLE` as a 503, so it is retried and counts against the
//!   endpoint like one; application codes (`INVALID_ARGUMENT`, `NOT_FOUND`, …) as 4xx, never
//!   retried and never held against the endpoint; `INTERNAL`/`UNKNOWN`/`DATA_LOSS` as a 500;
//! - a `grpc-status` in the trailers is judged when the body ends (too late to retry, in time for
//!   outlier detection and the balancer);
//! - the sidecar's own answers (no endpoint, timeouts, bad requests) are trailers-only gRPC
//!   answers ([`local_answer`]), so a gRPC client sees a status it understands, not an HTTP
//!   error it reports as `UNKNOWN` or `INTERNAL`.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use super::answer::REASON_HEADER;
use crate::upstream::ProxyBody;

const GRPC_STATUS: &str = "grpc-status";
const GRPC_MESSAGE: &str = "grpc-message";

/// What `grpc-message` percent-encodes: everything but printable ASCII, and `%` itself (non-ASCII
/// bytes are always encoded).
const MESSAGE_ENCODED: &AsciiSet = &CONTROLS.add(b'%');

/// gRPC status codes used here by name.
pub mod code {
    pub const OK: u32 = 0;
    pub const CANCELLED: u32 = 1;
    pub const UNKNOWN: u32 = 2;
    pub const INVALID_ARGUMENT: u32 = 3;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const NOT_FOUND: u32 = 5;
    pub const ALREADY_EXISTS: u32 = 6;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const FAILED_PRECONDITION: u32 = 9;
    pub const ABORTED: u32 = 10;
    pub const OUT_OF_RANGE: u32 = 11;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
    pub const DATA_LOSS: u32 = 15;
    pub const UNAUTHENTICATED: u32 = 16;
}

/// Whether a request is a gRPC call: `content-type: application/grpc`, bare or with a
/// `+format` or parameters.
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim();
            v.len() >= 16
                && v[..16].eq_ignore_ascii_case("application/grpc")
                && matches!(v.as_bytes().get(16), None | Some(b'+' | b';'))
        })
}

/// The `grpc-status` in `headers` (or trailers), when there is a well-formed one.
pub fn status(headers: &HeaderMap) -> Option<u32> {
    headers.get(GRPC_STATUS)?.to_str().ok()?.trim().parse().ok()
}

/// The HTTP status a gRPC status stands for, for retry rules and verdicts.
pub fn http_equivalent(code: u32) -> u16 {
    match code {
        code::OK => 200,
        code::CANCELLED => 499,
        code::INVALID_ARGUMENT
        | code::FAILED_PRECONDITION
        | code::OUT_OF_RANGE
        | code::ALREADY_EXISTS
        | code::ABORTED => 400,
        code::NOT_FOUND | code::UNIMPLEMENTED => 404,
        code::PERMISSION_DENIED => 403,
        code::UNAUTHENTICATED => 401,
        code::RESOURCE_EXHAUSTED => 429,
        code::DEADLINE_EXCEEDED => 504,
        code::UNAVAILABLE => 503,
        code::UNKNOWN | code::INTERNAL | code::DATA_LOSS => 500,
        // Codes from the future: the endpoint's failure, not the client's.
        _ => 500,
    }
}

/// The gRPC status for one of the sidecar's own answers: its own deadline is
/// `DEADLINE_EXCEEDED`, everything the endpoints failed at (no endpoint, connect failure,
/// timeout, reset) `UNAVAILABLE`, which a gRPC client may retry; the gRPC spec's HTTP mapping
/// for the rest.
pub fn code_for(http_status: u16, reason: &str) -> u32 {
    match (http_status, reason) {
        (_, "deadline-exceeded") => code::DEADLINE_EXCEEDED,
        (400, _) => code::INTERNAL,
        (401, _) => code::UNAUTHENTICATED,
        (403, _) => code::PERMISSION_DENIED,
        (404, _) => code::UNIMPLEMENTED,
        (429 | 502 | 503 | 504, _) => code::UNAVAILABLE,
        _ => code::UNKNOWN,
    }
}

/// A trailers-only gRPC answer: HTTP 200, `content-type: application/grpc`, `grpc-status` for
/// `http_status`, `grpc-message` (percent-encoded as the spec asks), the reason header, no body.
pub fn local_answer(http_status: u16, reason: &'static str, message: &str) -> Response<ProxyBody> {
    let mut response = Response::new(
        Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(
        GRPC_STATUS,
        HeaderValue::from(code_for(http_status, reason)),
    );
    let encoded = utf8_percent_encode(message, MESSAGE_ENCODED).to_string();
    if let Ok(value) = HeaderValue::from_str(&encoded) {
        headers.insert(GRPC_MESSAGE, value);
    }
    headers.insert(REASON_HEADER, HeaderValue::from_static(reason));
    response
}

#[cfg(test)]
mod tests;
