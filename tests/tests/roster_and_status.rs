//! The controller's roster service and real sidecars, together: a roster published by the
//! controller becomes live routing in every sidecar, and an ejection the sidecars make comes back
//! into the pool's aggregated status. Everything but Kubernetes is real: the controller's gRPC
//! server, hub and report store, two sidecars started the way `rollcall-sidecar --controller`
//! starts them, and HTTP backends on 127.0.0.1 that are killed. (The Kubernetes side, reflectors
//! and status writes, is tested against kube's mock API service in the controller crate; a local
//! API server fixture comes next.)

use std::net::SocketAddr;
use std::time::Duration;

use http::StatusCode;
use k8s_openapi::jiff::Timestamp;
use rollcall_api::policy::{DurationString, HealthCheck, HealthCheckType, Percent, PoolPolicy};
use rollcall_api::roster::{Endpoint, PoolRef, PoolState, Roster, SidecarId};
use rollcall_controller::crd::BackendPoolStatus;
use rollcall_controller::metrics::Metrics;
use rollcall_controller::server::{self, Limits, State};
use rollcall_controller::status::aggregate::{Input, Served, aggregate};
use rollcall_controller::unix_ms;
use rollcall_dataplane::roster::{Backoff, PoolBinding, RosterOptions};
use rollcall_dataplane::sidecar::{self, ControlledOptions, Sidecar};
use rollcall_testkit::{Behavior, TestBackend};
use tokio::net::TcpListener;

const PATIENCE: Duration = Duration::from_secs(30);

struct Controller {
    addr: SocketAddr,
    state: State,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Controller {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = State::open(Metrics::new().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server::serve(
            listener,
            state.clone(),
            Limits::default(),
            None,
            async {
                stopped.await.ok();
            },
        ));
        state.hub.mark_synced(unix_ms(), []);
        Self {
            addr,
            state,
            _stop: stop,
        }
    }

    fn publish(&self, pool: &PoolRef, roster: &Roster) -> u64 {
        self.state
            .hub
            .publish(pool, PoolState::Roster(roster.clone()), unix_ms())
            .expect("a changed roster gets a new version")
    }

    /// The pool's status as the controller would write it now.
    fn status(&self, pool: &PoolRef, version: u64, roster: &Roster) -> BackendPoolStatus {
        let connected = self.state.hub.watchers(pool) as u32;
        self.state
            .reports
            .with_pool(pool, tokio::time::Instant::now() - PATIENCE, |reports| {
                aggregate(Input {
                    generation: Some(1),
                    served: Served::Roster { version, roster },
                    reports,
                    connected,
                    previous: None,
                    now: Timestamp::now(),
                })
            })
    }

