//! `rollcall-fleet`: the controller under a fleet. `run` starts the local API server with
//! pools totalling `--endpoints` endpoints (`--pools` of them), the real controller, and
//! `--sidecars` simulated sidecars in a child process (`sim`); then it changes one endpoint
//! through the API server `--changes` times and measures, from each write to each sidecar's
//! receipt of the new roster, the propagation latency; the controller's RSS and CPU; and after
//! a controller crash and restart, how long until every sidecar runs the current roster again.
//! One line per scenario starts `fleet:`.

mod measure;
mod probes;
mod sim;
mod world;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use rollcall_testkit::system::{CRD_YAML, Controller, LocalApi, identity};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::measure::{cpu_seconds, percentile, rss_mib, settle};

/// The simulated sidecars share one process where real ones each have their own heap. Under
/// glibc's allocator, a thousand of them assembling snapshots at once after a controller
/// restart contended for its arenas: resync took 3.8-9.4 s, most of it the simulation's own
/// allocations, not the controller's. With mimalloc's thread-local heaps it takes 2.2-2.9 s.
/// The controller, whose cost is measured, keeps the system allocator.
#[global_allocator]
static SIMULATION_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "rollcall-fleet",
    about = "The controller under a fleet of simulated sidecars"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure one scenario.
    Run {
        #[arg(long, default_value_t = 1000)]
        sidecars: usize,
        #[arg(long, default_value_t = 10_000)]
        endpoints: usize,
        #[arg(long, default_value_t = 1)]
        pools: usize,
        /// Pools each sidecar watches (spread round robin).
        #[arg(long, default_value_t = 1)]
        pools_per_sidecar: usize,
        #[arg(long, default_value_t = 5)]
        changes: usize,
        /// A name for the `fleet:` line.
        #[arg(long, default_value = "fleet")]
        scenario: String,
        /// Sidecars present no token and the controller runs `--insecure-no-auth` (otherwise
        /// each simulated sidecar is a Pod with its own bound ServiceAccount token, reviewed
        /// by the controller with TokenReview as in a cluster).
        #[arg(long)]
        no_auth: bool,
        /// The roster port serves TLS (a self-signed certificate for `localhost`, given to
        /// the controller as the chart's Secret would be) and the sidecars verify it.
        #[arg(long)]
        tls: bool,
    },
    /// Fleet health: probes per endpoint at the backends, ejection and readmission at every
    /// sidecar, and the fallback when the controller dies (`probes.rs`).
    Probes {
        #[arg(long, default_value_t = 1000)]
        sidecars: usize,
        #[arg(long, default_value_t = 100)]
        endpoints: usize,
        /// `healthCheck.checkers`; 0 has every sidecar probe every endpoint.
        #[arg(long, default_value_t = 3)]
        checkers: u32,
        /// No health checks at all: the controller's baseline with the same fleet.
        #[arg(long)]
        passive: bool,
    },
    /// The simulated sidecars (started by `run`).
    Sim {
        #[arg(long)]
        controller: String,
        #[arg(long)]
        sidecars: usize,
        #[arg(long)]
        pools: usize,
        #[arg(long)]
        pools_per_sidecar: usize,
        /// One bearer token per line, line `i` for sidecar `i`.
        #[arg(long)]
        tokens: Option<std::path::PathBuf>,
        /// Connect with TLS, trusting only this certificate (PEM), for the name `localhost`.
        #[arg(long)]
        tls_ca: Option<std::path::PathBuf>,
    },
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Which pools sidecar `i` watches.
fn pools_of(i: usize, pools: usize, per: usize) -> Vec<usize> {
    (0..per.min(pools)).map(|k| (i + k) % pools).collect()
}

/// Latest `(version, at_ms)` per (sidecar, pool), fed from the simulator's lines.
#[derive(Default)]
struct Seen {
    latest: HashMap<(usize, String), (u64, u64)>,
}

