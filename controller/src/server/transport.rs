//! The roster port's HTTP/2 connections, served by hyper directly instead of through
//! `tonic::transport::Server`, for one setting tonic does not expose: how much a stream may
//! queue for sending. h2 keeps every queued DATA frame in a per-connection slab that never
//! shrinks, and with hyper's default (400 KiB per stream) a sidecar's first roster, 10,000
//! endpoints in parts, queued whole: under a 1,000-sidecar fleet those slabs alone held 20–79 MB.
//! Bounding the send buffer bounds it; flow control does the rest. Request bodies reach tonic
//! in pieces of at most 1 KiB (`in_small_pieces`), which bounds its per-stream decode buffer.
//! Every request passes the connection's `gate` before the service sees it, and its body is
//! checked against its method's message limit as it arrives. A connection serves at most
//! `MAX_STREAMS` streams at once (a sidecar needs two), and one on which nothing
//! authenticates within `UNAUTHENTICATED_CONNECTION_TIMEOUT`, that the gate throttles, or that
//! reached `MAX_CONNECTION_AGE` (jittered) is closed, its streams ended. Accepting, TLS handshakes (`tls::incoming`) and the service are the caller's; this
//! owns the per-connection settings, the peer address tonic's `remote_addr()` reads, and a
//! graceful close of every connection on shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyStream, StreamBody};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tonic::service::Routes;
use tonic::transport::server::TcpConnectInfo;

use super::frame_limit::SizeGuarded;
use super::gate::{Gate, MAX_CONNECTION_AGE, UNAUTHENTICATED_CONNECTION_TIMEOUT};

/// What one stream may have queued for sending before it waits for the socket: a few roster
/// parts (about 3 KB each), so a roster of any size flows but never queues whole.
const MAX_SEND_BUFFER: usize = 32 * 1024;
/// How much a sidecar may send on one stream, and on one connection (a Watch and a
/// ReportChanges stream), before the controller has read it. While a restarted controller
/// ingests a fleet's complete reports, every connection fills its window, and h2 keeps each
/// queued frame in a slab that never shrinks, so the window is paid per connection for good.
/// Only reports and acknowledgements flow this way (rosters go the other way, under the
/// sidecar's window), so one full frame per stream (16 KiB, the largest frame every peer must
/// accept) is enough. Under 1,000 sidecars (`bench/fleet.sh`): hyper's 1 MiB gave 121-128
/// MiB RSS, 64/128 KiB 113-118, 16/32 KiB 106-110 with resync 2.8-3.9 s (3.2-6.6 s at 64/128;
/// the 100-pool scenario 1.6-1.8 s against 1.2). An earlier measurement that found smaller
/// windows slowing resync was the simulated sidecars' own doing: they held back reporting a
/// roster received until their reports were sent.
const STREAM_WINDOW: u32 = 16 * 1024;
const CONNECTION_WINDOW: u32 = 32 * 1024;
/// Streams one connection may have open at once: a sidecar holds a Watch and a
/// ReportChanges stream, and briefly a third while one replaces another. h2 refuses more with
/// REFUSED_STREAM (hyper's default is 200, each of which could hold a decode buffer).
const MAX_STREAMS: u32 = 4;
/// Pings on an idle connection, and how long an answer may take before it is closed.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest piece of a request body tonic is handed at once.
const BODY_PIECE: usize = 1024;

/// `body` with every DATA frame split into pieces of at most `BODY_PIECE` bytes (zero-copy;
/// empty DATA frames, which carry nothing, are dropped). tonic copies what it is handed into a
/// per-stream buffer that stays at its high-water mark for the life of the stream; a sidecar's
/// report stream carries bursts of messages in frames of up to 16 KiB, so whole frames grew
/// that buffer to 16 KiB per sidecar. In pieces, it holds one message and one piece at most.
fn in_small_pieces<B>(body: B) -> UnsyncBoxBody<Bytes, B::Error>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Send,
{
    let pieces = BodyStream::new(body).flat_map(|frame| {
        // A DATA frame's bytes to cut up, or the frame (trailers) or error to pass on as is.
        let (mut data, other) = match frame.map(Frame::into_data) {
            Ok(Ok(data)) => (data, None),
            Ok(Err(frame)) => (Bytes::new(), Some(Ok(frame))),
            Err(error) => (Bytes::new(), Some(Err(error))),
        };
        let cut = std::iter::from_fn(move || {
            let n = data.len().min(BODY_PIECE);
            (n > 0).then(|| Ok(Frame::data(data.split_to(n))))
        });
        futures_util::stream::iter(cut.chain(other))
    });
    UnsyncBoxBody::new(StreamBody::new(pieces))
}

/// `age`, moved by a random amount of up to a tenth either way.
pub(crate) fn jittered(age: Duration) -> Duration {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(0u8);
    let tenth = age / 10;
    let offset = Duration::from_nanos(random % (2 * tenth.as_nanos().max(1) as u64));
    age - tenth + offset
}

/// The HTTP/2 settings of every roster connection.
fn builder() -> hyper::server::conn::http2::Builder<TokioExecutor> {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .max_send_buf_size(MAX_SEND_BUFFER)
        .max_concurrent_streams(MAX_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW);
    builder
}

