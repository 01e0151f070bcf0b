//! Message heads: a request's or a response's head parsed by `httparse` from the connection's
//! buffer into field positions (nothing copied), with what forwarding needs decided as hyper
//! decides it: where the body ends (RFC 9112 §6.3), whether the connection stays open, whether
//! the client waits for `100 Continue`, whether it asks for an upgrade. The refusals are
//! hyper's, with its statuses: 400 for a malformed head, 431 for too many or too large fields,
//! 414 for a request target past 64 KiB.

use std::mem::MaybeUninit;
use std::ops::Range;

use http::Method;

/// Fields in one head (hyper's default).
pub const MAX_FIELDS: usize = 100;
/// A head not complete within this many bytes is refused (hyper's default buffer limit).
pub const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// The longest request target (hyper's).
pub const MAX_TARGET_BYTES: usize = u16::MAX as usize - 1;
/// The largest body length a `Content-Length` may give (hyper keeps the top two values as
/// markers).
const MAX_LENGTH: u64 = u64::MAX - 2;

/// Where a message's body ends (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLength {
    /// No body: a request without framing fields, a HEAD's answer, 1xx, 204, 304.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding` ending in `chunked`.
    Chunked,
    /// A response without framing fields (or with a transfer coding other than chunked): the
    /// body ends when the endpoint closes the connection.
    UntilClose,
}

/// Why a head was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Not HTTP/1.x as RFC 9112 writes it; the words say what.
    Malformed(&'static str),
    /// Too many fields, a field name past 64 KiB, a head past [`MAX_HEAD_BYTES`], or a
    /// `Content-Length` too large to count.
    TooLarge,
    /// A request target past [`MAX_TARGET_BYTES`].
    TargetTooLong,
    /// HTTP/2's connection preface: a client speaking HTTP/2 with prior knowledge, for the
    /// HTTP/2 server, not an HTTP/1 answer.
    Http2Preface,
}

/// What an HTTP/2 client with prior knowledge sends first (RFC 9113 §3.4).
pub const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl HeadError {
    /// The status a server answers a request head refused this way with; `None`: no HTTP/1
    /// answer (the HTTP/2 preface).
    pub fn status(self) -> Option<u16> {
        match self {
            HeadError::Malformed(_) => Some(400),
            HeadError::TooLarge => Some(431),
            HeadError::TargetTooLong => Some(414),
            HeadError::Http2Preface => None,
        }
    }
}

impl std::fmt::Display for HeadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadError::Malformed(what) => write!(f, "malformed message head: {what}"),
            HeadError::TooLarge => f.write_str("message head is too large"),
            HeadError::TargetTooLong => f.write_str("request target is too long"),
            HeadError::Http2Preface => f.write_str("the HTTP/2 connection preface"),
        }
    }
}

impl std::error::Error for HeadError {}

/// One field's name and value, as positions in the buffer the head was parsed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: Range<usize>,
    pub value: Range<usize>,
}

/// A request head; its fields are in the list given to [`parse_request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    /// Bytes of the buffer the head took, its final empty line included.
    pub len: usize,
    pub method: Method,
    pub target: Range<usize>,
    /// HTTP/1.1, not HTTP/1.0.
    pub http11: bool,
    pub body: BodyLength,
    /// The connection may carry another request after this one.
    pub keep_alive: bool,
    /// `Expect: 100-continue` from an HTTP/1.1 client.
    pub expect_continue: bool,
    /// `Upgrade` on HTTP/1.1, or CONNECT: not for the fast path.
    pub upgrade: bool,
    /// `Content-Length` fields that `Transfer-Encoding` overrides (RFC 9112 §6.1): they are
    /// not forwarded, and the connection closes after this request.
    pub length_overridden: bool,
}

/// A response head; its fields are in the list given to [`parse_response`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// Bytes of the buffer the head took, its final empty line included.
    pub len: usize,
    pub status: u16,
    /// The reason phrase, as sent (it may be empty).
    pub reason: Range<usize>,
    pub http11: bool,
    pub body: BodyLength,
    /// The endpoint will take another request on this connection.
    pub keep_alive: bool,
}

