//! The running sidecar: one `Pool` and one listener per configured pool, kept in step with the
//! configuration. Applying a config adds, updates and removes pools; applying one pool's config
//! (a roster change from the controller) touches that pool alone; an endpoint's health
//! survives every reload that keeps it. A listener that cannot bind refuses that config (the
//! rest of the last good one keeps serving) instead of crashing the process.
//!
//! No lock is held across an await: the map of pools is a plain lock taken for a moment, applies
//! are put in line by their own async lock that readers never take, and a removed pool drains in
//! the background (its listener's grace can be long) while `/endpoints` and the next config go on.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use parking_lot::Mutex;
use tokio_util::task::TaskTracker;

use crate::config::{PoolConfig, SidecarConfig};
use crate::metrics::Metrics;
use crate::pool::{Pool, PoolSettings, PoolView, Tuning};
use crate::proxy::server::Listener;

/// How long a removed or moved pool's client connections get to finish.
const LISTENER_GRACE: Duration = Duration::from_secs(10);

struct Running {
    pool: Arc<Pool>,
    listener: Listener,
    /// The address as configured (port 0 binds a free port; `listener.addr` is the real one).
    listen: SocketAddr,
}

pub struct Runtime {
    pools: Mutex<HashMap<String, Running>>,
    /// Applies run one at a time; nothing else waits on this.
    applying: tokio::sync::Mutex<()>,
    /// Removed pools and moved listeners, draining in the background.
    retiring: TaskTracker,
    /// Set by `shutdown`: no config is applied any more.
    closed: AtomicBool,
    metrics: Arc<Metrics>,
    /// What new pools start with; `local_zone` may be learnt from the controller later.
    tuning: Mutex<Tuning>,
    /// The zone was configured (`--zone`): the controller's word does not replace it.
    zone_configured: bool,
}

