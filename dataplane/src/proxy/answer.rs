//! Every answer the sidecar makes itself: an honest status, a reason header a person can grep
//! for, and a one-line body saying what happened.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::local_answer::LocalAnswer;
use crate::upstream::ProxyBody;

pub use super::headers::REASON_HEADER;

/// An answer made by the sidecar: `status`, `x-rollcall-reason: reason`, and `message`.
pub fn error_response(
    status: StatusCode,
    reason: &'static str,
    message: &str,
) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("{message}\n")))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(REASON_HEADER, HeaderValue::from_static(reason));
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The planner's answer as a response; `detail` is what went wrong, in words. A gRPC call
/// gets it as a trailers-only gRPC answer (`super::grpc`).
pub fn local(answer: LocalAnswer, detail: &str, grpc: bool) -> Response<ProxyBody> {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let what = answer.reason.sentence();
    let message = match (what, detail) {
        ("", detail) => detail.to_owned(),
        (what, "") => what.to_owned(),
        (what, detail) => format!("{what}: {detail}"),
    };
    if grpc {
        return super::grpc::local_answer(status.as_u16(), answer.reason, &message);
    }
    error_response(status, answer.reason.as_str(), &message)
}
