//! `rollcall-failbench`: what clients see when a backend fails, through rollcall-sidecar,
//! HAProxy and nginx, on one machine in one run. Three backends run in-process (so backend 2
//! can be killed, black-holed or made to fail at an exact moment and counts what reaches it);
//! for each scenario and each proxy, a fresh proxy is started in front of them, loaded at a
//! fixed rate, backend 2 is broken at `--inject-at`, and the client failures, latency and the
//! time until the proxy stopped using backend 2 are tabulated. `bench/failures.sh` runs it.

mod config;
mod load;
mod proxy;
mod report;
mod run;
mod scenario;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use rollcall_testkit::{Behavior, TestBackend};

use crate::proxy::{Kind, Setup};
use crate::report::Cell;
use crate::scenario::{Plan, Scenario};

/// Failure scenarios through rollcall-sidecar, HAProxy and nginx.
#[derive(Debug, Parser)]
#[command(name = "rollcall-failbench", version)]
struct Args {
    /// Client requests per second (open loop).
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// Seconds of load per scenario and proxy.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds into the load at which backend 2 is broken.
    #[arg(long, default_value_t = 3.0)]
    inject_at: f64,
    /// Client timeout per request, seconds (connect included).
    #[arg(long, default_value_t = 2.0)]
    client_timeout: f64,
    /// Proxies to run, space or comma separated: rollcall haproxy nginx.
    #[arg(long, default_value = "rollcall haproxy nginx")]
    only: String,
    /// Scenarios to run (bench/failures.sh lists them all); default: every one.
    #[arg(long, default_value = "")]
    scenarios: String,
    /// rollcall's balancer where HAProxy and nginx balance by least connections:
    /// LeastRequest or PeakEwma (default: the policy's default).
    #[arg(long, default_value = "")]
    rollcall_algorithm: String,
    /// The rollcall-sidecar binary (default: next to this executable).
    #[arg(long)]
    sidecar: Option<PathBuf>,
    #[arg(long, default_value = "haproxy")]
    haproxy: PathBuf,
    #[arg(long, default_value = "nginx")]
    nginx: PathBuf,
    /// Where configs and proxy logs go.
    #[arg(long, default_value = "bench/out/failures")]
    work_dir: PathBuf,
    /// The tables are also written here.
    #[arg(long, default_value = "bench/out/failures.txt")]
    results: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let plan = Plan {
        rate: args.rate.max(1),
        duration: secs(args.duration)?,
        inject_at: secs(args.inject_at)?,
        client_timeout: secs(args.client_timeout)?,
        settle: Duration::from_millis(1500),
    };
    if plan.inject_at >= plan.duration {
        bail!("--inject-at must be before the end of --duration");
    }
    let kinds = parse_list(&args.only, Kind::parse, "proxy")?;
    let mut scenarios = parse_list(&args.scenarios, Scenario::parse, "scenario")?;
    if scenarios.is_empty() {
        scenarios = scenario::ALL.to_vec();
    }
    std::fs::create_dir_all(&args.work_dir)
        .with_context(|| format!("creating {}", args.work_dir.display()))?;
    let rollcall_algorithm = match args.rollcall_algorithm.as_str() {
        "" => None,
        name => Some(
            config::ROLLCALL_ALGORITHMS
                .into_iter()
                .find(|a| *a == name)
                .with_context(|| format!("unknown --rollcall-algorithm `{name}`"))?,
        ),
    };
    let setup = Setup {
        rollcall_algorithm,
        sidecar: match args.sidecar {
            Some(path) => path,
            None => std::env::current_exe()?.with_file_name("rollcall-sidecar"),
        },
        haproxy: args.haproxy,
        nginx: args.nginx,
        dir: std::fs::canonicalize(&args.work_dir)?,
    };

    let stop = Arc::new(AtomicBool::new(false));
    tokio::spawn(watch_signals(stop.clone()));

    let mut backends = Vec::new();
    for _ in 0..scenario::MAX_BACKENDS {
        backends.push(TestBackend::spawn(Behavior::ok()).await?);
    }
    for (i, b) in backends.iter().enumerate() {
        eprintln!("backend b{} on {}", i + 1, b.addr());
    }

    let mut text = format!(
        "rollcall failure-scenario benchmark\n\
         machine: {} CPUs, load average {}\n\
         load: {} req/s GET / for {:.0}s per scenario and proxy, client timeout {:.0}s; \
         backend 2 broken at t={:.0}s (of 3 backends, 4 where the scenario says); every proxy started fresh per scenario\n\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        plan.rate,
        plan.duration.as_secs_f64(),
        plan.client_timeout.as_secs_f64(),
        plan.inject_at.as_secs_f64(),
    );
    for s in &scenarios {
        let mut cells: Vec<(Kind, Cell)> = Vec::new();
        for &kind in &kinds {
            if stop.load(SeqCst) {
                break;
            }
            eprintln!("{}: {} ...", s.name(), kind.name());
            let cell = match run::run(*s, kind, &setup, &backends, plan, &stop).await {
                Ok(outcome) => Ok(report::row(*s, &outcome)),
                Err(e) => {
                    eprintln!("SKIPPED {} in {}: {e:#}", kind.name(), s.name());
                    Err(first_line(&format!("{e:#}")))
                }
            };
            cells.push((kind, cell));
        }
        if stop.load(SeqCst) {
            eprintln!("interrupted");
            break;
        }
        let table = report::table(*s, &plan, &cells);
        println!("{table}");
        text.push_str(&table);
        text.push('\n');
    }
    let legend = report::legend(&plan);
    println!("{legend}");
    text.push_str(&legend);
    text.push('\n');
    if let Some(parent) = args.results.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.results, text)
        .with_context(|| format!("writing {}", args.results.display()))?;
    eprintln!("written to {}", args.results.display());
    Ok(())
}

/// Sets `stop` on ctrl-c or SIGTERM; the run in progress stops its proxy and returns.
async fn watch_signals(stop: Arc<AtomicBool>) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
    stop.store(true, SeqCst);
}

fn parse_list<T>(text: &str, parse: fn(&str) -> Option<T>, what: &str) -> anyhow::Result<Vec<T>> {
    text.split([' ', ','])
        .filter(|s| !s.is_empty())
        .map(|s| parse(s).with_context(|| format!("unknown {what} `{s}`")))
        .collect()
}

fn secs(s: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).with_context(|| format!("{s} is not a duration in seconds"))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}
