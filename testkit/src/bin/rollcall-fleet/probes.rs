//! `rollcall-fleet probes`: fleet health under a fleet, measured at the backends. The local API
//! server holds one pool of `--endpoints` real HTTP backends on 127.0.0.1 (each counting the
//! health checks it gets); the real controller serves it; `--sidecars` real sidecars run in this
//! process (`rollcall_dataplane::sidecar`, the sidecar's own crate as a library: its roster
//! client, fleet-health state, probes and health machine, each with its own connection and
//! streams). Then, with `healthCheck.checkers` = `--checkers`:
//!
//! 1. steady state: every endpoint checked (or, without fleet health, routed by every sidecar);
//! 2. probes: health checks arriving at the backends per endpoint per second, over a window;
//! 3. eject: one backend's health check fails; how long until each sidecar stops routing to it
//!    (the p99 over the sidecars);
//! 4. readmit: it passes again; how long until each routes to it again;
//! 5. fallback: the controller is killed; how long until every sidecar has switched to probing
//!    for itself, and until every one has a probe result of its own.
//!
//! The controller's CPU seconds per second and RSS are read over the probes window. Prints
//! one `fleet-probes:` line. The sidecars present no tokens (the controller runs
//! `--insecure-no-auth`), so every sidecar counts as its own node for the spread.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use rollcall_api::roster::{PoolRef, SidecarId};
use rollcall_dataplane::roster::{PoolBinding, RosterOptions};
use rollcall_dataplane::sidecar::{self, ControlledOptions};
use rollcall_testkit::system::{CRD_YAML, Controller, LocalApi};
use rollcall_testkit::{Behavior, TestBackend};

use crate::measure::{cpu_seconds, percentile, rss_mib, settle};

const NAMESPACE: &str = "fleet";
const POOL: &str = "probes";
/// How long the probes are counted.
const WINDOW: Duration = Duration::from_secs(10);
/// How often each sidecar's routing is looked at while an ejection or readmission spreads.
const POLL: Duration = Duration::from_millis(50);
/// Longest any one phase may take.
const PHASE: Duration = Duration::from_secs(120);

/// What one run measures.
pub struct Probes {
    pub sidecars: usize,
    pub endpoints: usize,
    pub checkers: u32,
    /// No active health checking at all (`healthCheck.type: None`, sidecars without fleet
    /// health): the controller's cost with the same fleet and none of this, its baseline.
    pub passive: bool,
}

/// The pool, its Service and one EndpointSlice per backend (each listens on its own port).
fn objects(backends: &[TestBackend], checkers: u32, passive: bool) -> String {
    let check = if passive {
        "{type: None}".to_string()
    } else {
        format!(
            "{{type: HTTP, path: /healthz, interval: 1s, timeout: 500ms, unhealthyThreshold: 3, \
             healthyThreshold: 2, checkers: {checkers}}}"
        )
    };
    let mut yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: rollcall-system}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{POOL}, namespace: {NAMESPACE}}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: 8080}}]}}\n---\n\
         apiVersion: rollcall.dev/v1alpha1\nkind: BackendPool\n\
         metadata: {{name: {POOL}, namespace: {NAMESPACE}}}\n\
         spec:\n  service: {{name: svc-{POOL}, port: http}}\n  healthCheck: {check}\n  \
         outlierDetection: {{maxEjectionPercent: 50}}\n"
    );
    for (i, b) in backends.iter().enumerate() {
        yaml.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: svc-{POOL}-{i}, namespace: {NAMESPACE}, \
             labels: {{kubernetes.io/service-name: svc-{POOL}}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {}, protocol: TCP}}]\n\
             endpoints: [{{addresses: [\"127.0.0.1\"], conditions: {{ready: true, serving: true, \
             terminating: false}}, targetRef: {{kind: Pod, name: backend-{i}, namespace: {NAMESPACE}}}}}]\n",
            b.addr().port()
        ));
    }
    yaml
}

