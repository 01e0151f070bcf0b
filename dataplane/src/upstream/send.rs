//! Sending one request on one connection, telling apart "never written, here it is back" (a
//! pooled connection that turned out dead: the request can go again, anywhere, for free) from
//! "written, maybe processed". What a response needs to hand its connection back travels with it
//! as a [`Release`]; its body is hyper's or, on the sidecar's own connections, `direct`'s.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1;

use super::direct::{self, ConnSlot, DirectBody};
use super::{BoxError, Conn, ProxyBody, StreamSlot};

/// What a response gives back to its endpoint once it has been read to the end.
pub enum Release {
    /// The HTTP/1 connection, ready for the next request.
    Http1(http1::SendRequest<ProxyBody>),
    /// The HTTP/2 stream it held.
    Http2(StreamSlot),
    /// Where the sidecar's own connection is left when the body ends and it can be reused.
    Direct(ConnSlot),
}

pub enum SendError {
    /// The connection refused the request before writing it; here it is back.
    NotSent { body: ProxyBody, error: BoxError },
    /// The request was (or may have been) written. `malformed`: the endpoint's answer broke
    /// HTTP's rules (its protocol error, not a reset).
    Sent { error: BoxError, malformed: bool },
}

/// An endpoint's answer body, from whichever connection carried it.
pub enum EndpointBody {
    Hyper(Incoming),
    Direct(DirectBody),
}

pub async fn send(
    conn: Conn,
    request: Request<ProxyBody>,
) -> Result<(Response<EndpointBody>, Release), SendError> {
    let mut error = match conn {
        Conn::Direct { conn, reused } => {
            return direct::send(conn, request, reused)
                .await
                .map(|(response, release)| (response.map(EndpointBody::Direct), release));
        }
        Conn::Http1 { mut tx, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response.map(EndpointBody::Hyper), Release::Http1(tx))),
            Err(e) => e,
        },
        Conn::Http2 { mut tx, slot, .. } => match tx.try_send_request(request).await {
            Ok(response) => return Ok((response.map(EndpointBody::Hyper), Release::Http2(slot))),
            Err(e) => e,
        },
    };
    match error.take_message() {
        Some(request) => Err(SendError::NotSent {
            body: request.into_body(),
            error: Box::new(error.into_error()),
        }),
        None => {
            let error = error.into_error();
            let malformed = error.is_parse() || error.is_parse_status();
            Err(SendError::Sent {
                error: Box::new(error),
                malformed,
            })
        }
    }
}

impl Body for EndpointBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            EndpointBody::Hyper(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(BoxError::from))),
            EndpointBody::Direct(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            EndpointBody::Hyper(body) => body.is_end_stream(),
            EndpointBody::Direct(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            EndpointBody::Hyper(body) => body.size_hint(),
            EndpointBody::Direct(body) => body.size_hint(),
        }
    }
}