impl Runtime {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self::with_tuning(metrics, Tuning::default())
    }

    pub fn with_tuning(metrics: Arc<Metrics>, tuning: Tuning) -> Self {
        Self {
            pools: Mutex::new(HashMap::new()),
            applying: tokio::sync::Mutex::new(()),
            retiring: TaskTracker::new(),
            closed: AtomicBool::new(false),
            metrics,
            zone_configured: tuning.local_zone.is_some(),
            tuning: Mutex::new(tuning),
        }
    }

    /// The zone the controller says this sidecar's node is in. Taken unless a zone was
    /// configured; every pool routes by it from then on.
    pub fn adopt_zone(&self, zone: &str) {
        if zone.is_empty() {
            return;
        }
        let zone: Arc<str> = {
            let mut tuning = self.tuning.lock();
            if self.zone_configured {
                let configured = tuning.local_zone.as_deref().unwrap_or("");
                if configured != zone {
                    tracing::info!(
                        configured,
                        controller = zone,
                        "the controller names another zone; the configured one stays"
                    );
                }
                return;
            }
            if tuning.local_zone.as_deref() == Some(zone) {
                return;
            }
            let zone: Arc<str> = zone.into();
            tuning.local_zone = Some(Arc::clone(&zone));
            zone
        };
        tracing::info!(%zone, "zone from the controller (the node's topology.kubernetes.io/zone)");
        for running in self.pools.lock().values() {
            running.pool.set_local_zone(Arc::clone(&zone));
        }
    }

    /// The controller's fleet-health word for pool `name` (`None`: probe everything).
    pub fn follow_fleet(&self, name: &str, fleet: Option<rollcall_api::roster::FleetHealth>) {
        if let Some(running) = self.pools.lock().get(name) {
            running.pool.follow_fleet(fleet);
        }
    }

    /// Whether pool `name` routes to `addr` now (`None`: no such pool). Reads the routing
    /// snapshot the requests read: cheap enough to poll (benchmarks do, across a fleet).
    pub fn routes_to(&self, name: &str, addr: SocketAddr) -> Option<bool> {
        let pools = self.pools.lock();
        Some(pools.get(name)?.pool.routing().routes_to(addr))
    }

    /// The stream to the controller ended: every pool's fleet assignment stands for two probe
    /// intervals, then each probes all its endpoints itself until the controller speaks again.
    pub fn fleet_lost(&self) {
        for running in self.pools.lock().values() {
            running.pool.fleet_lost();
        }
    }

    /// Make the running pools match `config`. On a bind failure the pools that did start keep
    /// running and the error says which listen address failed.
    pub async fn apply(&self, config: &SidecarConfig) -> Result<(), std::io::Error> {
        let _turn = self.applying.lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let gone: Vec<(String, Running)> = {
            let mut pools = self.pools.lock();
            let names: Vec<String> = pools
                .keys()
                .filter(|name| !config.pools.iter().any(|p| &p.name == *name))
                .cloned()
                .collect();
            names
                .into_iter()
                .filter_map(|name| pools.remove(&name).map(|r| (name, r)))
                .collect()
        };
        for (name, running) in gone {
            tracing::info!(pool = %name, "pool removed from config");
            self.retire(running.listener, Some(running.pool));
        }
        let mut first_error = None;
        for pool_config in &config.pools {
            if let Err(error) = self.apply_one(pool_config).await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Make one pool match `pool_config` (added, updated, or its listener moved), leaving every
    /// other pool alone: what a roster change for one pool costs, however many pools run.
    pub async fn apply_pool(&self, pool_config: &PoolConfig) -> Result<(), std::io::Error> {
        let _turn = self.applying.lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.apply_one(pool_config).await
    }

    /// `apply_pool` with the apply turn already held.
    async fn apply_one(&self, pool_config: &PoolConfig) -> Result<(), std::io::Error> {
        let settings = PoolSettings::new(&pool_config.policy);
        let existing = self
            .pools
            .lock()
            .get(&pool_config.name)
            .map(|r| (Arc::clone(&r.pool), r.listen));
        if let Some((pool, listen)) = existing {
            pool.update(&pool_config.endpoints, settings).await;
            if listen == pool_config.listen {
                return Ok(());
            }
            // Moved: the new listener first, so a bind failure leaves the old one serving.
            return match Listener::bind(pool_config.listen, Arc::clone(&pool)).await {
                Ok(listener) => {
                    let running = Running {
                        pool,
                        listener,
                        listen: pool_config.listen,
                    };
                    let old = self.pools.lock().insert(pool_config.name.clone(), running);
                    if let Some(old) = old {
                        self.retire(old.listener, None);
                    }
                    Ok(())
                }
                Err(error) => {
                    tracing::error!(pool = %pool_config.name, listen = %pool_config.listen, %error, "cannot move the listener; the old one keeps serving");
                    Err(bind_error(pool_config.listen, error))
                }
            };
        }
        let pool = Pool::new(
            &pool_config.name,
            settings.clone(),
            self.tuning.lock().clone(),
            Arc::clone(&self.metrics),
        );
        // Its roster first, so its first request does not meet an empty pool.
        pool.update(&pool_config.endpoints, settings).await;
        match Listener::bind(pool_config.listen, Arc::clone(&pool)).await {
            Ok(listener) => {
                tracing::info!(pool = %pool_config.name, listen = %listener.addr, endpoints = pool_config.endpoints.len(), "pool serving");
                let running = Running {
                    pool,
                    listener,
                    listen: pool_config.listen,
                };
                self.pools.lock().insert(pool_config.name.clone(), running);
                Ok(())
            }
            Err(error) => {
                tracing::error!(pool = %pool_config.name, listen = %pool_config.listen, %error, "cannot listen; pool not started");
                pool.shutdown().await;
                Err(bind_error(pool_config.listen, error))
            }
        }
    }

    /// Stop a listener in the background (and then its pool, when it is going away).
    fn retire(&self, listener: Listener, pool: Option<Arc<Pool>>) {
        self.retiring.spawn(async move {
            listener.stop(LISTENER_GRACE).await;
            if let Some(pool) = pool {
                pool.shutdown().await;
            }
        });
    }

    /// The sidecar's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Every pool as `/endpoints` shows it, sorted by name.
    pub async fn views(&self) -> Vec<PoolView> {
        let pools: Vec<Arc<Pool>> = self
            .pools
            .lock()
            .values()
            .map(|r| Arc::clone(&r.pool))
            .collect();
        let mut views: Vec<PoolView> = join_all(pools.iter().map(|p| p.view()))
            .await
            .into_iter()
            .flatten()
            .collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        views
    }

    /// The address each pool listens on (useful when the config asked for port 0).
    pub async fn listen_addrs(&self) -> HashMap<String, SocketAddr> {
        self.pools
            .lock()
            .iter()
            .map(|(name, r)| (name.clone(), r.listener.addr))
            .collect()
    }

    /// Stop every listener and close every connection, giving in-flight requests 10 s.
    pub async fn shutdown(&self) {
        self.shutdown_within(LISTENER_GRACE).await;
    }

    /// Stop accepting on every listener at once; the requests in flight get `grace` to finish;
    /// then every pool closes its connections. No config is applied after this.
    pub async fn shutdown_within(&self, grace: Duration) {
        let running: Vec<Running> = {
            let _turn = self.applying.lock().await;
            self.closed.store(true, Ordering::Release);
            self.pools.lock().drain().map(|(_, r)| r).collect()
        };
        let (pools, listeners): (Vec<_>, Vec<_>) =
            running.into_iter().map(|r| (r.pool, r.listener)).unzip();
        let cut: usize = join_all(listeners.into_iter().map(|l| l.stop(grace)))
            .await
            .into_iter()
            .sum();
        if cut > 0 {
            tracing::warn!(
                connections = cut,
                "client connections closed at the end of the grace period"
            );
        }
        join_all(pools.iter().map(|p| p.shutdown())).await;
        self.retiring.close();
        self.retiring.wait().await;
    }
}

fn bind_error(addr: SocketAddr, error: std::io::Error) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("cannot listen on {addr}: {error}"))
}

