//! `rollcall-demo`: the whole system on one machine, no cluster — a local Kubernetes API
//! server, the controller, two sidecars, three backends, steady traffic, one backend killed and
//! brought back, printed live the way kubectl shows the pool. `--standalone` runs the sidecar
//! alone from a config file instead. The schedule scales with `--duration`: the kill comes at
//! a fifth of it and the revival at two fifths.

mod cluster;
mod report;
mod standalone;
mod view;

use clap::Parser;

/// Runs Rollcall against three local backends and kills one of them.
#[derive(Debug, Parser)]
#[command(name = "rollcall-demo", version)]
struct Args {
    /// Length of the run in seconds.
    #[arg(long, default_value_t = 40)]
    duration: u64,
    /// A short run: 20 seconds.
    #[arg(long, conflicts_with = "duration")]
    quick: bool,
    /// Client requests per second in total.
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// Keep everything running after the scripted run, until Ctrl-C (for kubectl).
    #[arg(long)]
    keep: bool,
    /// The sidecar alone from a config file, no API server or controller.
    #[arg(long, conflicts_with = "keep")]
    standalone: bool,
}

/// When backend 2 dies and returns, and when the run ends (seconds from the start).
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub duration: u64,
    pub kill_at: u64,
    pub revive_at: u64,
}

impl Schedule {
    fn new(duration: u64) -> Self {
        let duration = duration.max(10);
        Self {
            duration,
            kill_at: duration / 5,
            revive_at: duration * 2 / 5,
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    let schedule = Schedule::new(if args.quick { 20 } else { args.duration });
    if args.standalone {
        standalone::run(schedule, args.rate).await
    } else {
        cluster::run(schedule, args.rate, args.keep).await
    }
}
