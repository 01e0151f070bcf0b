//! rollcall-devcluster: a local, in-memory Kubernetes API server for Rollcall's demo and
//! end-to-end tests. It is a test fixture, not part of the product: real HTTP on 127.0.0.1,
//! accepted unmodified by kube-rs, kubectl and Helm, and faithful to a real API server where
//! clients can tell (discovery, OpenAPI, resourceVersion and watch semantics, status codes and
//! messages, field paths, server-side apply, admission of custom resources with their CRD's
//! schema and CEL rules, tables for `kubectl get`, ServiceAccount tokens, RBAC). What it does
//! not emulate is listed in its README.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub mod admission;
mod admit;
mod builtin;
pub mod catalog;
pub mod cluster;
mod control;
mod convert;
mod crd;
mod discovery;
mod event_printer;
pub mod faults;
pub mod fieldmgr;
mod fields;
mod handlers;
mod http;
pub mod kubeconfig;
pub mod log;
mod meta;
mod openapi;
mod protobuf;
mod rbac;
mod request;
mod schemas;
mod selector;
pub mod status;
pub mod store;
mod table;
pub mod tls;
pub mod tokens;
mod watch;

pub use cluster::{Cluster, Settings};

/// A running server.
pub struct DevCluster {
    pub addr: SocketAddr,
    /// The CA that signed the server's certificate (PEM).
    pub ca_pem: String,
    pub cluster: Arc<Cluster>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl DevCluster {
    /// Start on `listen` (port 0 picks a free one).
    pub async fn start(listen: SocketAddr, settings: Settings) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let tls = tls::generate().map_err(std::io::Error::other)?;
        let cluster = Cluster::new(settings);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(http::serve(
            listener,
            tls.server.clone(),
            cluster.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Ok(Self {
            addr,
            ca_pem: tls.ca_pem,
            cluster,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Write a kubeconfig for this server (admin user) to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<PathBuf> {
        kubeconfig::write(
            path,
            &self.server_url(),
            &self.ca_pem,
            &self.cluster.settings.admin_token,
        )?;
        Ok(path.to_path_buf())
    }

    /// Stop accepting connections (open ones end when their clients leave).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.cluster.drop_watches();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.cluster.drop_watches();
    }
}