/// Parse a request head at the start of `buf`: `Ok(None)` while it is incomplete; `fields`
/// is cleared and filled with its fields in order.
pub fn parse_request(
    buf: &[u8],
    fields: &mut Vec<Field>,
) -> Result<Option<RequestHead>, HeadError> {
    parse_request_line_and_fields(buf, fields).map_err(|(error, at)| {
        // Hyper's rule: whatever failed, what is left of the buffer where it failed is HTTP/2,
        // answered with nothing, when it starts with the preface once leading CR and LF bytes
        // are skipped. Where it failed: at the head's start for what the tokenizer refuses, just
        // past the head for what is refused once the head is taken off the buffer (the target's
        // form, the framing fields).
        let rest = &buf[at.min(buf.len())..];
        let first_other = rest.iter().position(|&byte| byte != b'\r' && byte != b'\n');
        if rest[first_other.unwrap_or(rest.len())..].starts_with(HTTP2_PREFACE) {
            HeadError::Http2Preface
        } else {
            error
        }
    })
}

/// Whether the bytes that arrived since the buffer held `previous_len` may end a head (a blank
/// line, CRLF or bare LF): a head still arriving is parsed again only then, so a client that
/// trickles a long head costs one scan of it, not one parse per read (hyper's
/// `is_complete_fast`, with the same three bytes of overlap).
pub fn may_end_head(buf: &[u8], previous_len: usize) -> bool {
    let new = &buf[previous_len.saturating_sub(3).min(buf.len())..];
    new.iter().enumerate().any(|(i, &b)| {
        let rest = &new[i + 1..];
        match b {
            b'\r' => rest.starts_with(b"\n\r\n"),
            b'\n' => rest.starts_with(b"\n") || rest.starts_with(b"\r\n"),
            _ => false,
        }
    })
}

/// A refusal and the offset in the buffer hyper's would be read at when it is made.
type Refusal = (HeadError, usize);

fn parse_request_line_and_fields(
    buf: &[u8],
    fields: &mut Vec<Field>,
) -> Result<Option<RequestHead>, Refusal> {
    fields.clear();
    let mut raw = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut req, buf, &mut raw)
    {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return partial(buf).map_err(|e| (e, 0)),
        Err(httparse::Error::Token) if req.method.is_none() => {
            return Err((HeadError::Malformed("invalid method"), 0));
        }
        Err(httparse::Error::Token) => {
            return Err((HeadError::Malformed("invalid request target"), 0));
        }
        Err(error) => return Err((parse_error(error), 0)),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err((HeadError::Malformed("incomplete request line"), 0));
    };
    if target.len() > MAX_TARGET_BYTES {
        return Err((HeadError::TargetTooLong, 0));
    }
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| (HeadError::Malformed("invalid method"), 0))?;
    record_fields(buf, req.headers, fields).map_err(|e| (e, 0))?;
    // What hyper's `Uri` accepts, so both engines refuse the same targets.
    if http::Uri::try_from(target.as_bytes()).is_err() {
        return Err((HeadError::Malformed("invalid request target"), len));
    }
    let target = offset(buf, target.as_bytes())..offset(buf, target.as_bytes()) + target.len();

    let http11 = version == 1;
    let mut head = RequestHead {
        len,
        upgrade: method == Method::CONNECT,
        method,
        target,
        http11,
        body: BodyLength::Empty,
        keep_alive: http11,
        expect_continue: false,
        length_overridden: false,
    };
    let mut length: Option<u64> = None;
    let mut saw_length = false;
    let mut repeated_length = false;
    let mut transfer_coded = false;
    let mut chunked = false;
    let mut saw_close = false;
    for field in fields.iter() {
        let (name, value) = (&buf[field.name.clone()], &buf[field.value.clone()]);
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if !http11 {
                return Err((HeadError::Malformed("Transfer-Encoding in HTTP/1.0"), len));
            }
            transfer_coded = true;
            if saw_length && length.take().is_some() {
                head.length_overridden = true;
            }
            chunked = last_token_is(value, b"chunked");
            if chunked {
                head.body = BodyLength::Chunked;
            }
        } else if name.eq_ignore_ascii_case(b"content-length") {
            saw_length = true;
            if transfer_coded {
                head.length_overridden = true;
                continue;
            }
            let n = digits(value).ok_or((HeadError::Malformed("invalid Content-Length"), len))?;
            match length {
                Some(previous) if previous != n => {
                    return Err((HeadError::Malformed("differing Content-Length values"), len));
                }
                Some(_) => repeated_length = true,
                None => {
                    if n > MAX_LENGTH {
                        return Err((HeadError::TooLarge, len));
                    }
                    head.body = if n == 0 {
                        BodyLength::Empty
                    } else {
                        BodyLength::Length(n)
                    };
                    length = Some(n);
                }
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection(value, &mut head.keep_alive, &mut saw_close);
        } else if name.eq_ignore_ascii_case(b"expect") {
            // hyper's server invites only an HTTP/1.1 client's body (an HTTP/1.0 client does not
            // know the interim answer).
            head.expect_continue = http11 && value.eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            head.upgrade = http11;
        }
    }
    if transfer_coded && !chunked {
        return Err((
            HeadError::Malformed("Transfer-Encoding whose last coding is not chunked"),
            len,
        ));
    }
    if transfer_coded && saw_length {
        head.keep_alive = false;
    }
    if repeated_length || head.length_overridden {
        // What is forwarded says the length once, or not at all when the coding decides it.
        let mut kept_length = head.length_overridden;
        fields.retain(|field| {
            if !buf[field.name.clone()].eq_ignore_ascii_case(b"content-length") {
                return true;
            }
            !std::mem::replace(&mut kept_length, true)
        });
    }
    Ok(Some(head))
}

