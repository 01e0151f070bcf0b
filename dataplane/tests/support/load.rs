//! Clients sending GETs through the sidecar on keep-alive connections until told to stop, for
//! the tests that break backends under load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;
use rollcall_testkit::client::Conn;

/// Clients sending GETs through the sidecar on keep-alive connections until told to stop.
pub struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl Load {
    pub fn start(listen: std::net::SocketAddr, clients: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let tasks = (0..clients)
            .map(|_| {
                let (stop, ok) = (stop.clone(), ok.clone());
                tokio::spawn(async move {
                    let mut errors = Vec::new();
                    let mut conn = Conn::http1(listen).await.expect("connect to sidecar");
                    while !stop.load(Ordering::Relaxed) {
                        match conn.get("/").await {
                            Ok(r) if r.status == StatusCode::OK => {
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(r) => {
                                errors.push(format!("{} {}", r.status, r.text()));
                            }
                            Err(e) => {
                                errors.push(e.to_string());
                                conn = Conn::http1(listen).await.expect("reconnect");
                            }
                        }
                    }
                    errors
                })
            })
            .collect();
        Self { stop, ok, tasks }
    }

    /// GETs answered 200 so far.
    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    pub async fn wait_for_ok(&self, n: u64) {
        let deadline = tokio::time::Instant::now() + super::PATIENCE;
        while self.ok.load(Ordering::Relaxed) < n {
            assert!(tokio::time::Instant::now() < deadline, "load stalled");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn stop(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for t in self.tasks {
            errors.extend(t.await.unwrap());
        }
        (self.ok.load(Ordering::Relaxed), errors)
    }
}