/// Serve `routes` on every connection `incoming` yields (each with its peer's address) until
/// `shutdown` resolves; then stop accepting, close every connection gracefully (streams in
/// flight finish; the service ends its own long streams) and return once all are gone.
pub async fn serve<I, IO>(
    incoming: I,
    routes: Routes,
    gate: Arc<Gate>,
    shutdown: impl Future<Output = ()>,
) where
    I: Stream<Item = super::tls::Accepted<IO>>,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let builder = builder();
    let (closing_tx, closing_rx) = watch::channel(false);
    // Boxed so it can be dropped before the drain: that closes the listener, and new clients
    // are refused at once instead of waiting on a port nobody serves.
    let mut incoming = Box::pin(incoming);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer, slot) = tokio::select! {
            () = &mut shutdown => break,
            next = incoming.next() => match next {
                Some(accepted) => accepted,
                None => break,
            },
        };
        tokio::spawn(connection(
            builder.clone(),
            io,
            peer,
            routes.clone(),
            Arc::new(gate.connection(peer, slot)),
            closing_rx.clone(),
        ));
    }
    drop(incoming);
    let _ = closing_tx.send(true);
    drop(closing_rx);
    closing_tx.closed().await;
}

/// One connection, until the peer goes or `closing` turns true and its streams are done.
async fn connection<IO>(
    builder: hyper::server::conn::http2::Builder<TokioExecutor>,
    io: IO,
    peer: Option<SocketAddr>,
    routes: Routes,
    gate: Arc<super::gate::ConnectionGate>,
    mut closing: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let info = TcpConnectInfo {
        local_addr: None,
        remote_addr: peer,
    };
    let admission = gate.clone();
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(info.clone());
        let mut routes = routes.clone();
        let gate = admission.clone();
        async move {
            // The headers alone decide; an unauthenticated request is answered with its body
            // unread (dropping it resets the stream, so its sender stops).
            match gate.admit(request.headers()).await {
                Ok(admitted) => request.extensions_mut().insert(admitted),
                Err(status) => return Ok(status.into_http()),
            };
            let limit = gate.message_limit(request.uri().path());
            let counted = gate.clone();
            let request = request.map(|body| {
                SizeGuarded::new(in_small_pieces(body), limit, move || {
                    counted.refused_message();
                })
            });
            // Routes (an axum router) is always ready; its error type is Infallible.
            let response = tonic::codegen::Service::call(&mut routes, request).await;
            Ok::<_, Infallible>(match response {
                Ok(response) => response,
                Err(never) => match never {},
            })
        }
    });
    let connection = builder.serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    let mut closing_seen = false;
    let mut refused_seen = false;
    let unauthenticated = tokio::time::sleep(UNAUTHENTICATED_CONNECTION_TIMEOUT);
    let mut unauthenticated = std::pin::pin!(unauthenticated);
    let mut timer_seen = false;
    let aged = tokio::time::sleep(jittered(MAX_CONNECTION_AGE));
    let mut aged = std::pin::pin!(aged);
    let mut aged_seen = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!(?peer, %error, "roster connection ended with an error");
                }
                return;
            }
            changed = closing.wait_for(|c| *c), if !closing_seen => {
                closing_seen = true;
                if changed.is_ok() {
                    connection.as_mut().graceful_shutdown();
                }
            }
            () = gate.closing(), if !refused_seen => {
                refused_seen = true;
                tracing::debug!(?peer, "closing a roster connection: its gate asked to (refused, or aged)");
                connection.as_mut().graceful_shutdown();
            }
            () = &mut aged, if !aged_seen => {
                aged_seen = true;
                tracing::debug!(?peer, "closing a roster connection at its maximum age");
                // Ends its streams too (they watch the gate), so the graceful close completes.
                gate.close();
            }
            () = &mut unauthenticated, if !timer_seen => {
                timer_seen = true;
                if !gate.authenticated() {
                    tracing::debug!(?peer, "closing a roster connection that never authenticated");
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::BodyExt;

    use super::*;

    #[test]
    fn connection_ages_spread_over_a_tenth_either_way() {
        let ages: Vec<Duration> = (0..200).map(|_| jittered(MAX_CONNECTION_AGE)).collect();
        let (low, high) = (MAX_CONNECTION_AGE * 9 / 10, MAX_CONNECTION_AGE * 11 / 10);
        assert!(ages.iter().all(|a| *a >= low && *a < high), "{ages:?}");
        let distinct: std::collections::BTreeSet<_> = ages.iter().collect();
        assert!(
            distinct.len() > 100,
            "not spread: {} distinct",
            distinct.len()
        );
    }

    #[tokio::test]
    async fn a_body_reaches_the_service_in_small_pieces_whole_and_in_order() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
            Ok(Frame::data(Bytes::copy_from_slice(&data[..4500]))),
            Ok(Frame::data(Bytes::new())),
            Ok(Frame::data(Bytes::copy_from_slice(&data[4500..]))),
            Ok(Frame::trailers(trailers.clone())),
        ];
        let mut body = in_small_pieces(StreamBody::new(futures_util::stream::iter(frames)));
        let (mut received, mut sizes, mut got_trailers) = (Vec::new(), Vec::new(), None);
        while let Some(frame) = body.frame().await {
            let frame = frame.unwrap();
            match frame.into_data() {
                Ok(piece) => {
                    sizes.push(piece.len());
                    received.extend_from_slice(&piece);
                }
                Err(frame) => got_trailers = frame.into_trailers().ok(),
            }
        }
        assert_eq!(received, data);
        assert_eq!(sizes, [1024, 1024, 1024, 1024, 404, 500]);
        assert_eq!(got_trailers, Some(trailers));
    }
}
