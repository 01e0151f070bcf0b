//! Body framing: a state machine fed whatever bytes arrived, that says how many it used and
//! which of them are body data (a range of the input, so data is never copied to be found),
//! until the body ends. Content-Length, chunked (extensions skipped, trailers kept and checked)
//! and close-delimited bodies, with hyper's limits and refusals: a chunk size that overflows or
//! is not hex, anything but CRLF where the framing needs it, a bare LF in an extension, more
//! than 16 KiB of extensions in one body, trailers past 16 KiB or 100 fields, a body cut short.

use std::ops::Range;

use super::head::{BodyLength, MAX_FIELDS};

/// Extension bytes allowed across one chunked body (hyper's limit).
const MAX_EXTENSION_BYTES: u64 = 16 * 1024;
/// Trailer section bytes allowed (hyper's limit).
const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// Why a body's framing was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// The framing is not RFC 9112's; the words say where.
    Invalid(&'static str),
    /// The connection closed before the body's end.
    Incomplete,
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Invalid(what) => write!(f, "invalid body framing: {what}"),
            BodyError::Incomplete => f.write_str("the connection closed before the body's end"),
        }
    }
}

impl std::error::Error for BodyError {}

/// What one call to [`Decoder::decode`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Input bytes used (framing and data); the rest belongs to what follows.
    pub consumed: usize,
    /// Body data among them (empty when there was none).
    pub data: Range<usize>,
    /// The body ended with these input bytes.
    pub ended: bool,
}

/// Where a chunked body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Before a chunk size's first digit.
    Start,
    Size,
    /// Blanks after the size.
    SizeBlank,
    Extension,
    /// CR of the size line seen.
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// After the last chunk's size line, or a trailer field's line: a CR, or a trailer field.
    LineStart,
    Trailer,
    TrailerLf,
    EndLf,
}

/// A body's framing, fed bytes as they arrive.
#[derive(Clone, Debug)]
pub struct Decoder {
    kind: Kind,
    /// A chunked body's trailer section as it arrived (every line with its CRLF, without the
    /// final empty line).
    trailers: Vec<u8>,
}

#[derive(Clone, Debug)]
enum Kind {
    Length(u64),
    Chunked {
        at: Chunk,
        /// The chunk's size while reading it, then what is left of its data.
        size: u64,
        extension_bytes: u64,
        trailer_fields: usize,
    },
    UntilClose,
    Done,
}

impl Decoder {
    pub fn new(length: BodyLength) -> Self {
        let kind = match length {
            BodyLength::Empty | BodyLength::Length(0) => Kind::Done,
            BodyLength::Length(n) => Kind::Length(n),
            BodyLength::Chunked => Kind::Chunked {
                at: Chunk::Start,
                size: 0,
                extension_bytes: 0,
                trailer_fields: 0,
            },
            BodyLength::UntilClose => Kind::UntilClose,
        };
        Self {
            kind,
            trailers: Vec::new(),
        }
    }

    /// The body has ended (and nothing more of it is to be read).
    pub fn is_done(&self) -> bool {
        matches!(self.kind, Kind::Done)
    }

    /// Bytes of data still to come when the length is known (Content-Length).
    pub fn remaining(&self) -> Option<u64> {
        match self.kind {
            Kind::Length(n) => Some(n),
            Kind::Done => Some(0),
            _ => None,
        }
    }

    /// The trailer section of a chunked body that has ended, as it arrived (fields and their
    /// CRLFs, without the final empty line); empty when there was none.
    pub fn trailers(&self) -> &[u8] {
        if self.is_done() { &self.trailers } else { &[] }
    }

    /// Feed `input`, the bytes after the ones used so far. Returns at the first data run, at
    /// the body's end, or when `input` is used up, so one call finds at most one data range.
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, BodyError> {
        match &mut self.kind {
            Kind::Done => Ok(Decoded {
                ended: true,
                ..Decoded::default()
            }),
            Kind::UntilClose => Ok(Decoded {
                consumed: input.len(),
                data: 0..input.len(),
                ended: false,
            }),
            Kind::Length(left) => {
                let take = clamp(*left, input.len());
                *left -= take as u64;
                let ended = *left == 0;
                if ended {
                    self.kind = Kind::Done;
                }
                Ok(Decoded {
                    consumed: take,
                    data: 0..take,
                    ended,
                })
            }
            Kind::Chunked { .. } => self.decode_chunked(input),
        }
    }

    /// The connection closed after everything fed so far.
    pub fn closed(&mut self) -> Result<(), BodyError> {
        match self.kind {
            Kind::UntilClose | Kind::Done => {
                self.kind = Kind::Done;
                Ok(())
            }
            _ => Err(BodyError::Incomplete),
        }
    }

