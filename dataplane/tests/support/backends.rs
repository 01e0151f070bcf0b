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
