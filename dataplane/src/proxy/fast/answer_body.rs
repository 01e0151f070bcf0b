//! The answer's body on the wire, after its head, as `crate::h1::write` frames and gathers it;
//! the connection ends when the body breaks.

use std::pin::Pin;

use http::HeaderName;

use crate::h1::write::{BodyWriter, Framing};
use crate::upstream::ProxyBody;

/// Write the head in `out` and the body after it, framed as `framing` says; `trailers`: the
/// trailer names that may go to this client. `Err`: the body broke or the client went away;
/// the connection must close.
pub(super) async fn write_answer<W: tokio::io::AsyncWrite + Unpin>(
    write: &mut W,
    out: &mut Vec<u8>,
    mut body: ProxyBody,
    framing: &Framing,
    trailers: Option<&[HeaderName]>,
) -> Result<(), &'static str> {
    let mut writer = BodyWriter::new(framing, trailers.map(<[HeaderName]>::to_vec));
    let written = std::future::poll_fn(|cx| {
        writer.poll_write(Pin::new(&mut *write), Pin::new(&mut body), out, cx)
    })
    .await;
    written.map_err(|error| match error {
        crate::h1::write::WriteError::BodyBroke(_) => "the answer's body broke",
        crate::h1::write::WriteError::PeerGone(_) => "the client went away",
        crate::h1::write::WriteError::Overlong => "the answer's body ran past its length",
        crate::h1::write::WriteError::Short => "the answer's body ended short of its length",
    })
}
