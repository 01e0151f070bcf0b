//! Backends the shared testkit does not have, kept here so the sidecar's tests need nothing
//! new from it: one that records when each request arrived and what headers it carried, one
//! whose response body stalls after its headers, and an h2c server with a small stream limit.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// One request as a [`Recorder`] saw it.
#[derive(Clone, Debug)]
pub struct Arrival {
    pub at: Instant,
    pub headers: HeaderMap,
}

/// An HTTP/1.1 and h2c backend that answers every request with one fixed status, header
/// `x-answer: <name>` and body `<name> says <status>`, after `latency`, and records arrivals.
pub struct Recorder {
    addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    arrived: Arc<Notify>,
    _tasks: JoinSet<()>,
}

impl Recorder {
    pub async fn spawn(name: &'static str, status: u16, latency: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let mut tasks = JoinSet::new();
        let (log, notify) = (Arc::clone(&arrivals), Arc::clone(&arrived));
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (log, notify) = (Arc::clone(&log), Arc::clone(&notify));
                connections.spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (log, notify) = (Arc::clone(&log), Arc::clone(&notify));
                        async move {
                            if req.uri().path() != "/healthz" {
                                log.lock().push(Arrival {
                                    at: Instant::now(),
                                    headers: req.headers().clone(),
                                });
                                notify.notify_waiters();
                                if !latency.is_zero() {
                                    tokio::time::sleep(latency).await;
                                }
                            }
                            let _ = req.into_body().collect().await;
                            let mut response = Response::new(Full::new(Bytes::from(format!(
                                "{name} says {status}\n"
                            ))));
                            *response.status_mut() =
                                StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                            response
                                .headers_mut()
                                .insert("x-answer", http::HeaderValue::from_static(name));
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            arrivals,
            arrived,
            _tasks: tasks,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().clone()
    }

    /// Wait until `n` requests have arrived.
    pub async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.arrived.notified();
            if self.arrivals.lock().len() >= n {
                return;
            }
            notified.await;
        }
    }
}

/// An HTTP/1.1 backend that answers `200` with `content-length: 100`, sends 7 bytes of body,
/// then holds the connection open without another byte. Counts the connections it accepted
/// and those still open.
pub struct StallingBody {
    addr: SocketAddr,
    open: Arc<Mutex<usize>>,
    _task: JoinSet<()>,
}

impl StallingBody {
    pub async fn spawn() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let open = Arc::new(Mutex::new(0));
        let counter = Arc::clone(&open);
        let mut task = JoinSet::new();
        task.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                let counter = Arc::clone(&counter);
                connections.spawn(async move {
                    *counter.lock() += 1;
                    let mut buf = vec![0u8; 4096];
                    let mut seen = Vec::new();
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial")
                        .await;
                    // Hold the connection until the peer closes it.
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                    *counter.lock() -= 1;
                });
            }
        });
        Self {
            addr,
            open,
            _task: task,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn open_connections(&self) -> usize {
        *self.open.lock()
    }
}

/// An HTTP/1.1 backend that reads a request's headers and then nothing more, ever: an upload
/// to it stalls once the socket buffers are full.
pub struct NotReading {
    addr: SocketAddr,
    _task: JoinSet<()>,
}

