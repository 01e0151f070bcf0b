//! The request as it goes to an endpoint: its body kept replayable when small (so a retry can
//! send it again) or streamed once when large; the URI in the form each protocol wants; sending
//! it on a connection and telling apart "never written, here it is back" from "written, maybe
//! processed"; and the client's own deadline from `grpc-timeout`.

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::time::Instant;

use super::body::error_response;
use super::upstream::{BoxError, Conn, ProxyBody};

/// Request bodies up to this size are buffered so the request can be replayed on a retry;
/// larger ones stream and are only retried while none of their bytes have left.
const REPLAYABLE_BODY_LIMIT: u64 = 64 * 1024;
/// The request body as far as retries are concerned.
pub(super) enum RequestBody {
    /// Fully read (or empty): can be sent any number of times.
    Replayable(Bytes),
    /// Streaming: can be sent once; `None` once it has left.
    Streaming(Option<ProxyBody>),
}

impl RequestBody {
    pub(super) fn take(&mut self) -> Option<ProxyBody> {
        match self {
            RequestBody::Replayable(bytes) => Some(full(bytes.clone())),
            RequestBody::Streaming(body) => body.take(),
        }
    }

    /// Put back a body hyper returned unsent.
    pub(super) fn restore(&mut self, body: ProxyBody) {
        if let RequestBody::Streaming(slot) = self {
            *slot = Some(body);
        }
    }

    pub(super) fn replayable(&self) -> bool {
        match self {
            RequestBody::Replayable(_) => true,
            RequestBody::Streaming(body) => body.is_some(),
        }
    }
}

fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Read a small body whole so it can be replayed; stream a large or unknown-length one.
pub(super) async fn prepare_body(
    body: Incoming,
    deadline: Instant,
) -> Result<RequestBody, Response<ProxyBody>> {
    use http_body::Body as _;
    if body.is_end_stream() {
        return Ok(RequestBody::Replayable(Bytes::new()));
    }
    let small = body
        .size_hint()
        .upper()
        .is_some_and(|upper| upper <= REPLAYABLE_BODY_LIMIT);
    if !small {
        let streaming = body.map_err(|e| Box::new(e) as BoxError).boxed_unsync();
        return Ok(RequestBody::Streaming(Some(streaming)));
    }
    match tokio::time::timeout_at(deadline, body.collect()).await {
        Ok(Ok(collected)) => Ok(RequestBody::Replayable(collected.to_bytes())),
        Ok(Err(error)) => Err(error_response(
            StatusCode::BAD_REQUEST,
            "client-body-error",
            &format!("reading the request body failed: {error}"),
        )),
        Err(_) => Err(error_response(
            StatusCode::REQUEST_TIMEOUT,
            "client-body-timeout",
            "the request body did not arrive before the deadline",
        )),
    }
}

/// The upstream request: origin-form URI for HTTP/1.1, absolute URI for HTTP/2.
pub(super) fn build_request(
    parts: &http::request::Parts,
    body: ProxyBody,
    conn: &Conn,
    host: Option<&HeaderValue>,
) -> Result<Request<ProxyBody>, String> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let (uri, version) = match conn {
        Conn::Http1 { .. } => (
            Uri::try_from(path).map_err(|e| e.to_string())?,
            Version::HTTP_11,
        ),
        Conn::Http2 { .. } => {
            let authority = host.and_then(|h| h.to_str().ok()).unwrap_or("localhost");
            let uri = Uri::builder()
                .scheme("http")
                .authority(authority)
                .path_and_query(path)
                .build()
                .map_err(|e| format!("cannot build the upstream URI: {e}"))?;
            (uri, Version::HTTP_2)
        }
    };
    let mut request = Request::new(body);
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = parts.headers.clone();
    if version == Version::HTTP_2 {
        request.headers_mut().remove(header::HOST);
    }
    Ok(request)
}

pub(super) enum SendError {
    /// The connection refused the request before writing it; here it is back.
    NotSent {
        request: Box<Request<ProxyBody>>,
        error: hyper::Error,
    },
    /// The request was (or may have been) written.
    Sent(hyper::Error),
}

/// What `TrackedBody` needs to give an HTTP/1 connection back once the response has been read.
pub(super) type Release = Option<hyper::client::conn::http1::SendRequest<ProxyBody>>;

pub(super) async fn send(
    conn: Conn,
    request: Request<ProxyBody>,
) -> Result<(Response<Incoming>, Release), SendError> {
    let result = match conn {
        Conn::Http1 { mut tx, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response, Some(tx))),
            Err(e) => e,
        },
        Conn::Http2 { mut tx, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response, None)),
            Err(e) => e,
        },
    };
    let mut error = result;
    match error.take_message() {
        Some(request) => Err(SendError::NotSent {
            request: Box::new(request),
            error: error.into_error(),
        }),
        None => Err(SendError::Sent(error.into_error())),
    }
}

/// A client deadline from `grpc-timeout` (`<digits><unit>`, units H M S m u n).
pub(super) fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units_parse_and_garbage_is_ignored() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&m)
        };
        assert_eq!(h("5S"), Some(Duration::from_secs(5)));
        assert_eq!(h("250m"), Some(Duration::from_millis(250)));
        assert_eq!(h("2M"), Some(Duration::from_secs(120)));
        assert_eq!(h("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(h("S"), None);
        assert_eq!(h("10x"), None);
        assert_eq!(h("1234567890S"), None);
    }
}
