//! The request as it goes to an endpoint: the URI in the form each protocol wants (checked once,
//! before any try, so a bad one is the client's 400 and never an endpoint's failure), and the
//! client's own deadline from `grpc-timeout`, read on the way in and rewritten on every try to
//! what is left of it, so the endpoint of a retry knows how long the client still waits.

use std::time::Duration;

use http::header::HeaderValue;
use http::{HeaderMap, HeaderName, Request, Uri, Version};
use http_body::Body;

use crate::upstream::ProxyBody;

const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// Where the request goes, in both URI forms, checked before the first try.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// Origin form, for HTTP/1.1.
    origin: Uri,
    /// Absolute form, for HTTP/2; `None` for an HTTP/1.1 pool.
    absolute: Option<Uri>,
}

impl Target {
    /// The target in origin form, as an HTTP/1.1 endpoint is sent it.
    pub(crate) fn origin(&self) -> &Uri {
        &self.origin
    }

    /// `Err` is why the request cannot be forwarded at all (the client's fault): a target that
    /// is not a path, or, for an HTTP/2 pool, a host that cannot be an authority. The absolute
    /// form is made only for an HTTP/2 pool (an HTTP/1.1 request never needs it).
    pub(crate) fn of(
        parts: &http::request::Parts,
        host: Option<&HeaderValue>,
        http2: bool,
    ) -> Result<Self, String> {
        let origin = origin_form(&parts.uri)?;
        if !http2 {
            return Ok(Self {
                origin,
                absolute: None,
            });
        }
        let absolute = absolute_form(&origin, host)
            .map_err(|e| format!("cannot build the upstream URI: {e}"))?;
        Ok(Self {
            origin,
            absolute: Some(absolute),
        })
    }
}

