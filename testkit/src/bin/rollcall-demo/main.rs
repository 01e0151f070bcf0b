//! `rollcall-demo`: the sidecar in front of three local backends, no cluster needed. Starts the
//! backends in-process, writes a sidecar config, launches `rollcall-sidecar`, drives steady
//! traffic through it, kills backend 2 and revives it, and prints what clients and the sidecar
//! saw every second. The schedule scales with `--duration`: kill at 1/7, revive at 3/7.

mod report;
mod sidecar;
mod traffic;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use rollcall_testkit::{Behavior, TestBackend};
use tokio::time::Instant;

use crate::report::{Tally, Timeline};
use crate::sidecar::Sidecar;
use crate::traffic::Traffic;

/// Runs rollcall-sidecar against three local backends and kills one of them.
#[derive(Debug, Parser)]
#[command(name = "rollcall-demo", version)]
struct Args {
    /// Length of the run in seconds (backend 2 dies at 1/7 of it and returns at 3/7).
    #[arg(long, default_value_t = 35)]
    duration: u64,
    /// A short run: 14 seconds.
    #[arg(long, conflicts_with = "duration")]
    quick: bool,
    /// Client requests per second through the sidecar.
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// The sidecar binary (default: `rollcall-sidecar` next to this executable).
    #[arg(long)]
    sidecar: Option<PathBuf>,
}

/// How often the sidecar's view is sampled (the state timeline's resolution when the sidecar
/// does not report `sinceSeconds`).
const SAMPLE: Duration = Duration::from_millis(250);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    let duration = if args.quick { 14 } else { args.duration.max(7) };
    let binary = sidecar::find_binary(args.sidecar.clone())?;

    let mut backends = Vec::new();
    for _ in 0..3 {
        backends.push(TestBackend::spawn(Behavior::ok()).await?);
    }
    let addrs: Vec<SocketAddr> = backends.iter().map(TestBackend::addr).collect();
    let dir = std::env::temp_dir().join(format!("rollcall-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let config = dir.join("sidecar.yaml");
    let listen = sidecar::free_port()?;
    std::fs::write(&config, sidecar::config_yaml(listen, &addrs))
        .with_context(|| format!("writing {}", config.display()))?;

    for (i, addr) in addrs.iter().enumerate() {
        println!("backend b{} on {addr}", i + 1);
    }
    println!("config {}", config.display());
    let mut sidecar = Sidecar::start(&binary, &config, listen, &dir).await?;
    println!(
        "rollcall-sidecar listening on {listen}, admin on http://{}/endpoints, log {}",
        sidecar.admin,
        sidecar.log.display()
    );
    println!(
        "{} req/s for {duration}s; backend b2 dies at {}s and returns at {}s\n",
        args.rate,
        duration / 7,
        duration * 3 / 7
    );

    let outcome = run(&backends, &mut sidecar, args.rate, duration).await;
    sidecar.stop().await;
    drop(backends);
    if outcome.is_ok()
        && let Err(e) = std::fs::remove_dir_all(&dir)
    {
        tracing::warn!(error = %e, "removing {}", dir.display());
    }
    outcome
}

/// Drives traffic, the kill/revive script and the per-second lines.
async fn run(
    backends: &[TestBackend],
    sidecar: &mut Sidecar,
    rate: u32,
    duration: u64,
) -> anyhow::Result<()> {
    let addrs: Vec<SocketAddr> = backends.iter().map(TestBackend::addr).collect();
    let victim = &backends[1];
    let (kill_at, revive_at) = (duration as f64 / 7.0, duration as f64 * 3.0 / 7.0);
    let start = Instant::now();
    let traffic = Traffic::start(sidecar.listen, rate);
    let mut ticks = tokio::time::interval(SAMPLE);
    let (mut killed, mut revived) = (false, false);
    let mut events = Vec::new();
    let mut timeline = Timeline::default();
    let mut last_print = (0.0, Tally::default());
    let mut next_print = 1.0;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut interrupted = false;

    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = &mut ctrl_c => {
                println!("\ninterrupted");
                interrupted = true;
            }
        }
        let t = start.elapsed().as_secs_f64();
        if !killed && t >= kill_at {
            victim.kill().await;
            killed = true;
            events.push((t, format!("killed b2 ({})", victim.addr())));
            println!(">>> t={t:.1}s killed b2 ({})", victim.addr());
        }
        if !revived && t >= revive_at {
            victim.revive().await?;
            revived = true;
            events.push((t, format!("revived b2 ({})", victim.addr())));
            println!(">>> t={t:.1}s revived b2 ({})", victim.addr());
        }
        if let Some(reason) = sidecar.exited() {
            anyhow::bail!("at t={t:.1}s {reason}");
        }
        let pool = sidecar.pool("demo").await;
        if let Some(endpoint) = pool.as_ref().and_then(|p| report::find(p, victim.addr())) {
            timeline.observe(start.elapsed().as_secs_f64(), endpoint);
        }
        let (ok, failed) = traffic.totals();
        let overall = Tally { ok, failed };
        if t >= next_print {
            let last = overall.since(last_print.1);
            println!("{}", report::line(t, last, overall, pool.as_ref(), &addrs));
            last_print = (t, overall);
            next_print += 1.0;
        }
        if t >= duration as f64 || interrupted {
            let failures = traffic.counts.failures.lock().clone();
            drop(traffic);
            println!(
                "{}",
                report::summary(overall, &failures, victim.addr(), &events, &timeline)
            );
            return Ok(());
        }
    }
}
