//! Shared harness of the sidecar's integration tests: a real sidecar (the same `start` the binary
//! calls) in front of real backends on 127.0.0.1, a config file it watches, and waits that end
//! on an observed event (a state reached, a count reached) with a generous deadline that only
//! turns a hang into a readable failure.
#![allow(dead_code)]

pub mod backends;
pub mod load;
pub mod raw;
pub mod relay;
pub mod websocket;

use std::net::SocketAddr;
use std::time::Duration;

use rollcall_dataplane::health::machine::State;
use rollcall_dataplane::pool::{EndpointView, PoolView};
use rollcall_dataplane::pool::{Http1Engine, Tuning};
use rollcall_dataplane::sidecar::{self, Options, RunOptions, Sidecar};
use tempfile::TempDir;

/// How long a wait may take before the test fails with what it saw. Only a hang trips it.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Await `event`, failing the test after `PATIENCE` instead of hanging it.
pub async fn within<T>(event: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, event)
        .await
        .expect("waited too long for an event")
}

pub struct Harness {
    pub sidecar: Sidecar,
    pub dir: TempDir,
}

impl Harness {
    /// Start a sidecar with `yaml` as its config file.
    pub async fn start(yaml: &str) -> Self {
        Self::start_with(yaml, Tuning::default()).await
    }

    /// Start a sidecar with `yaml` as its config file and these request-path knobs.
    pub async fn start_with(yaml: &str, tuning: Tuning) -> Self {
        let run = RunOptions {
            tuning,
            ..RunOptions::default()
        };
        Self::start_run(yaml, run).await
    }

    /// Start a sidecar with `yaml` as its config file and these run options. The HTTP/1
    /// engine is `ROLLCALL_HTTP1_ENGINE`'s when it is set, so one suite runs on either.
    pub async fn start_run(yaml: &str, mut run: RunOptions) -> Self {
        if std::env::var_os("ROLLCALL_HTTP1_ENGINE").is_some() {
            run.tuning.http1_engine = Self::engine_under_test();
        }
        Self::start_exactly(yaml, run).await
    }

    /// The HTTP/1 engine `start_run` gives a sidecar (`ROLLCALL_HTTP1_ENGINE`, else the default).
    pub fn engine_under_test() -> Http1Engine {
        std::env::var("ROLLCALL_HTTP1_ENGINE").map_or(Http1Engine::default(), |engine| {
            engine
                .parse()
                .expect("ROLLCALL_HTTP1_ENGINE: fast or hyper")
        })
    }

    /// Start a sidecar with `yaml` as its config file and exactly these run options.
    pub async fn start_exactly(yaml: &str, run: RunOptions) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sidecar.yaml");
        std::fs::write(&path, yaml).expect("write config");
        let sidecar = sidecar::start_with(
            Options {
                config: path,
                admin_listen: "127.0.0.1:0".parse().unwrap(),
                reload_interval: Duration::from_millis(50),
            },
            run,
        )
        .await
        .expect("sidecar starts");
        Self { sidecar, dir }
    }

    /// Replace the config file (the watcher picks it up).
    pub fn rewrite(&self, yaml: &str) {
        let tmp = self.dir.path().join("sidecar.yaml.tmp");
        std::fs::write(&tmp, yaml).expect("write config");
        std::fs::rename(&tmp, self.dir.path().join("sidecar.yaml")).expect("swap config");
    }

    /// Where pool `name` listens.
    pub async fn listen(&self, name: &str) -> SocketAddr {
        self.sidecar.runtime.listen_addrs().await[name]
    }

    pub async fn pool(&self, name: &str) -> PoolView {
        self.sidecar
            .runtime
            .views()
            .await
            .into_iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no pool {name}"))
    }

    pub async fn endpoint(&self, pool: &str, addr: SocketAddr) -> Option<EndpointView> {
        self.pool(pool)
            .await
            .endpoints
            .into_iter()
            .find(|e| e.health.address == addr)
    }

    /// Wait until `check` holds for the pool's view; fail with the view after `PATIENCE`.
    pub async fn wait_for(
        &self,
        pool: &str,
        what: &str,
        check: impl Fn(&PoolView) -> bool,
    ) -> PoolView {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let view = self.pool(pool).await;
            if check(&view) {
                return view;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("waited {PATIENCE:?} for {what}; pool is now:\n{view:#?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Wait until endpoint `addr` of `pool` is in `state`.
    pub async fn wait_for_state(&self, pool: &str, addr: SocketAddr, state: State) -> EndpointView {
        let view = self
            .wait_for(pool, &format!("{addr} to be {state}"), |v| {
                v.endpoints
                    .iter()
                    .any(|e| e.health.address == addr && e.health.state == state)
            })
            .await;
        view.endpoints
            .into_iter()
            .find(|e| e.health.address == addr)
            .expect("endpoint present")
    }

    /// Wait until no endpoint of `pool` has a request in flight: every guard was released.
    pub async fn wait_idle(&self, pool: &str) {
        self.wait_for(pool, "every in-flight count back to 0", |v| {
            v.endpoints.iter().all(|e| e.in_flight == 0)
        })
        .await;
    }

    /// Wait until the sidecar's metrics contain `line`.
    pub async fn wait_for_metric(&self, line: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let metrics = self.metrics();
            if metrics.contains(line) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "metrics never showed {line:?}:\n{metrics}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn metrics(&self) -> String {
        self.sidecar.metrics.render()
    }
}

/// A port free right now on 127.0.0.1 and not given before (for configs that name two listeners).
pub fn free_port() -> SocketAddr {
    rollcall_testkit::system::free_port().expect("a free port")
}

/// A one-pool config named `web` listening on a free port.
pub fn config(endpoints: &[SocketAddr], policy: &str) -> String {
    let mut yaml = String::from("pools:\n- name: web\n  listen: 127.0.0.1:0\n  endpoints:\n");
    for e in endpoints {
        yaml.push_str(&format!("  - address: \"{e}\"\n"));
    }
    yaml.push_str(&format!("  policy: {policy}\n"));
    yaml
}

/// Fast probes, so tests see health change in a fraction of a second.
pub const FAST_PROBES: &str = "{type: HTTP, path: /healthz, interval: 100ms, timeout: 100ms, jitter: 0%, healthyThreshold: 2, unhealthyThreshold: 3}";
