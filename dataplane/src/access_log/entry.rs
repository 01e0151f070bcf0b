//! One access log line: the [`Entry`] the request path hands over (cheap to make: nothing is
//! formatted, and the head's parts are shared by reference count, not copied, except the path)
//! and its JSON form, made on the writer thread. Of a request only its method, authority, path
//! and protocol are kept: never its query string, headers or body, where secrets travel.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, Version};
use serde::Serialize;

/// One finished request, as the access log records it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// When the request arrived (wall clock).
    pub start: SystemTime,
    pub pool: Arc<str>,
    pub method: Method,
    /// `Host` (or the URI's authority), as the client sent it.
    pub authority: Option<HeaderValue>,
    /// The path, without its query string.
    pub path: String,
    pub version: Version,
    /// The status the client got; 0 when it left before an answer.
    pub status: u16,
    /// `x-rollcall-reason` of an answer the sidecar made itself.
    pub reason: Option<&'static str>,
    /// The endpoint that answered, else the last one tried.
    pub endpoint: Option<SocketAddr>,
    /// Tries made (a dead pooled connection retried for free is not one).
    pub tries: u32,
    /// From arrival to the end of the response (or to the client leaving).
    pub duration: Duration,
    /// From arrival to the endpoint's response headers, when an endpoint answered.
    pub first_byte: Option<Duration>,
    /// Body bytes received from the client.
    pub request_bytes: u64,
    /// Body bytes sent to the client.
    pub response_bytes: u64,
    pub end: End,
}

/// How the response ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Sent whole.
    Complete,
    /// The body broke off (the endpoint's body failed or stalled).
    ResponseError,
    /// The client left before the end (or before any answer).
    ClientGone,
    /// An upgraded connection (a WebSocket) that ran as a tunnel until a side closed it; the
    /// bytes are what went each way through it.
    Tunnel,
}

/// The JSON object of one line.
#[derive(Serialize)]
struct Line<'a> {
    start_time: String,
    pool: &'a str,
    method: &'a str,
    authority: Option<Cow<'a, str>>,
    path: &'a str,
    protocol: &'static str,
    status: u16,
    reason: Option<&'static str>,
    endpoint: Option<SocketAddr>,
    tries: u32,
    duration_ms: f64,
    first_byte_ms: Option<f64>,
    request_bytes: u64,
    response_bytes: u64,
    end: &'static str,
}

impl End {
    pub fn label(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::ResponseError => "response-error",
            Self::ClientGone => "client-gone",
            Self::Tunnel => "tunnel",
        }
    }
}

impl Entry {
    /// Append this entry's JSON line, newline included, to `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let line = Line {
            start_time: humantime::format_rfc3339_millis(self.start).to_string(),
            pool: &self.pool,
            method: self.method.as_str(),
            authority: self.authority.as_ref().map(host_only),
            path: &self.path,
            protocol: protocol(self.version),
            status: self.status,
            reason: self.reason,
            endpoint: self.endpoint,
            tries: self.tries,
            duration_ms: millis(self.duration),
            first_byte_ms: self.first_byte.map(millis),
            request_bytes: self.request_bytes,
            response_bytes: self.response_bytes,
            end: self.end.label(),
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.push(b'\n');
        Ok(())
    }
}

/// The path of a request target, never its query.
pub fn path_of(uri: &http::Uri) -> String {
    uri.path().to_owned()
}

/// An authority without the user information an absolute-form URI may carry.
fn host_only(value: &HeaderValue) -> Cow<'_, str> {
    let text = String::from_utf8_lossy(value.as_bytes());
    match text {
        Cow::Borrowed(text) => Cow::Borrowed(text.rsplit('@').next().unwrap_or(text)),
        Cow::Owned(text) => Cow::Owned(text.rsplit('@').next().unwrap_or(&text).to_owned()),
    }
}

fn protocol(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP",
    }
}

/// Milliseconds with microsecond resolution.
fn millis(duration: Duration) -> f64 {
    duration.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            start: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            pool: "web".into(),
            method: Method::POST,
            authority: Some(HeaderValue::from_static("shop.example:8080")),
            path: path_of(&"/cart/items?token=secret".parse().expect("a URI")),
            version: Version::HTTP_11,
            status: 503,
            reason: Some("upstream-connect-failure"),
            endpoint: Some("10.0.0.7:8080".parse().expect("an address")),
            tries: 2,
            duration: Duration::from_micros(12_345),
            first_byte: None,
            request_bytes: 17,
            response_bytes: 80,
            end: End::Complete,
        }
    }

    fn parsed(entry: &Entry) -> serde_json::Value {
        let mut out = Vec::new();
        entry.write_line(&mut out).expect("serializes");
        assert_eq!(out.last(), Some(&b'\n'), "one line each");
        assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1);
        serde_json::from_slice(&out).expect("a JSON object")
    }

    #[test]
    fn a_line_has_every_field_and_no_query_string() {
        let line = parsed(&entry());
        assert_eq!(
            line,
            serde_json::json!({
                "start_time": "2023-11-14T22:13:20.123Z",
                "pool": "web",
                "method": "POST",
                "authority": "shop.example:8080",
                "path": "/cart/items",
                "protocol": "HTTP/1.1",
                "status": 503,
                "reason": "upstream-connect-failure",
                "endpoint": "10.0.0.7:8080",
                "tries": 2,
                "duration_ms": 12.345,
                "first_byte_ms": null,
                "request_bytes": 17,
                "response_bytes": 80,
                "end": "complete",
            })
        );
    }

    #[test]
    fn user_information_in_an_authority_is_left_out() {
        let mut e = entry();
        e.authority = Some(HeaderValue::from_static("user:password@shop.example"));
        assert_eq!(parsed(&e)["authority"], "shop.example");
    }

    #[test]
    fn text_that_would_break_the_line_is_escaped() {
        let mut e = entry();
        e.path = "/a\"b\n{}".into();
        e.version = Version::HTTP_2;
        e.first_byte = Some(Duration::from_micros(1500));
        let line = parsed(&e);
        assert_eq!(line["path"], "/a\"b\n{}");
        assert_eq!(line["protocol"], "HTTP/2");
        assert_eq!(line["first_byte_ms"], 1.5);
    }
}
