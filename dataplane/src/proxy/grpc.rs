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
//!
//! The codes and their HTTP mapping live in `crate::grpc_status`, below both this module and
//! the health probes (which read a `GRPC` check's answer with them); this module re-exports them
//! and adds the sidecar's own trailers-only answers.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use super::headers::REASON_HEADER;
use crate::grpc_status::GRPC_STATUS;
pub use crate::grpc_status::{Code, code_for, http_equivalent, is_grpc, status};
use crate::local_answer::LocalReason;
use crate::upstream::ProxyBody;

const GRPC_MESSAGE: &str = "grpc-message";

/// What `grpc-message` percent-encodes: everything but printable ASCII, and `%` itself (non-ASCII
/// bytes are always encoded).
const MESSAGE_ENCODED: &AsciiSet = &CONTROLS.add(b'%');

/// A trailers-only gRPC answer: HTTP 200, `content-type: application/grpc`, `grpc-status` for
/// `http_status`, `grpc-message` (percent-encoded as the spec asks), the reason header, no body.
pub fn local_answer(http_status: u16, reason: LocalReason, message: &str) -> Response<ProxyBody> {
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
        HeaderValue::from(code_for(http_status, reason) as i32),
    );
    let encoded = utf8_percent_encode(message, MESSAGE_ENCODED).to_string();
    if let Ok(value) = HeaderValue::from_str(&encoded) {
        headers.insert(GRPC_MESSAGE, value);
    }
    headers.insert(REASON_HEADER, HeaderValue::from_static(reason.as_str()));
    response
}

#[cfg(test)]
mod tests;
