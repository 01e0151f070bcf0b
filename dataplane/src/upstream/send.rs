//! Sending one request on one connection, telling apart "never written, here it is back" (a
//! pooled connection that turned out dead: the request can go again, anywhere, for free) from
//! "written, maybe processed". What a response needs to hand its connection back travels with it
//! as a [`Release`].

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1;

use super::{Conn, ProxyBody, StreamSlot};

/// What a response gives back to its endpoint once it has been read to the end.
pub enum Release {
    /// The HTTP/1 connection, ready for the next request.
    Http1(http1::SendRequest<ProxyBody>),
    /// The HTTP/2 stream it held.
    Http2(StreamSlot),
}

pub enum SendError {
    /// The connection refused the request before writing it; here it is back.
    NotSent {
        request: Box<Request<ProxyBody>>,
        error: hyper::Error,
    },
    /// The request was (or may have been) written.
    Sent(hyper::Error),
}

pub async fn send(
    conn: Conn,
    request: Request<ProxyBody>,
) -> Result<(Response<Incoming>, Release), SendError> {
    let mut error = match conn {
        Conn::Http1 { mut tx, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response, Release::Http1(tx))),
            Err(e) => e,
        },
        Conn::Http2 { mut tx, slot, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response, Release::Http2(slot))),
            Err(e) => e,
        },
    };
    match error.take_message() {
        Some(request) => Err(SendError::NotSent {
            request: Box::new(request),
            error: error.into_error(),
        }),
        None => Err(SendError::Sent(error.into_error())),
    }
}
