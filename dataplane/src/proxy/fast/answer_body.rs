//! The answer's body on the wire, after its head: as the head's framing says (a length held
//! to exactly, chunks with the declared trailers a client accepts, or bytes until the close),
//! small pieces gathered into one write, large ones written from where they lie beside what is
//! gathered (one vectored write, not copied), and the connection ended when the body breaks.

use bytes::Buf;
use futures_util::FutureExt;
use http::HeaderName;
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

use super::response_head::{Framing, write_trailers};
use crate::h1::encode::{CHUNK_END, chunk_head};
use crate::upstream::ProxyBody;

/// Answer bytes gathered before they are written.
const WRITE_GATHER: usize = 16 * 1024;
/// Body data this large is written from where it lies, beside what is gathered, not copied.
const WRITE_IN_PLACE: usize = 4 * 1024;

/// Write the head in `out` and the body after it, framed as `framing` says; `trailers`: the
/// trailer names that may go to this client. `Err`: the body broke or the client went away;
/// the connection must close.
pub(super) async fn write_answer(
    write: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    mut body: ProxyBody,
    framing: &Framing,
    trailers: Option<&[HeaderName]>,
) -> Result<(), &'static str> {
    let chunked = matches!(framing, Framing::Chunked(_));
    // A body said to have a length gets exactly that many bytes out (hyper's length encoder):
    // more are cut off and end the connection, fewer end it too.
    let mut length_left = match framing {
        Framing::Length(n) => Some(*n),
        _ => None,
    };
    if *framing != Framing::Empty {
        let mut last_trailers = None;
        loop {
            let frame = match body.frame().now_or_never() {
                Some(frame) => frame,
                None => {
                    flush(write, out).await?;
                    body.frame().await
                }
            };
            let frame = match frame {
                None => break,
                Some(Err(_)) => return Err("the answer's body broke"),
                Some(Ok(frame)) => frame,
            };
            let data = match frame.into_data() {
                Ok(data) => data,
                Err(frame) => {
                    last_trailers = frame.into_trailers().ok();
                    continue;
                }
            };
            if data.is_empty() {
                continue;
            }
            let mut data = data;
            let mut overlong = false;
            if let Some(left) = length_left.as_mut() {
                if data.len() as u64 > *left {
                    data.truncate(*left as usize);
                    overlong = true;
                }
                *left -= data.len() as u64;
            }
            if chunked {
                chunk_head(data.len(), out);
            }
            if data.len() >= WRITE_IN_PLACE {
                // What is gathered and the data in one vectored write, the data not copied.
                let mut both = Buf::chain(&out[..], data);
                let written = write.write_all_buf(&mut both).await;
                out.clear();
                written.map_err(|_| "the client went away")?;
            } else {
                out.extend_from_slice(&data);
            }
            if chunked {
                out.extend_from_slice(CHUNK_END);
            }
            if overlong {
                flush(write, out).await?;
                return Err("the answer's body ran past its length");
            }
            if out.len() >= WRITE_GATHER {
                flush(write, out).await?;
            }
        }
        if length_left.is_some_and(|left| left > 0) {
            flush(write, out).await?;
            return Err("the answer's body ended short of its length");
        }
        if chunked {
            out.extend_from_slice(b"0\r\n");
            if let (Some(names), Some(last)) = (trailers, last_trailers.as_ref()) {
                write_trailers(names, last, out);
            }
            out.extend_from_slice(b"\r\n");
        }
    }
    drop(body);
    flush(write, out).await
}

async fn flush(write: &mut OwnedWriteHalf, out: &mut Vec<u8>) -> Result<(), &'static str> {
    if out.is_empty() {
        return Ok(());
    }
    let written = write.write_all(out).await;
    out.clear();
    written.map_err(|_| "the client went away")
}
