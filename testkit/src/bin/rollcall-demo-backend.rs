//! `rollcall-demo-backend`: one test backend as a process, the backend of the benchmarks and of
//! manual experiments. Multi-threaded, keep-alive, HTTP/1.1 and h2c; `--fail-every N` fails every
//! N-th request deterministically.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use rollcall_testkit::{Behavior, TestBackend};

/// A fast HTTP backend that answers `backend <port>` (and /healthz, /echo, /echo-body).
#[derive(Debug, Parser)]
#[command(name = "rollcall-demo-backend", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Delay before every answer, e.g. `1ms`.
    #[arg(long, value_parser = humantime_like, default_value = "0s")]
    latency: Duration,
    /// Fail every N-th traffic request (0: never).
    #[arg(long, default_value_t = 0)]
    fail_every: u32,
    /// Status of the failed requests.
    #[arg(long, default_value_t = 500)]
    fail_status: u16,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    let behavior = if args.fail_every > 0 {
        Behavior::FailRate {
            fail: 1,
            every: args.fail_every,
            status: args.fail_status,
            latency: args.latency,
        }
    } else {
        Behavior::slow(args.latency)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let backend = TestBackend::bind(args.listen, behavior).await?;
        tracing::info!(addr = %backend.addr(), ?behavior, "serving");
        println!("rollcall-demo-backend listening on {}", backend.addr());
        tokio::signal::ctrl_c()
            .await
            .context("waiting for ctrl-c")?;
        drop(backend);
        Ok(())
    })
}

/// Parses `250us`, `1ms`, `2s`: the forms the policy uses.
fn humantime_like(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("{s:?}: expected e.g. 1ms"))?;
    match unit {
        "us" => Ok(Duration::from_micros(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" if n == 0 => Ok(Duration::ZERO),
        "s" => Ok(Duration::from_secs(n)),
        _ => Err(format!("{s:?}: unit must be us, ms or s")),
    }
}