/// A request target in origin form (`/path?query`), as an HTTP/1.1 endpoint is sent it; `Err`
/// says why a target cannot be.
pub(crate) fn origin_form(uri: &Uri) -> Result<Uri, String> {
    if uri.scheme().is_none() && uri.authority().is_none() {
        // Already in origin form, as HTTP/1.1 clients send it: no need to parse it again.
        return Ok(uri.clone());
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    Uri::try_from(path).map_err(|e| format!("bad request target: {e}"))
}

/// `http://HOST/PATH` for an HTTP/2 request (`localhost` when the client named no host).
fn absolute_form(origin: &Uri, host: Option<&HeaderValue>) -> Result<Uri, http::Error> {
    let path = origin.path_and_query().map_or("/", |p| p.as_str());
    let authority = host.and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    Uri::builder()
        .scheme("http")
        .authority(authority)
        .path_and_query(path)
        .build()
}

/// The upstream request: origin-form URI on an HTTP/1.1 connection, absolute URI on an HTTP/2
/// one; `grpc_left` is the client's remaining deadline when it sent one.
pub(crate) fn build_request(
    parts: &http::request::Parts,
    target: &Target,
    body: ProxyBody,
    http2: bool,
    grpc_left: Option<Duration>,
) -> Request<ProxyBody> {
    let mut request = Request::new(body);
    *request.method_mut() = parts.method.clone();
    *request.headers_mut() = parts.headers.clone();
    // An HTTP/1.1 pool's request meets an HTTP/2 connection only when the pool's protocol
    // changed while it was under way; it then gets its absolute form here.
    let absolute = match (&target.absolute, http2) {
        (Some(absolute), true) => Some(absolute.clone()),
        (None, true) => absolute_form(&target.origin, parts.headers.get(http::header::HOST)).ok(),
        (_, false) => None,
    };
    match absolute {
        Some(absolute) => {
            *request.uri_mut() = absolute;
            *request.version_mut() = Version::HTTP_2;
            request.headers_mut().remove(http::header::HOST);
        }
        None => {
            *request.uri_mut() = target.origin.clone();
            *request.version_mut() = Version::HTTP_11;
            // An HTTP/1.1 client's body of unknown length came chunked, and goes on chunked
            // whatever the method: hyper's client frames a GET or HEAD with such a body as
            // empty and drops the body. (From an HTTP/2 client an unknown length only means
            // END_STREAM has not arrived yet, often with no body at all: left to hyper.)
            let body = request.body();
            if parts.version == Version::HTTP_11
                && !body.is_end_stream()
                && body.size_hint().exact().is_none()
            {
                request.headers_mut().insert(
                    http::header::TRANSFER_ENCODING,
                    HeaderValue::from_static("chunked"),
                );
            }
        }
    }
    if let Some(left) = grpc_left {
        request
            .headers_mut()
            .insert(GRPC_TIMEOUT, grpc_timeout_value(left));
    }
    request
}

/// `left` as a `grpc-timeout` value: milliseconds, rounded up so a live deadline never reads 0.
fn grpc_timeout_value(left: Duration) -> HeaderValue {
    let ms = left.as_micros().div_ceil(1000).clamp(1, 99_999_999);
    HeaderValue::from_str(&format!("{ms}m")).unwrap_or(HeaderValue::from_static("1m"))
}

/// A client deadline from `grpc-timeout` (`<digits><unit>`, units H M S m u n).
pub(super) fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(GRPC_TIMEOUT)?.to_str().ok()?;
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

    #[test]
    fn what_is_left_of_a_deadline_is_written_in_milliseconds_rounded_up() {
        let v = |d: Duration| grpc_timeout_value(d).to_str().unwrap().to_owned();
        assert_eq!(v(Duration::from_millis(1_700)), "1700m");
        assert_eq!(v(Duration::from_micros(1_200)), "2m");
        assert_eq!(v(Duration::from_micros(10)), "1m");
        assert_eq!(v(Duration::from_secs(200_000)), "99999999m");
    }

    fn parts(uri: &str, host: Option<&str>) -> http::request::Parts {
        let mut request = Request::builder().uri(uri);
        if let Some(host) = host {
            request = request.header(http::header::HOST, host);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn sent(target: &Target, parts: &http::request::Parts, http2: bool) -> Request<ProxyBody> {
        use http_body_util::BodyExt;
        let body = http_body_util::Empty::<bytes::Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        build_request(parts, target, body, http2, None)
    }

    #[test]
    fn http1_requests_go_in_origin_form_whatever_form_they_came_in() {
        let host = HeaderValue::from_static("shop.local");
        for uri in ["/cart?id=7", "http://shop.local/cart?id=7"] {
            let p = parts(uri, Some("shop.local"));
            let target = Target::of(&p, Some(&host), false).unwrap();
            let request = sent(&target, &p, false);
            assert_eq!(request.uri(), "/cart?id=7", "from {uri}");
            assert_eq!(request.version(), Version::HTTP_11);
        }
    }

    #[test]
    fn http2_requests_go_in_absolute_form_without_a_host_header() {
        let host = HeaderValue::from_static("shop.local:8080");
        let p = parts("/cart", Some("shop.local:8080"));
        let target = Target::of(&p, Some(&host), true).unwrap();
        let request = sent(&target, &p, true);
        assert_eq!(request.uri(), "http://shop.local:8080/cart");
        assert_eq!(request.version(), Version::HTTP_2);
        assert!(request.headers().get(http::header::HOST).is_none());
    }

    #[test]
    fn a_host_that_cannot_be_an_authority_is_refused_only_by_an_http2_pool() {
        let bad = HeaderValue::from_static("not a host");
        let p = parts("/", Some("not a host"));
        assert!(Target::of(&p, Some(&bad), true).is_err());
        let target = Target::of(&p, Some(&bad), false).unwrap();
        assert_eq!(sent(&target, &p, false).uri(), "/");
    }

    #[test]
    fn an_http1_target_meeting_an_http2_connection_gets_its_absolute_form() {
        // The pool's protocol changed while the request was under way.
        let host = HeaderValue::from_static("shop.local");
        let p = parts("/a", Some("shop.local"));
        let target = Target::of(&p, Some(&host), false).unwrap();
        let request = sent(&target, &p, true);
        assert_eq!(request.uri(), "http://shop.local/a");
        assert_eq!(request.version(), Version::HTTP_2);
    }
}
