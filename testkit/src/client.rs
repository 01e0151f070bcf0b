//! A small, retry-free HTTP client for tests and the demo: one connection per [`Conn`]
//! (HTTP/1.1 keep-alive or h2c with prior knowledge), whole bodies collected. Being retry-free
//! matters: a client that quietly re-sends would hide the very failures the tests look for.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::{Error, Result};

/// A whole response.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The trailers, when the response had any (HTTP/2).
    pub trailers: Option<HeaderMap>,
}

/// One client connection. Dropping it closes the connection.
pub struct Conn {
    addr: SocketAddr,
    sender: Sender,
    driver: JoinHandle<()>,
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// `GET path` on a fresh HTTP/1.1 connection, closed afterwards.
pub async fn get(addr: SocketAddr, path: &str) -> Result<Reply> {
    Conn::http1(addr).await?.get(path).await
}

// === impl Reply ===

impl Reply {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_slice(&self.body)
    }
}

// === impl Conn ===

impl Conn {
    /// Opens an HTTP/1.1 connection.
    pub async fn http1(addr: SocketAddr) -> Result<Self> {
        let io = connect(addr).await?;
        let (sender, conn) = http1::handshake(io).await?;
        let driver = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "client connection ended");
            }
        });
        Ok(Self {
            addr,
            sender: Sender::H1(sender),
            driver,
        })
    }

    /// Opens an HTTP/2 connection without TLS (prior knowledge).
    pub async fn h2c(addr: SocketAddr) -> Result<Self> {
        let io = connect(addr).await?;
        let (sender, conn) = http2::handshake(TokioExecutor::new(), io).await?;
        let driver = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "client connection ended");
            }
        });
        Ok(Self {
            addr,
            sender: Sender::H2(sender),
            driver,
        })
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Result<Reply> {
        let req = self.request(Method::GET, path).body(Full::default())?;
        self.send(req).await
    }

    /// `POST path` with `body`.
    pub async fn post(&mut self, path: &str, body: impl Into<Bytes>) -> Result<Reply> {
        let req = self
            .request(Method::POST, path)
            .body(Full::new(body.into()))?;
        self.send(req).await
    }

    /// A request builder with the URI form and `Host` this connection needs; add headers and
    /// a body, then [`send`](Self::send).
    pub fn request(&self, method: Method, path: &str) -> http::request::Builder {
        let authority = self.addr.to_string();
        match self.sender {
            Sender::H1(_) => Request::builder()
                .method(method)
                .uri(path)
                .header(header::HOST, authority),
            // h2 wants the scheme and authority in the URI; a bad path surfaces from `body()`.
            Sender::H2(_) => Request::builder()
                .method(method)
                .version(http::Version::HTTP_2)
                .uri(format!("http://{authority}{path}")),
        }
    }

    /// Sends one request and collects the whole response. Never retries.
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Reply> {
        let response = match &mut self.sender {
            Sender::H1(sender) => {
                sender.ready().await?;
                sender.send_request(req).await?
            }
            Sender::H2(sender) => {
                sender.ready().await?;
                sender.send_request(req).await?
            }
        };
        let (parts, body) = response.into_parts();
        let collected = body.collect().await?;
        let trailers = collected.trailers().cloned();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body: collected.to_bytes(),
            trailers,
        })
    }

    /// Whether the connection is gone (closed by the peer or after an error).
    pub fn is_closed(&self) -> bool {
        match &self.sender {
            Sender::H1(sender) => sender.is_closed(),
            Sender::H2(sender) => sender.is_closed(),
        }
    }

    /// The address it is connected to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

async fn connect(addr: SocketAddr) -> Result<TokioIo<TcpStream>> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|source| Error::Connect { addr, source })?;
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "set_nodelay failed");
    }
    Ok(TokioIo::new(stream))
}