impl Seen {
    fn record(&mut self, line: &str) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            return;
        };
        let (Some(s), Some(pool), Some(version), Some(at)) = (
            v["sidecar"].as_u64(),
            v["pool"].as_str(),
            v["version"].as_u64(),
            v["at_ms"].as_u64(),
        ) else {
            return;
        };
        let entry = self
            .latest
            .entry((s as usize, pool.to_string()))
            .or_insert((0, 0));
        if version >= entry.0 {
            *entry = (version, at);
        }
    }
}

/// How the roster port is reached: with tokens, with TLS.
#[derive(Clone, Copy)]
struct Security {
    auth: bool,
    tls: bool,
}

async fn run(
    sidecars: usize,
    endpoints: usize,
    pools: usize,
    per: usize,
    changes: usize,
    scenario: &str,
    Security { auth, tls }: Security,
) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("rollcall-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let api = LocalApi::start(&dir, &["--history", "200000"]).await?;
    api.apply(CRD_YAML, "fleet").await?;
    api.apply(&world::base_yaml(pools), "fleet").await?;
    let per_pool = endpoints / pools;
    let slices_per_pool = per_pool.div_ceil(world::PER_SLICE);
    let gvk = GroupVersionKind::gvk("discovery.k8s.io", "v1", "EndpointSlice");
    let slice_api: Api<DynamicObject> = Api::namespaced_with(
        api.client.clone(),
        world::NAMESPACE,
        &ApiResource::from_gvk(&gvk),
    );
    for p in 0..pools {
        for s in 0..slices_per_pool {
            let slice = world::slice_json(p, s, true);
            slice_api
                .patch(
                    &world::slice_name(p, s),
                    &PatchParams::apply("fleet").force(),
                    &Patch::Apply(&slice),
                )
                .await?;
        }
    }
    // Each simulated sidecar a Pod with its own token, as the kubelet would project it.
    let tokens = dir.join("tokens");
    let auth_started = now_ms();
    if auth {
        let mut lines = String::new();
        for i in 0..sidecars {
            let pod = identity::create_pod(
                &api.client,
                world::NAMESPACE,
                "fleet-client",
                &sim::pod_name(i),
            )
            .await?;
            let token = identity::token(
                &api.client,
                &pod,
                identity::AUDIENCE,
                Duration::from_secs(3600),
            )
            .await?;
            lines.push_str(&token);
            lines.push('\n');
        }
        std::fs::write(&tokens, lines)?;
    }
    if auth {
        eprintln!(
            "fleet: {sidecars} pods and tokens made in {:.1} s",
            (now_ms() - auth_started) as f64 / 1000.0
        );
    }
    let mut flags: Vec<String> = if auth {
        Vec::new()
    } else {
        vec!["--insecure-no-auth".to_string()]
    };
    // Every simulated sidecar connects from 127.0.0.1; in a cluster each pod has its own
    // address, so one source holding this many connections before they authenticate is normal
    // here only.
    flags.extend([
        "--max-unauthenticated-connections-per-source".to_string(),
        (sidecars + 64).to_string(),
        "--max-unauthenticated-connections".to_string(),
        (sidecars + 2048).to_string(),
    ]);
    let tls_ca = dir.join("tls.crt");
    if tls {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
        std::fs::write(&tls_ca, certified.cert.pem())?;
        std::fs::write(dir.join("tls.key"), certified.signing_key.serialize_pem())?;
        flags.extend([
            "--tls-cert-file".to_string(),
            tls_ca.display().to_string(),
            "--tls-key-file".to_string(),
            dir.join("tls.key").display().to_string(),
        ]);
    }
    let mut controller =
        Controller::start(&api.kubeconfig, "fleet-controller", &dir, &flags).await?;
    controller.wait_ready(Duration::from_secs(60)).await?;
    let pid = controller.process.pid().context("controller pid")?;
    let idle_rss = rss_mib(pid);

    let exe = std::env::current_exe()?;
    let sim_url = if tls {
        controller.url().replacen("http://", "https://", 1)
    } else {
        controller.url()
    };
    let mut sim = Command::new(exe)
        .args(["sim", "--controller", &sim_url])
        .args([
            "--sidecars",
            &sidecars.to_string(),
            "--pools",
            &pools.to_string(),
        ])
        .args(["--pools-per-sidecar", &per.to_string()])
        .args(if auth {
            vec!["--tokens".to_string(), tokens.display().to_string()]
        } else {
            Vec::new()
        })
        .args(if tls {
            vec!["--tls-ca".to_string(), tls_ca.display().to_string()]
        } else {
            Vec::new()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(sim.stdout.take().context("sim stdout")?).lines();
    let mut seen = Seen::default();
    let expected: usize = (0..sidecars).map(|i| pools_of(i, pools, per).len()).sum();
    let started = now_ms();
    let cpu_before = cpu_seconds(pid);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while seen.latest.len() < expected {
        match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Ok(Ok(Some(line))) => seen.record(&line),
            _ => bail!(
                "only {} of {expected} sidecar-pool rosters arrived",
                seen.latest.len()
            ),
        }
    }
    let connect_s = (now_ms() - started) as f64 / 1000.0;
    // Let the initial reports (every sidecar's full pool health) be ingested: the changes
    // measure a fleet in its steady state, not one still busy with its first reports.
    let sim_pid = sim.id().context("sim pid")?;
    let (settle, settled) = settle(&[pid, sim_pid], Duration::from_secs(120)).await;
    if !settled {
        eprintln!("fleet: the controller or the sims were still busy after {settle:?}");
    }
    let settle_s = settle.as_secs_f64();
    let ingest_cpu = cpu_seconds(pid) - cpu_before;
    let connected_rss = rss_mib(pid);

    let mut latencies = Vec::new();
    // The first sidecar to have each change: the pipeline's own delay, before the fan-out.
    let mut first_per_change = Vec::new();
    let cpu_changes = cpu_seconds(pid);
    let timings_before = timings(&controller).await;
    for c in 0..changes {
        let pool = world::pool_name(0);
        let watchers: Vec<usize> = (0..sidecars)
            .filter(|i| pools_of(*i, pools, per).contains(&0))
            .collect();
        let before: u64 = watchers
            .iter()
            .filter_map(|i| {
                seen.latest
                    .get(&(*i, format!("{}/{pool}", world::NAMESPACE)))
            })
            .map(|(v, _)| *v)
            .max()
            .unwrap_or(0);
        let t0 = now_ms();
        let slice = world::slice_json(0, 0, c % 2 == 1);
        slice_api
            .patch(
                &world::slice_name(0, 0),
                &PatchParams::apply("fleet").force(),
                &Patch::Apply(&slice),
            )
            .await?;
        let key = |i: usize| (i, format!("{}/{pool}", world::NAMESPACE));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while !watchers
            .iter()
            .all(|i| seen.latest.get(&key(*i)).is_some_and(|(v, _)| *v > before))
        {
            match tokio::time::timeout_at(deadline, lines.next_line()).await {
                Ok(Ok(Some(line))) => seen.record(&line),
                _ => bail!("change {c} did not reach every sidecar"),
            }
        }
        let these: Vec<f64> = watchers
            .iter()
            .filter_map(|i| seen.latest.get(&key(*i)))
            .map(|(_, at)| at.saturating_sub(t0) as f64)
            .collect();
        first_per_change.push(these.iter().copied().fold(f64::INFINITY, f64::min));
        latencies.extend(these);
    }
    let changes_cpu = cpu_seconds(pid) - cpu_changes;
    let changed_rss = rss_mib(pid);
    let (reconcile_ms, push_ms) = timings(&controller).await.since(&timings_before);

    // Crash and restart: how long until every sidecar is back on the current roster.
    let current: HashMap<(usize, String), u64> = seen
        .latest
        .iter()
        .map(|(k, (v, _))| (k.clone(), *v))
        .collect();
    let t0 = now_ms();
    controller.crash_and_restart().await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while !current.iter().all(|(k, v)| {
        seen.latest
            .get(k)
            .is_some_and(|(nv, at)| *at >= t0 && nv >= v)
    }) {
        match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Ok(Ok(Some(line))) => seen.record(&line),
            _ => bail!("not every sidecar resynced after the restart"),
        }
    }
    let resync_s = (now_ms() - t0) as f64 / 1000.0;
    let _ = sim.kill().await;
    controller.process.kill().await;
    println!(
        "fleet: scenario={scenario} sidecars={sidecars} endpoints={endpoints} pools={pools} \
         auth={auth} tls={tls} \
         first_ms={:.0} p50_ms={:.0} p99_ms={:.0} max_ms={:.0} rss_mib={:.0} idle_rss_mib={:.0} \
         rss_after_changes_mib={:.0} connect_s={connect_s:.1} settle_s={settle_s:.1} \
         ingest_cpu_s={ingest_cpu:.1} \
         cpu_per_change_s={:.2} resync_s={resync_s:.1} reconcile_ms={reconcile_ms:.1} \
         push_ms={push_ms:.1}",
        first_per_change.iter().sum::<f64>() / first_per_change.len().max(1) as f64,
        percentile(&mut latencies.clone(), 0.5),
        percentile(&mut latencies.clone(), 0.99),
        percentile(&mut latencies, 1.0),
        connected_rss,
        idle_rss,
        changed_rss,
        changes_cpu / changes.max(1) as f64,
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Sums and counts of the controller's reconcile and push-latency histograms.
#[derive(Default)]
struct Timings {
    reconcile: (f64, f64),
    push: (f64, f64),
}

impl Timings {
    /// Mean milliseconds per reconcile and per push since `before`.
    fn since(&self, before: &Self) -> (f64, f64) {
        let mean = |now: (f64, f64), then: (f64, f64)| {
            let n = now.1 - then.1;
            if n > 0.0 {
                1000.0 * (now.0 - then.0) / n
            } else {
                0.0
            }
        };
        (
            mean(self.reconcile, before.reconcile),
            mean(self.push, before.push),
        )
    }
}

async fn timings(controller: &Controller) -> Timings {
    let Ok(reply) = rollcall_testkit::client::get(controller.metrics, "/metrics").await else {
        return Timings::default();
    };
    let text = reply.text();
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0.0)
    };
    Timings {
        reconcile: (
            value("rollcall_controller_reconcile_duration_seconds_sum"),
            value("rollcall_controller_reconcile_duration_seconds_count"),
        ),
        push: (
            value("rollcall_controller_roster_push_latency_seconds_sum"),
            value("rollcall_controller_roster_push_latency_seconds_count"),
        ),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Run {
            sidecars,
            endpoints,
            pools,
            pools_per_sidecar,
            changes,
            scenario,
            no_auth,
            tls,
        } => {
            run(
                sidecars,
                endpoints,
                pools.max(1),
                pools_per_sidecar.max(1),
                changes,
                &scenario,
                Security {
                    auth: !no_auth,
                    tls,
                },
            )
            .await
        }
        Cmd::Probes {
            sidecars,
            endpoints,
            checkers,
            passive,
        } => {
            let result = probes::run(probes::Probes {
                sidecars,
                endpoints,
                checkers,
                passive,
            })
            .await;
            // A thousand sidecars stop with the process, not one graceful stop after another.
            match result {
                Ok(()) => std::process::exit(0),
                Err(error) => {
                    eprintln!("rollcall-fleet probes: {error:#}");
                    std::process::exit(1)
                }
            }
        }
        Cmd::Sim {
            controller,
            sidecars,
            pools,
            pools_per_sidecar,
            tokens,
            tls_ca,
        } => {
            let tokens: Vec<String> = match tokens {
                Some(path) => std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?
                    .lines()
                    .map(String::from)
                    .collect(),
                None => Vec::new(),
            };
            let sims = (0..sidecars)
                .map(|i| sim::SimSidecar {
                    index: i,
                    token: tokens.get(i).cloned(),
                    pools: pools_of(i, pools, pools_per_sidecar)
                        .into_iter()
                        .map(|p| (world::NAMESPACE.to_string(), world::pool_name(p)))
                        .collect(),
                })
                .collect();
            let ca = match tls_ca {
                Some(path) => Some(
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
                ),
                None => None,
            };
            sim::main(controller, ca, sims, Duration::from_secs(10)).await;
            Ok(())
        }
    }
}
