//! A stand-in for the controller's Kubernetes Service: one address that forwards each new TCP
//! connection to a replica whose `/readyz` answers 200 (the leader), as kube-proxy sends traffic
//! only to ready endpoints. Sidecars point at it, so a leader change or a restart is seen the
//! way it is on a cluster: connections fail or end, and reconnects reach whoever leads now.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::client;

/// A replica behind the Service: where it serves and where it says whether it is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replica {
    pub serve: SocketAddr,
    pub ready: SocketAddr,
}

/// The running stand-in; stops when dropped.
pub struct ServiceProxy {
    pub addr: SocketAddr,
    replicas: Arc<Mutex<Vec<Replica>>>,
    task: JoinHandle<()>,
}

async fn is_ready(replica: Replica) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_millis(300), client::get(replica.ready, "/readyz")).await,
        Ok(Ok(reply)) if reply.status.is_success()
    )
}

async fn forward(mut inbound: TcpStream, replicas: Vec<Replica>) {
    for replica in replicas {
        if !is_ready(replica).await {
            continue;
        }
        if let Ok(mut outbound) = TcpStream::connect(replica.serve).await {
            let _ = outbound.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            return;
        }
    }
    // No ready replica: the connection is refused, as for a Service without endpoints.
}

impl ServiceProxy {
    pub async fn start(replicas: Vec<Replica>) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let replicas = Arc::new(Mutex::new(replicas));
        let shared = replicas.clone();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let _ = inbound.set_nodelay(true);
                let current = shared.lock().clone();
                tokio::spawn(forward(inbound, current));
            }
        });
        Ok(Self {
            addr,
            replicas,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_replicas(&self, replicas: Vec<Replica>) {
        *self.replicas.lock() = replicas;
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