#[cfg(test)]
mod tests {
    use crate::health::machine::State as EndpointState;
    use rollcall_api::policy::PoolPolicy;

    use super::*;
    use crate::config::EndpointConfig;

    fn pool(name: &str, ports: &[u16]) -> PoolConfig {
        PoolConfig {
            name: name.into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            endpoints: ports
                .iter()
                .map(|port| EndpointConfig {
                    address: SocketAddr::from(([127, 0, 0, 1], *port)),
                    zone: None,
                    weight: 1,
                    terminating: false,
                })
                .collect(),
            policy: PoolPolicy::default(),
        }
    }

    /// Each pool's roster as the sidecar routes on it: an endpoint that left is Draining until
    /// the owner's next tick forgets it, so draining ones are not part of it.
    async fn endpoints(runtime: &Runtime) -> Vec<(String, Vec<u16>)> {
        runtime
            .views()
            .await
            .into_iter()
            .map(|v| {
                let ports = v
                    .endpoints
                    .iter()
                    .filter(|e| e.health.state != EndpointState::Draining)
                    .map(|e| e.health.address.port())
                    .collect();
                (v.name, ports)
            })
            .collect()
    }

    #[tokio::test]
    async fn applying_one_pool_changes_that_pool_alone_and_adds_a_new_one() {
        let runtime = Runtime::new(Arc::new(Metrics::new().unwrap()));
        let config = SidecarConfig {
            pools: vec![pool("shop/db", &[9001]), pool("shop/web", &[9101, 9102])],
        };
        runtime.apply(&config).await.unwrap();
        let listening = runtime.listen_addrs().await;
        runtime
            .apply_pool(&pool("shop/web", &[9102, 9103]))
            .await
            .unwrap();
        assert_eq!(
            endpoints(&runtime).await,
            [
                ("shop/db".to_string(), vec![9001]),
                ("shop/web".to_string(), vec![9102, 9103]),
            ]
        );
        // Same listen address asked for: no pool moved or restarted.
        assert_eq!(runtime.listen_addrs().await, listening);
        runtime
            .apply_pool(&pool("shop/new", &[9201]))
            .await
            .unwrap();
        assert_eq!(endpoints(&runtime).await.len(), 3);
        // After shutdown nothing is applied any more.
        runtime.shutdown_within(Duration::ZERO).await;
        runtime
            .apply_pool(&pool("shop/late", &[9301]))
            .await
            .unwrap();
        assert!(endpoints(&runtime).await.is_empty());
    }

    /// What one pool's roster change costs with many pools running: the whole config applied
    /// (as before) against that pool alone. A measurement, not a check:
    /// `cargo test -p rollcall-dataplane --release --lib apply_cost -- --ignored --nocapture`.
    #[tokio::test]
    #[ignore]
    async fn apply_cost_of_one_pools_change_among_many() {
        let runtime = Runtime::new(Arc::new(Metrics::new().unwrap()));
        let ports: Vec<u16> = (10_000..11_000).collect();
        // No probes: 100,000 endpoints nobody listens on would only measure connects.
        let pool = |name: &str, ports: &[u16]| {
            let mut p = pool(name, ports);
            p.policy.health_check.kind = rollcall_api::policy::HealthCheckType::None;
            p
        };
        let mut config = SidecarConfig {
            pools: (0..100)
                .map(|i| pool(&format!("shop/p{i:03}"), &ports))
                .collect(),
        };
        runtime.apply(&config).await.unwrap();
        let changed: Vec<u16> = (10_001..11_001).collect();
        let rounds = 20u32;
        let started = tokio::time::Instant::now();
        for round in 0..rounds {
            config.pools[0] = pool("shop/p000", if round % 2 == 0 { &changed } else { &ports });
            runtime.apply(&config).await.unwrap();
        }
        let whole = started.elapsed() / rounds;
        let started = tokio::time::Instant::now();
        for round in 0..rounds {
            let one = pool("shop/p000", if round % 2 == 0 { &changed } else { &ports });
            runtime.apply_pool(&one).await.unwrap();
        }
        let alone = started.elapsed() / rounds;
        eprintln!(
            "apply-cost: pools=100 endpoints_per_pool=1000 whole_config={whole:?} one_pool={alone:?} ratio={:.1}",
            whole.as_secs_f64() / alone.as_secs_f64()
        );
        runtime.shutdown_within(Duration::ZERO).await;
    }
}
