//! TLS on the roster port. The certificate and key come from files (a mounted Secret: the
//! one the injector issues by default, or cert-manager's), checked again every
//! `RELOAD_EVERY`: a renewed pair is served from the next handshake on, a pair that does not
//! load is logged and the last good one keeps serving. Until a first pair loads, handshakes
//! fail and `/readyz` says so. Handshakes run concurrently, each bounded by
//! `HANDSHAKE_TIMEOUT`, so a client that connects and says nothing holds only its own task
//! and one of the `gate`'s places for connections not yet authenticated;
//! finished connections are handed to the server (`transport`) as its incoming stream.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rollcall_api::tls::CertResolver;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;

use super::gate::Gate;
use super::throttle::PendingSlot;

/// How often the certificate files are checked for a renewal.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);
/// How long a client gets to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the serving certificate and its key are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why TLS could not start.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{cert} with {key}: {source}")]
    Load {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rollcall_api::tls::CertError,
    },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The roster port's TLS: what it serves, and the configuration for new handshakes.
#[derive(Clone, Debug)]
pub struct RosterTls {
    pub files: TlsFiles,
    pub resolver: Arc<CertResolver>,
    pub config: Arc<rustls::ServerConfig>,
}

// === impl RosterTls ===

impl RosterTls {
    /// Serve whatever the files hold once they hold a pair that loads: until then every
    /// handshake fails (the client retries) and `waiting_for` says why. This is the first
    /// start of a chart-managed install, where the injector issues the certificate into a
    /// Secret the kubelet has already mounted empty.
    pub fn start(files: TlsFiles) -> Result<(Self, Option<TlsError>), TlsError> {
        let resolver = Arc::new(CertResolver::default());
        let waiting_for = reload(&resolver, &files).err();
        let config = resolver.server_config(&[b"h2"])?;
        Ok((
            Self {
                files,
                resolver,
                config,
            },
            waiting_for,
        ))
    }

    /// Check the files every `every` until dropped; log what changed or what failed.
    pub async fn keep_fresh(self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        let mut failing = false;
        loop {
            tick.tick().await;
            match reload(&self.resolver, &self.files) {
                Ok(true) => {
                    failing = false;
                    tracing::info!(cert = %self.files.cert.display(), "roster TLS certificate loaded");
                }
                Ok(false) => failing = false,
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(%error, "roster TLS certificate not reloaded; serving the previous one");
                }
                Err(_) => {}
            }
        }
    }
}

/// Read both files and load them if they changed; `Ok(true)` when a new pair is served.
fn reload(resolver: &CertResolver, files: &TlsFiles) -> Result<bool, TlsError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let (cert, key) = (read(&files.cert)?, read(&files.key)?);
    resolver.load(&cert, &key).map_err(|source| TlsError::Load {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })
}

/// Accept on `listener`, handshake each connection on its own task, and yield the finished
/// ones with their peers' addresses and their places among the connections not yet
/// authenticated (taken before the handshake: a connection the `gate` has no place for is
/// closed at once). Ends when the stream is dropped.
pub fn incoming(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    gate: Arc<Gate>,
) -> ReceiverStream<Accepted<TlsStream<TcpStream>>> {
    let (tx, rx) = mpsc::channel(64);
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let (tcp, peer, slot) = tokio::select! {
                () = tx.closed() => return,
                accepted = admitted(&listener, &gate) => accepted,
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send((tls, Some(peer), slot)).await;
                    }
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "roster TLS handshake failed");
                    }
                    Err(_) => tracing::debug!(%peer, "roster TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// Every connection accepted on `listener`, plaintext, with its peer's address and its place
/// among the connections not yet authenticated (when the controller is given no certificate).
pub fn plaintext(
    listener: TcpListener,
    gate: Arc<Gate>,
) -> impl futures_util::Stream<Item = Accepted<TcpStream>> {
    futures_util::stream::unfold((listener, gate), |(listener, gate)| async move {
        let (tcp, peer, slot) = admitted(&listener, &gate).await;
        Some(((tcp, Some(peer), slot), (listener, gate)))
    })
}

/// A connection as the server takes it: the stream, its peer, its place among the connections
/// not yet authenticated.
pub type Accepted<IO> = (IO, Option<SocketAddr>, PendingSlot);

/// The next connection the gate has a place for; those it has none for are closed at once
/// (dropped before any byte is read), so a flood of idle connections or stalled handshakes
/// costs a bounded amount.
async fn admitted(listener: &TcpListener, gate: &Gate) -> (TcpStream, SocketAddr, PendingSlot) {
    loop {
        let (tcp, peer) = accept(listener).await;
        match gate.accept(Some(peer)) {
            Some(slot) => return (tcp, peer, slot),
            None => {
                tracing::debug!(%peer, "roster connection closed at once: too many not yet authenticated")
            }
        }
    }
}

/// The next connection, with `TCP_NODELAY` set. Accept errors (out of descriptors and the
/// like) are logged and waited out rather than spun on.
async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok((tcp, peer)) => return (no_delay(tcp), peer),
            Err(error) => {
                tracing::warn!(%error, "roster port accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Small roster messages (a delta, a feedback) go out at once: without `TCP_NODELAY`, Nagle
/// holds one back while the previous is unacknowledged, up to the peer's delayed-ACK timer.
/// Set on every accepted connection.
fn no_delay(tcp: tokio::net::TcpStream) -> tokio::net::TcpStream {
    if let Err(error) = tcp.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set on a roster connection");
    }
    tcp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> TlsFiles {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let files = TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }

    #[test]
    fn starts_without_a_pair_says_why_naming_the_files_and_serves_one_written_later() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TlsFiles {
            cert: dir.path().join("none.crt"),
            key: dir.path().join("none.key"),
        };
        let (tls, why) = RosterTls::start(missing).unwrap();
        assert!(!tls.resolver.is_loaded());
        let error = why.unwrap().to_string();
        assert!(error.contains("none.crt"), "{error}");
        let files = write_pair(dir.path(), "rollcall-controller.rollcall-system.svc");
        std::fs::write(&files.key, "garbage").unwrap();
        let (tls, why) = RosterTls::start(files.clone()).unwrap();
        let error = why.unwrap().to_string();
        assert!(
            error.contains("tls.key") && error.contains("not PEM"),
            "{error}"
        );
        write_pair(dir.path(), "rollcall-controller.rollcall-system.svc");
        assert!(reload(&tls.resolver, &files).unwrap());
        assert!(tls.resolver.is_loaded());
    }

    #[test]
    fn a_renewed_pair_is_loaded_and_a_broken_one_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_pair(dir.path(), "a.example");
        let (tls, why) = RosterTls::start(files.clone()).unwrap();
        assert!(why.is_none());
        assert!(!reload(&tls.resolver, &files).unwrap(), "unchanged");
        write_pair(dir.path(), "b.example");
        assert!(reload(&tls.resolver, &files).unwrap(), "renewed");
        std::fs::write(&files.cert, "half-written").unwrap();
        assert!(reload(&tls.resolver, &files).is_err());
        assert!(tls.resolver.is_loaded());
    }
}
