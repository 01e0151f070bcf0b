//! One HTTP GET to a URL the user gave (a controller's metrics port after `kubectl
//! port-forward`, a sidecar's admin port, the webhook): plain HTTP, or HTTPS trusting only a
//! given CA bundle and checking a given server name, with the certificate the server showed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use crate::{Error, Result};

/// What came back.
#[derive(Clone, Debug)]
pub struct Fetched {
    pub status: u16,
    pub body: String,
    /// The server's leaf certificate (HTTPS only).
    pub peer_certificate: Option<Vec<u8>>,
}

/// How to trust an HTTPS server.
pub struct Trust<'a> {
    /// PEM CA bundle.
    pub ca_pem: &'a [u8],
    /// The name the certificate must be valid for (SNI too).
    pub server_name: &'a str,
}

const TIMEOUT: Duration = Duration::from_secs(5);

fn fail(url: &str, what: impl std::fmt::Display) -> Error {
    Error::Fetch(format!("{url}: {what}"))
}

/// GET `url` (`http://` or, with `trust`, `https://`).
pub async fn get(url: &str, trust: Option<Trust<'_>>) -> Result<Fetched> {
    tokio::time::timeout(TIMEOUT, get_inner(url, trust))
        .await
        .map_err(|_| fail(url, format!("no answer within {TIMEOUT:?}")))?
}

async fn get_inner(url: &str, trust: Option<Trust<'_>>) -> Result<Fetched> {
    let uri: Uri = url.parse().map_err(|e| fail(url, e))?;
    let host = uri.host().ok_or_else(|| fail(url, "no host"))?.to_string();
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let tcp = TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| fail(url, e))?;
    let request = Request::get(path)
        .header(http::header::HOST, format!("{host}:{port}"))
        .body(Empty::<Bytes>::new())
        .map_err(|e| fail(url, e))?;
    if !https {
        let (status, body) = exchange(TokioIo::new(tcp), request, url).await?;
        return Ok(Fetched {
            status,
            body,
            peer_certificate: None,
        });
    }
    let trust = trust.ok_or_else(|| fail(url, "https needs a CA to trust"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(trust.ca_pem) {
        let cert = cert.map_err(|e| fail(url, format!("the CA bundle is not PEM: {e}")))?;
        roots.add(cert).map_err(|e| fail(url, e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(url, e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(trust.server_name.to_string()).map_err(|e| fail(url, e))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| fail(url, format!("TLS: {e}")))?;
    let peer_certificate = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec());
    let (status, body) = exchange(TokioIo::new(tls), request, url).await?;
    Ok(Fetched {
        status,
        body,
        peer_certificate,
    })
}

async fn exchange<T>(
    io: TokioIo<T>,
    request: Request<Empty<Bytes>>,
    url: &str,
) -> Result<(u16, String)>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| fail(url, e))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| fail(url, e))?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| fail(url, e))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
