//! A TCP relay in front of a backend that can black-hole the connections it already carries:
//! `freeze` stops moving bytes on every open connection (both ways) while keeping the sockets
//! open, the way a lost conntrack entry or a stuck middlebox does; connections made after it
//! flow normally. Counts the connections it carried.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub struct Relay {
    addr: SocketAddr,
    /// Bumped by `freeze`; a connection freezes when the generation moves past its own.
    generation: watch::Sender<u64>,
    connections: Arc<AtomicUsize>,
    _task: JoinSet<()>,
}

impl Relay {
    pub async fn spawn(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (generation, _) = watch::channel(0u64);
        let connections = Arc::new(AtomicUsize::new(0));
        let (gen_tx, count) = (generation.clone(), Arc::clone(&connections));
        let mut task = JoinSet::new();
        task.spawn(async move {
            let mut carried = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let frozen = gen_tx.subscribe();
                let born = *frozen.borrow();
                carried.spawn(async move {
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(
                        pump(cr, sw, frozen.clone(), born),
                        pump(sr, cw, frozen, born)
                    );
                });
            }
        });
        Self {
            addr,
            generation,
            connections,
            _task: task,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Black-hole every connection open now.
    pub fn freeze(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Copy `from` to `to` until either side ends; once frozen, hold both open and move nothing.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut frozen: watch::Receiver<u64>,
    born: u64,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(n) if n > 0 => {
                    if to.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                _ => break,
            },
            () = frozen_since(&mut frozen, born) => {
                // Black hole: both sockets stay open (owned here), nothing moves, forever.
                std::future::pending::<()>().await;
            }
        }
    }
    let _ = to.shutdown().await;
}

/// Resolves once the relay froze after generation `born`.
async fn frozen_since(frozen: &mut watch::Receiver<u64>, born: u64) {
    let _ = frozen.wait_for(|g| *g > born).await.map(|_| ());
}
