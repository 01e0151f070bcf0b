//! Body framing: every way a body is framed and refused, and the same result however the bytes
//! are split across reads.

use super::body::{BodyError, Decoder};
use super::head::BodyLength;

/// Feed `pieces` one after another (carrying over what a call left unused); the body's data,
/// and whether it ended.
fn feed(length: BodyLength, pieces: &[&[u8]]) -> Result<(Vec<u8>, bool, Vec<u8>), BodyError> {
    let mut decoder = Decoder::new(length);
    let mut data = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    for piece in pieces {
        pending.extend_from_slice(piece);
        loop {
            let decoded = decoder.decode(&pending)?;
            assert!(decoded.consumed <= pending.len());
            assert!(decoded.data.end <= decoded.consumed);
            data.extend_from_slice(&pending[decoded.data.clone()]);
            pending.drain(..decoded.consumed);
            if decoded.ended {
                return Ok((data, true, decoder.trailers().to_vec()));
            }
            if decoded.consumed == 0 || pending.is_empty() {
                break;
            }
        }
    }
    Ok((data, decoder.is_done(), decoder.trailers().to_vec()))
}

/// The outcome of `wire` fed whole, and fed split at every point and byte by byte: all equal.
fn every_split(length: BodyLength, wire: &[u8]) -> Result<(Vec<u8>, bool, Vec<u8>), BodyError> {
    let whole = feed(length, &[wire]);
    for at in 0..=wire.len() {
        let (a, b) = wire.split_at(at);
        assert_eq!(feed(length, &[a, b]), whole, "split at {at} of {wire:?}");
    }
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(feed(length, &bytes), whole, "byte by byte: {wire:?}");
    whole
}

#[test]
fn a_content_length_body_ends_at_its_length() {
    let (data, ended, _) = every_split(BodyLength::Length(5), b"helloGET /next").unwrap();
    assert_eq!(data, b"hello");
    assert!(ended);
    let (data, ended, _) = every_split(BodyLength::Length(5), b"hel").unwrap();
    assert_eq!((data.as_slice(), ended), (&b"hel"[..], false));
    let mut decoder = Decoder::new(BodyLength::Length(5));
    decoder.decode(b"hel").unwrap();
    assert_eq!(decoder.remaining(), Some(2));
    assert_eq!(decoder.closed(), Err(BodyError::Incomplete));
}

#[test]
fn an_empty_body_has_ended_before_any_byte() {
    let mut decoder = Decoder::new(BodyLength::Empty);
    assert!(decoder.is_done());
    let decoded = decoder.decode(b"GET / HTTP/1.1\r\n").unwrap();
    assert_eq!((decoded.consumed, decoded.ended), (0, true));
}

#[test]
fn a_close_delimited_body_takes_everything_until_the_close() {
    let (data, ended, _) = every_split(BodyLength::UntilClose, b"all of it").unwrap();
    assert_eq!((data.as_slice(), ended), (&b"all of it"[..], false));
    let mut decoder = Decoder::new(BodyLength::UntilClose);
    assert_eq!(decoder.closed(), Ok(()));
    assert!(decoder.is_done());
}

#[test]
fn a_chunked_body_yields_its_data_skips_extensions_and_keeps_trailers() {
    let wire = b"5;name=value\r\nhello\r\n1A \t\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Sum: 9\r\nX-B: 2\r\n\r\nnext";
    let (data, ended, trailers) = every_split(BodyLength::Chunked, wire).unwrap();
    assert_eq!(data, b"helloabcdefghijklmnopqrstuvwxyz");
    assert!(ended);
    assert_eq!(trailers, b"X-Sum: 9\r\nX-B: 2\r\n");
    let (data, ended, trailers) = every_split(BodyLength::Chunked, b"0\r\n\r\n").unwrap();
    assert!(data.is_empty() && ended && trailers.is_empty());
    // Not ended yet: waiting for the final CRLF.
    let (_, ended, _) = every_split(BodyLength::Chunked, b"3\r\nabc\r\n0\r\n").unwrap();
    assert!(!ended);
}

#[test]
fn chunked_framing_refusals() {
    let invalid = [
        &b"x\r\n"[..],
        b"\r\n",
        b"-1\r\n",
        b"1 2\r\n",
        b"1\n",
        b"1\rx",
        b"3\r\nabcX",
        b"3\r\nabc\rX",
        b"1;a\nb\r\n",
        b"f0000000000000003\r\n",
        b"0\r\nX-A: 1\rX",
        b"0\r\n\rX",
        b"0\r\nbad trailer\r\n\r\n",
        b"0\r\nX: a\r\n b\r\n\r\n",
    ];
    for wire in invalid {
        assert!(
            matches!(
                every_split(BodyLength::Chunked, wire),
                Err(BodyError::Invalid(_))
            ),
            "{:?}",
            String::from_utf8_lossy(wire)
        );
    }
}

#[test]
fn chunked_limits_are_hypers() {
    // Extensions: 16 KiB across the whole body, not per chunk.
    let ext = "a".repeat(9 * 1024);
    let two = format!("1;{ext}\r\nx\r\n1;{ext}\r\ny\r\n0\r\n\r\n");
    assert!(feed(BodyLength::Chunked, &[two.as_bytes()]).is_err());
    let one = format!("1;{ext}\r\nx\r\n0\r\n\r\n");
    assert!(feed(BodyLength::Chunked, &[one.as_bytes()]).unwrap().1);
    // Trailers: 100 fields, 16 KiB.
    let fields = |n: usize| (0..n).map(|i| format!("X-{i}: v\r\n")).collect::<String>();
    let ok = format!("0\r\n{}\r\n", fields(100));
    assert!(feed(BodyLength::Chunked, &[ok.as_bytes()]).unwrap().1);
    let many = format!("0\r\n{}\r\n", fields(101));
    assert!(feed(BodyLength::Chunked, &[many.as_bytes()]).is_err());
    let big = format!("0\r\nX: {}\r\n\r\n", "v".repeat(16 * 1024));
    assert!(feed(BodyLength::Chunked, &[big.as_bytes()]).is_err());
}

#[test]
fn a_chunked_body_cut_short_is_incomplete() {
    for wire in [&b""[..], b"5\r\nhel", b"5\r\nhello\r\n", b"0\r\nX: 1\r\n"] {
        let mut decoder = Decoder::new(BodyLength::Chunked);
        decoder.decode(wire).unwrap();
        assert_eq!(decoder.closed(), Err(BodyError::Incomplete), "{wire:?}");
    }
}