/// Parse the head of the answer to a `method` request at the start of `buf`: `Ok(None)` while
/// it is incomplete; `fields` is cleared and filled with its fields in order. Interim answers
/// (1xx but 101) are returned like any other: the caller forwards them and parses on.
pub fn parse_response(
    buf: &[u8],
    method: &Method,
    fields: &mut Vec<Field>,
) -> Result<Option<ResponseHead>, HeadError> {
    fields.clear();
    let mut raw = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let mut res = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut res, buf, &mut raw)
    {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return partial(buf),
        Err(error) => return Err(parse_error(error)),
    };
    let (Some(status), Some(version)) = (res.code, res.version) else {
        return Err(HeadError::Malformed("incomplete status line"));
    };
    if http::StatusCode::from_u16(status).is_err() {
        return Err(HeadError::Malformed("invalid status code"));
    }
    // An empty reason may not point into `buf` at all.
    let reason = match res.reason {
        Some(r) if !r.is_empty() => {
            let at = offset(buf, r.as_bytes());
            at..at + r.len()
        }
        _ => 0..0,
    };
    record_fields(buf, res.headers, fields)?;
    let http11 = version == 1;
    let mut keep_alive = http11;
    let mut saw_close = false;
    let mut transfer_coding: Option<Range<usize>> = None;
    let mut lengths = Lengths::default();
    for field in fields.iter() {
        let (name, value) = (&buf[field.name.clone()], &buf[field.value.clone()]);
        if name.eq_ignore_ascii_case(b"connection") {
            connection(value, &mut keep_alive, &mut saw_close);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_coding = Some(field.value.clone());
        } else if name.eq_ignore_ascii_case(b"content-length") {
            lengths.add(value);
        }
    }
    let body = match status {
        101 | 204 | 304 => BodyLength::Empty,
        100..=199 => BodyLength::Empty,
        _ if *method == Method::HEAD => BodyLength::Empty,
        200..=299 if *method == Method::CONNECT => BodyLength::Empty,
        _ => match transfer_coding {
            Some(_) if !http11 => {
                return Err(HeadError::Malformed("Transfer-Encoding in HTTP/1.0"));
            }
            Some(last) if last_token_is(&buf[last.clone()], b"chunked") => BodyLength::Chunked,
            Some(_) => BodyLength::UntilClose,
            None => match lengths.value()? {
                Some(n) if n > MAX_LENGTH => return Err(HeadError::TooLarge),
                Some(0) => BodyLength::Empty,
                Some(n) => BodyLength::Length(n),
                None => BodyLength::UntilClose,
            },
        },
    };
    Ok(Some(ResponseHead {
        len,
        status,
        reason,
        http11,
        body,
        keep_alive,
    }))
}

