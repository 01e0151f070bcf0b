//! gRPC status codes and how they read as HTTP statuses: shared by the health probes (a `GRPC`
//! check's answer) and the proxy (judging and retrying gRPC calls, the sidecar's own answers).
//! It sits below both and depends on neither, so `health` never reaches up into `proxy`.

use http::HeaderMap;
use http::header::CONTENT_TYPE;

/// The header (or trailer) that carries a call's status.
pub const GRPC_STATUS: &str = "grpc-status";
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