    fn decode_chunked(&mut self, input: &[u8]) -> Result<Decoded, BodyError> {
        let trailers = &mut self.trailers;
        let Kind::Chunked {
            at,
            size,
            extension_bytes,
            trailer_fields,
        } = &mut self.kind
        else {
            return Ok(Decoded::default());
        };
        let mut i = 0;
        while i < input.len() {
            if *at == Chunk::Data {
                let take = clamp(*size, input.len() - i);
                *size -= take as u64;
                if *size == 0 {
                    *at = Chunk::DataCr;
                }
                return Ok(Decoded {
                    consumed: i + take,
                    data: i..i + take,
                    ended: false,
                });
            }
            let byte = input[i];
            i += 1;
            *at = match (*at, byte) {
                (Chunk::Start, _) => {
                    let digit = hex(byte).ok_or(BodyError::Invalid("chunk size is not hex"))?;
                    *size = u64::from(digit);
                    Chunk::Size
                }
                (Chunk::Size, b'\t' | b' ') => Chunk::SizeBlank,
                (Chunk::Size | Chunk::SizeBlank, b';') => Chunk::Extension,
                (Chunk::Size | Chunk::SizeBlank, b'\r') => Chunk::SizeLf,
                (Chunk::Size, _) => {
                    let digit = hex(byte).ok_or(BodyError::Invalid("chunk size is not hex"))?;
                    *size = size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(u64::from(digit)))
                        .ok_or(BodyError::Invalid("chunk size overflows"))?;
                    Chunk::Size
                }
                (Chunk::SizeBlank, b'\t' | b' ') => Chunk::SizeBlank,
                (Chunk::SizeBlank, _) => {
                    return Err(BodyError::Invalid("chunk size line has text after blanks"));
                }
                (Chunk::Extension, b'\r') => Chunk::SizeLf,
                (Chunk::Extension, b'\n') => {
                    return Err(BodyError::Invalid("chunk extension holds a bare LF"));
                }
                (Chunk::Extension, _) => {
                    *extension_bytes += 1;
                    if *extension_bytes >= MAX_EXTENSION_BYTES {
                        return Err(BodyError::Invalid("chunk extensions past 16 KiB"));
                    }
                    Chunk::Extension
                }
                (Chunk::SizeLf, b'\n') if *size == 0 => Chunk::LineStart,
                (Chunk::SizeLf, b'\n') => Chunk::Data,
                (Chunk::SizeLf, _) => return Err(BodyError::Invalid("chunk size line without LF")),
                (Chunk::DataCr, b'\r') => Chunk::DataLf,
                (Chunk::DataCr, _) => return Err(BodyError::Invalid("chunk data without CR")),
                (Chunk::DataLf, b'\n') => Chunk::Start,
                (Chunk::DataLf, _) => return Err(BodyError::Invalid("chunk data without LF")),
                (Chunk::LineStart, b'\r') => Chunk::EndLf,
                (Chunk::LineStart | Chunk::Trailer, _) => {
                    push_trailer(trailers, byte)?;
                    if byte == b'\r' {
                        Chunk::TrailerLf
                    } else {
                        Chunk::Trailer
                    }
                }
                (Chunk::TrailerLf, b'\n') => {
                    if *trailer_fields >= MAX_FIELDS {
                        return Err(BodyError::Invalid("more than 100 trailer fields"));
                    }
                    *trailer_fields += 1;
                    push_trailer(trailers, byte)?;
                    Chunk::LineStart
                }
                (Chunk::TrailerLf, _) => return Err(BodyError::Invalid("trailer line without LF")),
                (Chunk::EndLf, b'\n') => {
                    check_trailers(trailers, *trailer_fields)?;
                    self.kind = Kind::Done;
                    return Ok(Decoded {
                        consumed: i,
                        data: i..i,
                        ended: true,
                    });
                }
                (Chunk::EndLf, _) => return Err(BodyError::Invalid("last chunk without LF")),
                (Chunk::Data, _) => Chunk::Data,
            };
        }
        Ok(Decoded {
            consumed: i,
            data: i..i,
            ended: false,
        })
    }
}

/// `left` bytes wanted, `available` there: how many to take.
fn clamp(left: u64, available: usize) -> usize {
    usize::try_from(left).map_or(available, |left| left.min(available))
}

fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

fn push_trailer(trailers: &mut Vec<u8>, byte: u8) -> Result<(), BodyError> {
    trailers.push(byte);
    if trailers.len() >= MAX_TRAILER_BYTES {
        return Err(BodyError::Invalid("trailers past 16 KiB"));
    }
    Ok(())
}

/// The trailer section must be fields as a head's are (hyper parses them with `httparse` too).
fn check_trailers(trailers: &[u8], count: usize) -> Result<(), BodyError> {
    if trailers.is_empty() {
        return Ok(());
    }
    let mut section = Vec::with_capacity(trailers.len() + 2);
    section.extend_from_slice(trailers);
    section.extend_from_slice(b"\r\n");
    let mut fields = vec![httparse::EMPTY_HEADER; count];
    match httparse::parse_headers(&section, &mut fields) {
        Ok(httparse::Status::Complete(_)) => Ok(()),
        _ => Err(BodyError::Invalid("malformed trailer field")),
    }
}
