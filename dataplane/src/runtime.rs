//! The running sidecar: one `Pool` and one listener per configured pool, kept in step with the
//! configuration. Applying a config adds, updates and removes pools; an endpoint's health
//! survives every reload that keeps it. A listener that cannot bind refuses that config (the
//! rest of the last good one keeps serving) instead of crashing the process.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::SidecarConfig;
use crate::metrics::Metrics;
use crate::pool::{Pool, PoolSettings, PoolView};
use crate::proxy::server::Listener;

/// How long removed pools' client connections get to finish.
const LISTENER_GRACE: Duration = Duration::from_secs(10);

struct Running {
    pool: Arc<Pool>,
    listener: Listener,
    /// The address as configured (port 0 binds a free port; `listener.addr` is the real one).
    listen: SocketAddr,
}

pub struct Runtime {
    pools: tokio::sync::Mutex<HashMap<String, Running>>,
    metrics: Arc<Metrics>,
}

impl Runtime {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            pools: tokio::sync::Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Make the running pools match `config`. On a bind failure the pools that did start keep
    /// running and the error says which listen address failed.
    pub async fn apply(&self, config: &SidecarConfig) -> Result<(), std::io::Error> {
        let mut pools = self.pools.lock().await;
        let wanted: HashMap<&str, _> = config.pools.iter().map(|p| (p.name.as_str(), p)).collect();
        let gone: Vec<String> = pools
            .keys()
            .filter(|name| !wanted.contains_key(name.as_str()))
            .cloned()
            .collect();
        for name in gone {
            if let Some(running) = pools.remove(&name) {
                tracing::info!(pool = %name, "pool removed from config");
                running.listener.stop(LISTENER_GRACE).await;
                running.pool.shutdown();
            }
        }
        let mut first_error = None;
        for pool_config in &config.pools {
            let settings = PoolSettings::new(&pool_config.policy);
            // A pool whose listen address changed is moved: the new listener first, so a bind
            // failure leaves the old one serving.
            if let Some(running) = pools.get(&pool_config.name) {
                running.pool.update(&pool_config.endpoints, settings);
                if running.listen == pool_config.listen {
                    continue;
                }
                let pool = Arc::clone(&running.pool);
                match Listener::bind(pool_config.listen, Arc::clone(&pool)).await {
                    Ok(listener) => {
                        if let Some(old) = pools.insert(
                            pool_config.name.clone(),
                            Running {
                                pool,
                                listener,
                                listen: pool_config.listen,
                            },
                        ) {
                            old.listener.stop(LISTENER_GRACE).await;
                        }
                    }
                    Err(error) => {
                        tracing::error!(pool = %pool_config.name, listen = %pool_config.listen, %error, "cannot move the listener; the old one keeps serving");
                        first_error.get_or_insert(bind_error(pool_config.listen, error));
                    }
                }
                continue;
            }
            let pool = Pool::new(
                &pool_config.name,
                settings.clone(),
                Arc::clone(&self.metrics),
            );
            match Listener::bind(pool_config.listen, Arc::clone(&pool)).await {
                Ok(listener) => {
                    pool.update(&pool_config.endpoints, settings);
                    tracing::info!(pool = %pool_config.name, listen = %listener.addr, endpoints = pool_config.endpoints.len(), "pool serving");
                    pools.insert(
                        pool_config.name.clone(),
                        Running {
                            pool,
                            listener,
                            listen: pool_config.listen,
                        },
                    );
                }
                Err(error) => {
                    tracing::error!(pool = %pool_config.name, listen = %pool_config.listen, %error, "cannot listen; pool not started");
                    pool.shutdown();
                    first_error.get_or_insert(bind_error(pool_config.listen, error));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The sidecar's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Every pool as `/endpoints` shows it, sorted by name.
    pub async fn views(&self) -> Vec<PoolView> {
        let pools = self.pools.lock().await;
        let mut views: Vec<PoolView> = pools.values().map(|r| r.pool.view()).collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        views
    }

    /// The address each pool listens on (useful when the config asked for port 0).
    pub async fn listen_addrs(&self) -> HashMap<String, SocketAddr> {
        let pools = self.pools.lock().await;
        pools
            .iter()
            .map(|(name, r)| (name.clone(), r.listener.addr))
            .collect()
    }

    /// Stop every listener and close every connection.
    pub async fn shutdown(&self) {
        let mut pools = self.pools.lock().await;
        for (_, running) in pools.drain() {
            running.listener.stop(LISTENER_GRACE).await;
            running.pool.shutdown();
        }
    }
}

fn bind_error(addr: SocketAddr, error: std::io::Error) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("cannot listen on {addr}: {error}"))
}
