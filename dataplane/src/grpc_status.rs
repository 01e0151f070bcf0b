//! gRPC status codes and how they read as HTTP statuses: shared by the health probes (a `GRPC`
//! check's answer) and the proxy (judging and retrying gRPC calls, the sidecar's own answers).
//! It sits below both and depends on neither, so `health` never reaches up into `proxy`.

use http::HeaderMap;
use http::header::CONTENT_TYPE;

use crate::local_answer::LocalReason;

/// The header (or trailer) that carries a call's status.
pub const GRPC_STATUS: &str = "grpc-status";
/// The gRPC status codes: tonic's, not a copy.
pub use tonic::Code;

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

/// The `grpc-status` in `headers` (or trailers), when there is a well-formed one: a
/// non-negative number; one no gRPC version defines (yet) reads as `Unknown`.
pub fn status(headers: &HeaderMap) -> Option<Code> {
    let number: u32 = headers
        .get(GRPC_STATUS)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(i32::try_from(number).map_or(Code::Unknown, Code::from_i32))
}

/// The HTTP status a gRPC status stands for, for retry rules and verdicts.
pub fn http_equivalent(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::Cancelled => 499,
        Code::InvalidArgument
        | Code::FailedPrecondition
        | Code::OutOfRange
        | Code::AlreadyExists
        | Code::Aborted => 400,
        Code::NotFound | Code::Unimplemented => 404,
        Code::PermissionDenied => 403,
        Code::Unauthenticated => 401,
        Code::ResourceExhausted => 429,
        Code::DeadlineExceeded => 504,
        Code::Unavailable => 503,
        // Codes from the future read as `Unknown`: the endpoint's failure, not the client's.
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
    }
}

/// The gRPC status for one of the sidecar's own answers: its own deadline is
/// `DEADLINE_EXCEEDED`, everything the endpoints failed at (no endpoint, connect failure,
/// timeout, reset) `UNAVAILABLE`, which a gRPC client may retry; the gRPC spec's HTTP mapping
/// for the rest.
pub fn code_for(http_status: u16, reason: LocalReason) -> Code {
    match (http_status, reason) {
        (_, LocalReason::DeadlineExceeded) => Code::DeadlineExceeded,
        (400, _) => Code::Internal,
        (401, _) => Code::Unauthenticated,
        (403, _) => Code::PermissionDenied,
        (404, _) => Code::Unimplemented,
        (429 | 502 | 503 | 504, _) => Code::Unavailable,
        _ => Code::Unknown,
    }
}