    async fn wait_for_status(
        &self,
        pool: &PoolRef,
        version: u64,
        roster: &Roster,
        what: &str,
        check: impl Fn(&BackendPoolStatus) -> bool,
    ) -> BackendPoolStatus {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let status = self.status(pool, version, roster);
            if check(&status) {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "waited {PATIENCE:?} for {what}; status is {status:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn roster(backends: &[&TestBackend]) -> Roster {
    let policy = PoolPolicy {
        health_check: HealthCheck {
            kind: HealthCheckType::Http,
            interval: DurationString::millis(100),
            timeout: DurationString::millis(100),
            jitter: Percent::new(0.0),
            ..Default::default()
        },
        ..Default::default()
    };
    Roster {
        endpoints: backends
            .iter()
            .enumerate()
            .map(|(i, b)| Endpoint {
                pod: Some(format!("web-{i}")),
                zone: Some("a".into()),
                ..Endpoint::serving(b.addr())
            })
            .collect(),
        policy,
        service: "shop/web:http".into(),
    }
}

async fn sidecar(controller: &Controller, pod: &str) -> Sidecar {
    let pools: Vec<PoolBinding> = vec!["shop/web=127.0.0.1:0".parse().unwrap()];
    let identity = SidecarId {
        namespace: "shop".into(),
        pod: pod.into(),
        instance: pod.into(),
    };
    let mut options = RosterOptions::new(format!("http://{}", controller.addr), pools, identity);
    options.heartbeat = Duration::from_millis(500);
    options.report_interval = Duration::from_millis(50);
    options.backoff = Backoff {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
    };
    sidecar::start_controlled(ControlledOptions {
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        roster: options,
    })
    .await
    .expect("sidecar starts")
}

async fn listen(sidecar: &Sidecar) -> SocketAddr {
    sidecar.runtime.listen_addrs().await["shop/web"]
}

/// GET / through the sidecar until it is answered 200 (the first roster may still be on its
/// way), then return which backend answered.
async fn routed(listen: SocketAddr) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Ok(reply) = rollcall_testkit::client::get(listen, "/").await
            && reply.status == StatusCode::OK
        {
            return reply.text();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{listen} never routed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_roster_routes_in_every_sidecar_and_their_ejections_reach_the_status() {
    let backends = [
        TestBackend::spawn(Behavior::ok()).await.unwrap(),
        TestBackend::spawn(Behavior::ok()).await.unwrap(),
        TestBackend::spawn(Behavior::ok()).await.unwrap(),
    ];
    let pool = PoolRef::new("shop", "web");
    let controller = Controller::start().await;
    let all = roster(&backends.iter().collect::<Vec<_>>());
    let version = controller.publish(&pool, &all);

    let sidecars = [
        sidecar(&controller, "front-1").await,
        sidecar(&controller, "front-2").await,
    ];
    for s in &sidecars {
        routed(listen(s).await).await;
    }
    controller
        .wait_for_status(
            &pool,
            version,
            &all,
            "both sidecars reporting all healthy",
            |s| {
                s.sidecars.as_ref().is_some_and(|c| c.reporting == 2)
                    && s.endpoints.as_ref().is_some_and(|e| e.healthy == 3)
            },
        )
        .await;

    backends[1].kill().await;
    let status = controller
        .wait_for_status(
            &pool,
            version,
            &all,
            "the killed backend ejected by both sidecars",
            |s| {
                s.ejections
                    .iter()
                    .any(|e| e.address == backends[1].addr().to_string() && e.ejected_by == 2)
            },
        )
        .await;
    let ejection = &status.ejections[0];
    assert_eq!(ejection.of, 2);
    assert_eq!(ejection.pod.as_deref(), Some("web-1"));
    assert!(
        ["ProbeFailures", "ConsecutiveGatewayErrors"].contains(&ejection.reason.as_str()),
        "{ejection:?}"
    );
    assert_eq!(status.endpoints.as_ref().map(|e| e.ejected), Some(1));
    for s in &sidecars {
        for _ in 0..10 {
            assert_ne!(
                routed(listen(s).await).await,
                format!("backend {}\n", backends[1].addr().port())
            );
        }
    }

    // The controller drops the dead endpoint from the roster: the sidecars follow.
    let two = roster(&[&backends[0], &backends[2]]);
    let version = controller.publish(&pool, &two);
    controller
        .wait_for_status(&pool, version, &two, "the new roster acknowledged", |s| {
            s.endpoints
                .as_ref()
                .is_some_and(|e| e.total == 2 && e.healthy == 2)
                && s.ejections.is_empty()
        })
        .await;
    for s in sidecars {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roster_the_sidecars_refuse_shows_in_the_status_with_their_reason_at_once() {
    let backends = [TestBackend::spawn(Behavior::ok()).await.unwrap()];
    let pool = PoolRef::new("shop", "web");
    let controller = Controller::start().await;
    let good = roster(&backends.iter().collect::<Vec<_>>());
    let first = controller.publish(&pool, &good);
    let sidecars = [
        sidecar(&controller, "front-1").await,
        sidecar(&controller, "front-2").await,
    ];
    for s in &sidecars {
        routed(listen(s).await).await;
    }
    let ready = |s: &BackendPoolStatus| -> (String, String, String) {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
            .unwrap_or_default()
    };
    controller
        .wait_for_status(
            &pool,
            first,
            &good,
            "both sidecars on the first roster",
            |s| {
                s.sidecars.as_ref().is_some_and(|c| c.reporting == 2)
                    && ready(s).1 == "RosterServed"
            },
        )
        .await;

    // A policy these sidecars will not run: a probe timeout longer than its interval.
    let mut bad = good.clone();
    bad.policy.health_check.timeout = DurationString::secs(5);
    let refused = controller.publish(&pool, &bad);
    let status = controller
        .wait_for_status(&pool, refused, &bad, "the refusal in the status", |s| {
            ready(s).1 == "RosterRefused"
        })
        .await;
    let (ok, _, message) = ready(&status);
    assert_eq!(ok, "False");
    assert!(
        message.starts_with(&format!(
            "every reporting sidecar (2) refused roster version {refused}: policy.healthCheck"
        )),
        "{message}"
    );
    // They keep routing on the roster they had.
    for s in &sidecars {
        routed(listen(s).await).await;
    }

    // A usable roster again: the refusal is gone from the status.
    let mut fixed = good.clone();
    fixed.policy.panic_threshold = Percent::new(30.0);
    let third = controller.publish(&pool, &fixed);
    controller
        .wait_for_status(&pool, third, &fixed, "the refusal cleared", |s| {
            let (ok, reason, message) = ready(s);
            ok == "True" && reason == "RosterServed" && !message.contains("refused")
        })
        .await;
}