/// A response's `Content-Length` fields, each a comma-separated list that must all agree (as
/// hyper's client reads them).
#[derive(Default)]
struct Lengths {
    value: Option<u64>,
    present: bool,
    invalid: bool,
}

impl Lengths {
    fn add(&mut self, field: &[u8]) {
        self.present = true;
        if !visible(field) {
            self.invalid = true;
            return;
        }
        for part in field.split(|&b| b == b',') {
            match digits(part.trim_ascii()) {
                Some(n) if self.value.is_none_or(|v| v == n) => self.value = Some(n),
                _ => self.invalid = true,
            }
        }
    }

    fn value(&self) -> Result<Option<u64>, HeadError> {
        if self.present && (self.invalid || self.value.is_none()) {
            return Err(HeadError::Malformed("invalid Content-Length"));
        }
        Ok(self.value)
    }
}

/// An incomplete head: wait for more, unless it can no longer fit.
fn partial<T>(buf: &[u8]) -> Result<Option<T>, HeadError> {
    if buf.len() >= MAX_HEAD_BYTES {
        return Err(HeadError::TooLarge);
    }
    Ok(None)
}

fn parse_error(error: httparse::Error) -> HeadError {
    match error {
        httparse::Error::TooManyHeaders => HeadError::TooLarge,
        httparse::Error::HeaderName => HeadError::Malformed("invalid field name"),
        httparse::Error::HeaderValue => HeadError::Malformed("invalid field value"),
        httparse::Error::NewLine => HeadError::Malformed("invalid line ending"),
        httparse::Error::Status => HeadError::Malformed("invalid status"),
        httparse::Error::Token => HeadError::Malformed("invalid token"),
        httparse::Error::Version => HeadError::Malformed("invalid HTTP version"),
    }
}

/// Where `part`, a slice of `buf`, starts in it.
fn offset(buf: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - buf.as_ptr() as usize
}

fn record_fields(
    buf: &[u8],
    parsed: &[httparse::Header<'_>],
    fields: &mut Vec<Field>,
) -> Result<(), HeadError> {
    fields.reserve(parsed.len());
    for header in parsed {
        if header.name.len() >= 1 << 16 {
            return Err(HeadError::TooLarge);
        }
        let name = offset(buf, header.name.as_bytes());
        let value = offset(buf, header.value);
        fields.push(Field {
            name: name..name + header.name.len(),
            value: value..value + header.value.len(),
        });
    }
    Ok(())
}

/// A `Connection` field: `close` anywhere ends the connection after this message, whatever
/// follows; `keep-alive` keeps an HTTP/1.0 one open.
fn connection(value: &[u8], keep_alive: &mut bool, saw_close: &mut bool) {
    if *saw_close || list_has(value, b"close") {
        *saw_close = true;
        *keep_alive = false;
    } else if !*keep_alive {
        *keep_alive = list_has(value, b"keep-alive");
    }
}

/// Visible ASCII and tabs only (what `HeaderValue::to_str` accepts): the values hyper reads
/// a token list from.
pub(crate) fn visible(value: &[u8]) -> bool {
    value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
}

/// Whether the comma-separated list `value` holds `token` (any case); none in a value that is
/// not [`visible`].
pub(crate) fn list_has(value: &[u8], token: &[u8]) -> bool {
    visible(value)
        && value
            .split(|&b| b == b',')
            .any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

/// Whether the last element of the comma-separated list `value` is `token` (any case).
pub(crate) fn last_token_is(value: &[u8], token: &[u8]) -> bool {
    visible(value)
        && value
            .rsplit(|&b| b == b',')
            .next()
            .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(token))
}

/// A decimal number of one or more digits, nothing else (a `Content-Length` as hyper reads one).
pub(crate) fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}