impl NotReading {
    pub async fn spawn() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut task = JoinSet::new();
        task.spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buf = vec![0u8; 1024];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                held.push(stream);
            }
        });
        Self { addr, _task: task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// An h2c-only backend allowing `max_streams` concurrent streams per connection, answering
/// `200` after `latency`. Counts connections.
pub struct H2Limited {
    addr: SocketAddr,
    connections: Arc<Mutex<usize>>,
    _task: JoinSet<()>,
}

impl H2Limited {
    pub async fn spawn(max_streams: u32, latency: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(Mutex::new(0));
        let counter = Arc::clone(&connections);
        let mut task = JoinSet::new();
        task.spawn(async move {
            let mut served = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                *counter.lock() += 1;
                served.spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| async move {
                        if req.uri().path() != "/healthz" {
                            tokio::time::sleep(latency).await;
                        }
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok\n"))))
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .max_concurrent_streams(max_streams)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            connections,
            _task: task,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn connections(&self) -> usize {
        *self.connections.lock()
    }
}

/// How a [`GrpcBackend`] ends each call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrpcAnswer {
    /// Headers only, `grpc-status` among them (how servers send errors).
    TrailersOnly(u32),
    /// Headers, one message, then `grpc-status` in the trailers.
    Trailers(u32),
}

/// An h2c backend answering every call like a gRPC server: HTTP 200,
/// `content-type: application/grpc`, and the status its current [`GrpcAnswer`] says. Counts
/// the calls it got.
/// It also serves `grpc.health.v1.Health/Check`: SERVING, NOT_SERVING, or (`None`) no health
/// service at all (UNIMPLEMENTED), as [`GrpcBackend::set_serving`] says; those calls are not
/// counted.
pub struct GrpcBackend {
    addr: SocketAddr,
    answer: Arc<Mutex<GrpcAnswer>>,
    serving: Arc<Mutex<Option<bool>>>,
    calls: Arc<std::sync::atomic::AtomicU64>,
    _task: JoinSet<()>,
}

impl GrpcBackend {
    pub async fn spawn(answer: GrpcAnswer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let answer = Arc::new(Mutex::new(answer));
        let serving = Arc::new(Mutex::new(Some(true)));
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (current, count, health) = (
            Arc::clone(&answer),
            Arc::clone(&calls),
            Arc::clone(&serving),
        );
        let mut task = JoinSet::new();
        task.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (current, count, health) = (
                    Arc::clone(&current),
                    Arc::clone(&count),
                    Arc::clone(&health),
                );
                connections.spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (current, count, health) = (
                            Arc::clone(&current),
                            Arc::clone(&count),
                            Arc::clone(&health),
                        );
                        async move {
                            let health_check = req.uri().path() == "/grpc.health.v1.Health/Check";
                            let _ = req.into_body().collect().await;
                            if health_check {
                                return Ok::<_, Infallible>(health_response(*health.lock()));
                            }
                            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            Ok::<_, Infallible>(grpc_response(*current.lock()))
                        }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            answer,
            serving,
            calls,
            _task: task,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn set_serving(&self, serving: Option<bool>) {
        *self.serving.lock() = serving;
    }

    pub fn set(&self, answer: GrpcAnswer) {
        *self.answer.lock() = answer;
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn grpc_response(
    answer: GrpcAnswer,
) -> Response<http_body_util::combinators::BoxBody<Bytes, Infallible>> {
    use http_body_util::StreamBody;
    let (body, trailer_status) = match answer {
        GrpcAnswer::TrailersOnly(_) => (Vec::new(), None),
        GrpcAnswer::Trailers(code) => {
            // One length-prefixed message: uncompressed, 2 bytes.
            let message = http_body::Frame::data(Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1]));
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from(code));
            (
                vec![
                    Ok::<_, Infallible>(message),
                    Ok(http_body::Frame::trailers(trailers)),
                ],
                Some(code),
            )
        }
    };
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
        body,
    ))));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    if let (GrpcAnswer::TrailersOnly(code), None) = (answer, trailer_status) {
        headers.insert("grpc-status", http::HeaderValue::from(code));
    }
    response
}

/// A `grpc.health.v1` answer: `HealthCheckResponse { status: SERVING (1) | NOT_SERVING (2) }`,
/// or UNIMPLEMENTED without a health service.
fn health_response(
    serving: Option<bool>,
) -> Response<http_body_util::combinators::BoxBody<Bytes, Infallible>> {
    let Some(serving) = serving else {
        return grpc_response(GrpcAnswer::TrailersOnly(12));
    };
    let status = if serving { 1 } else { 2 };
    let message = http_body::Frame::data(Bytes::from(vec![0, 0, 0, 0, 2, 0x08, status]));
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from(0u32));
    let frames = vec![
        Ok::<_, Infallible>(message),
        Ok(http_body::Frame::trailers(trailers)),
    ];
    let mut response = Response::new(BodyExt::boxed(http_body_util::StreamBody::new(
        futures_util::stream::iter(frames),
    )));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}