/// Wait until `done` holds, looking every `POLL`; `Err` after `PHASE`.
async fn until(what: &str, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + PHASE;
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            bail!("{what}: not within {PHASE:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Seconds from `from` until each sidecar satisfies `reached` (looked at every `POLL`).
async fn spread(
    sidecars: &[sidecar::Sidecar],
    from: tokio::time::Instant,
    what: &str,
    reached: impl Fn(usize, &sidecar::Sidecar) -> bool,
) -> anyhow::Result<Vec<f64>> {
    let mut at: Vec<Option<f64>> = vec![None; sidecars.len()];
    until(what, || {
        for (i, s) in sidecars.iter().enumerate() {
            if at[i].is_none() && reached(i, s) {
                at[i] = Some(from.elapsed().as_secs_f64());
            }
        }
        at.iter().all(Option::is_some)
    })
    .await?;
    Ok(at.into_iter().flatten().collect())
}

pub async fn run(p: Probes) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("rollcall-fleet-probes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let api = LocalApi::start(&dir, &[]).await?;
    api.apply(CRD_YAML, "fleet").await?;
    let mut backends = Vec::with_capacity(p.endpoints);
    for _ in 0..p.endpoints {
        backends.push(TestBackend::spawn(Behavior::ok()).await?);
    }
    api.apply(&objects(&backends, p.checkers, p.passive), "fleet")
        .await?;
    let flags: Vec<String> = [
        "--insecure-no-auth".to_string(),
        // Every sidecar connects from 127.0.0.1 (in a cluster each pod has its own address).
        "--max-unauthenticated-connections-per-source".to_string(),
        (p.sidecars + 64).to_string(),
        "--max-unauthenticated-connections".to_string(),
        (p.sidecars + 2048).to_string(),
    ]
    .into();
    let mut controller =
        Controller::start(&api.kubeconfig, "fleet-controller", &dir, &flags).await?;
    controller.wait_ready(Duration::from_secs(60)).await?;
    let pid = controller.process.pid().context("controller pid")?;

    let pool_ref = PoolRef::new(NAMESPACE, POOL);
    let name = pool_ref.to_string();
    let mut sidecars = Vec::with_capacity(p.sidecars);
    for i in 0..p.sidecars {
        let mut roster = RosterOptions::new(
            controller.url(),
            vec![PoolBinding {
                pool: pool_ref.clone(),
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            }],
            SidecarId {
                namespace: NAMESPACE.into(),
                pod: format!("client-{i}"),
                instance: format!("{i}"),
            },
        );
        roster.fleet_health = !p.passive;
        let started = sidecar::start_controlled(ControlledOptions {
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            roster,
        })
        .await?;
        sidecars.push(started);
    }
    let addrs: Vec<SocketAddr> = backends.iter().map(TestBackend::addr).collect();
    let routes =
        |s: &sidecar::Sidecar, addr: SocketAddr| s.runtime.routes_to(&name, addr).unwrap_or(false);
    until("every sidecar routes to every endpoint", || {
        sidecars.iter().all(|s| addrs.iter().all(|a| routes(s, *a)))
    })
    .await?;
    // Steady state: every endpoint has its checkers' verdicts (a whole probe interval and a
    // report later), and the controller has settled.
    let pools: Api<DynamicObject> = Api::namespaced_with(
        api.client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rollcall.dev",
            "v1alpha1",
            "BackendPool",
        )),
    );
    let deadline = tokio::time::Instant::now() + PHASE;
    loop {
        let pool = pools.get(POOL).await?;
        let fleet = &pool.data["status"]["fleetHealth"];
        let checked = fleet["fullyChecked"].as_u64() == Some(p.endpoints as u64);
        if p.passive || p.checkers == 0 || fleet["probeAll"].as_bool() == Some(true) || checked {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("the endpoints were never all checked: {fleet}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = settle(&[pid], Duration::from_secs(30)).await;

    // Probes at the backends.
    for b in &backends {
        b.reset_counters();
    }
    let cpu_before = cpu_seconds(pid);
    let started = tokio::time::Instant::now();
    tokio::time::sleep(WINDOW).await;
    let seconds = started.elapsed().as_secs_f64();
    let checks: u64 = backends.iter().map(TestBackend::health_checks).sum();
    let probes_per_endpoint_s = checks as f64 / p.endpoints as f64 / seconds;
    let controller_cpu_s = (cpu_seconds(pid) - cpu_before) / seconds;
    let rss = rss_mib(pid);

    if p.passive {
        println!(
            "fleet-probes: sidecars={} endpoints={} checkers=off interval_s=- probes_per_endpoint_s={:.2} \
             eject_p99_s=- readmit_p99_s=- fallback_s=- fallback_probed_s=- controller_cpu_s={:.3} rss_mib={:.1}",
            p.sidecars, p.endpoints, probes_per_endpoint_s, controller_cpu_s, rss,
        );
        // The process ends here, and every sidecar with it.
        return Ok(());
    }

    // A failing health check, then its recovery, as every sidecar sees them.
    let victim = &backends[0];
    let addr = victim.addr();
    victim.set_healthz(false);
    let failed = tokio::time::Instant::now();
    let mut ejected = spread(&sidecars, failed, "ejected everywhere", |_, s| {
        !routes(s, addr)
    })
    .await?;
    victim.set_healthz(true);
    let recovered = tokio::time::Instant::now();
    let mut readmitted = spread(&sidecars, recovered, "readmitted everywhere", |_, s| {
        routes(s, addr)
    })
    .await?;

    // The controller dies: every sidecar probes for itself again. Two moments per sidecar: when
    // it switched (its probe tasks started: `rollcall_fleet_fallback` turned 1), and when it had
    // the first result of a probe of its own, which also depends on this machine running every
    // sidecar's probes at once.
    let fallback_probes = |s: &sidecar::Sidecar| {
        s.metrics
            .fleet_probes
            .with_label_values(&[name.as_str(), "fallback"])
            .get()
    };
    let switched = |s: &sidecar::Sidecar| {
        s.metrics
            .fleet_fallback
            .with_label_values(&[name.as_str()])
            .get()
            == 1
    };
    let before: Vec<u64> = sidecars.iter().map(fallback_probes).collect();
    controller.process.kill().await;
    let killed = tokio::time::Instant::now();
    let (fallback, fallback_probed) = if p.checkers == 0 {
        (0.0, 0.0)
    } else {
        let mut lost_at: Vec<Option<f64>> = vec![None; sidecars.len()];
        let mut switch_at: Vec<Option<f64>> = vec![None; sidecars.len()];
        let mut probe_at: Vec<Option<f64>> = vec![None; sidecars.len()];
        until("every sidecar probing for itself", || {
            let now = killed.elapsed().as_secs_f64();
            for (i, s) in sidecars.iter().enumerate() {
                if lost_at[i].is_none() && s.metrics.controller_connected.get() == 0 {
                    lost_at[i] = Some(now);
                }
                if switch_at[i].is_none() && switched(s) {
                    switch_at[i] = Some(now);
                }
                if probe_at[i].is_none() && fallback_probes(s) > before[i] {
                    probe_at[i] = Some(now);
                }
            }
            switch_at.iter().chain(&probe_at).all(Option::is_some)
        })
        .await?;
        // How the moments spread over the fleet, for reading the maximum: on stderr.
        let mut losts: Vec<f64> = lost_at.iter().flatten().copied().collect();
        let mut switches: Vec<f64> = switch_at.iter().flatten().copied().collect();
        eprintln!(
            "fleet-probes: stream lost p50={:.2} max={:.2}; switched p50={:.2} p90={:.2} max={:.2}",
            percentile(&mut losts, 0.5),
            percentile(&mut losts, 1.0),
            percentile(&mut switches, 0.5),
            percentile(&mut switches, 0.9),
            percentile(&mut switches, 1.0)
        );
        let last = |at: Vec<Option<f64>>| at.into_iter().flatten().fold(0.0, f64::max);
        (last(switch_at), last(probe_at))
    };
    println!(
        "fleet-probes: sidecars={} endpoints={} checkers={} interval_s=1 probes_per_endpoint_s={:.2} \
         eject_p99_s={:.2} readmit_p99_s={:.2} fallback_s={:.2} fallback_probed_s={:.2} \
         controller_cpu_s={:.3} rss_mib={:.1}",
        p.sidecars,
        p.endpoints,
        p.checkers,
        probes_per_endpoint_s,
        percentile(&mut ejected, 0.99),
        percentile(&mut readmitted, 0.99),
        fallback,
        fallback_probed,
        controller_cpu_s,
        rss,
    );
    // The process ends now, and every sidecar with it.
    drop(sidecars);
    Ok(())
}
