//! The request as it goes to an endpoint: the URI in the form each protocol wants (checked once,
//! before any try, so a bad one is the client's 400 and never an endpoint's failure), and the
//! client's own deadline from `grpc-timeout`, read on the way in and rewritten on every try to
//! what is left of it, so the endpoint of a retry knows how long the client still waits.

use std::time::Duration;

use http::header::HeaderValue;
use http::{HeaderMap, HeaderName, Request, Uri, Version};

use crate::upstream::ProxyBody;

const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// Where the request goes, in both URI forms, checked before the first try.
#[derive(Clone, Debug)]
pub(super) struct Target {
    /// Origin form, for HTTP/1.1.
    origin: Uri,
    /// Absolute form, for HTTP/2; `None` when the host cannot make one.
    absolute: Option<Uri>,
}

impl Target {
    /// `Err` is why the request cannot be forwarded at all (the client's fault): a target that
    /// is not a path, or, for an HTTP/2 pool, a host that cannot be an authority.
    pub(super) fn of(
        parts: &http::request::Parts,
        host: Option<&HeaderValue>,
        http2: bool,
    ) -> Result<Self, String> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let origin = Uri::try_from(path).map_err(|e| format!("bad request target: {e}"))?;
        let authority = host.and_then(|h| h.to_str().ok()).unwrap_or("localhost");
        let absolute = Uri::builder()
            .scheme("http")
            .authority(authority)
            .path_and_query(path)
            .build();
        match absolute {
            Ok(absolute) => Ok(Self {
                origin,
                absolute: Some(absolute),
            }),
            Err(e) if http2 => Err(format!("cannot build the upstream URI: {e}")),
            Err(_) => Ok(Self {
                origin,
                absolute: None,
            }),
        }
    }
}

/// The upstream request: origin-form URI on an HTTP/1.1 connection, absolute URI on an HTTP/2
/// one; `grpc_left` is the client's remaining deadline when it sent one.
pub(super) fn build_request(
    parts: &http::request::Parts,
    target: &Target,
    body: ProxyBody,
    http2: bool,
    grpc_left: Option<Duration>,
) -> Request<ProxyBody> {
    let mut request = Request::new(body);
    *request.method_mut() = parts.method.clone();
    *request.headers_mut() = parts.headers.clone();
    match (&target.absolute, http2) {
        (Some(absolute), true) => {
            *request.uri_mut() = absolute.clone();
            *request.version_mut() = Version::HTTP_2;
            request.headers_mut().remove(http::header::HOST);
        }
        _ => {
            *request.uri_mut() = target.origin.clone();
            *request.version_mut() = Version::HTTP_11;
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
}
