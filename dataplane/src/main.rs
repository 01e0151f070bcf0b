//! `rollcall-sidecar`: parse the command line, set up logging, run until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use rollcall_dataplane::sidecar::{self, Options};

/// The Rollcall sidecar: a health-gated HTTP proxy in front of each pool's endpoints.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// YAML config: `pools:` with name, listen, endpoints and policy. Re-read when it changes
    /// and on SIGHUP; a bad edit is refused and the last good config keeps serving.
    #[arg(long, env = "ROLLCALL_CONFIG")]
    config: PathBuf,
    /// Admin listener: /metrics, /endpoints, /ready, /live.
    #[arg(long, env = "ROLLCALL_ADMIN_LISTEN", default_value = "127.0.0.1:15000")]
    admin_listen: SocketAddr,
    /// How often to re-read the config file.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    reload_interval: Duration,
    /// Log format: `text` or `json`.
    #[arg(long, env = "ROLLCALL_LOG_FORMAT", default_value = "text")]
    log_format: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("ROLLCALL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if args.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    let sidecar = sidecar::start(Options {
        config: args.config,
        admin_listen: args.admin_listen,
        reload_interval: args.reload_interval,
    })
    .await
    .context("rollcall-sidecar could not start")?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    sidecar.shutdown().await;
    Ok(())
}
