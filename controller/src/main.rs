//! `rollcall-controller`: `crd` prints the CustomResourceDefinition; `run` competes for the
//! leader Lease, and as leader serves rosters over gRPC and writes pool status; `/metrics`,
//! `/readyz` (ready only as a synced leader) and `/livez` are served throughout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use rollcall_controller::leader::{self, LeaseSettings};
use rollcall_controller::metrics::Metrics;
use rollcall_controller::reconcile::Settings;
use rollcall_controller::roster::RosterHub;
use rollcall_controller::server::{self, Limits, State};
use rollcall_controller::status::ReportStore;
use rollcall_controller::{crd, http, run};
use tokio::net::TcpListener;

#[derive(Parser)]
#[command(name = "rollcall-controller", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the BackendPool CustomResourceDefinition as YAML.
    Crd,
    /// Run the controller.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Address of the gRPC roster API. Exposed only inside the cluster (ClusterIP).
    #[arg(long, env = "ROLLCALL_GRPC_LISTEN", default_value = "0.0.0.0:8300")]
    grpc_listen: SocketAddr,
    /// Address of /metrics, /readyz and /livez.
    #[arg(long, env = "ROLLCALL_METRICS_LISTEN", default_value = "0.0.0.0:9300")]
    metrics_listen: SocketAddr,
    /// Namespace of the leader Lease (the controller's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "rollcall-system")]
    lease_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME", default_value = "rollcall-controller")]
    identity: String,
    /// Log as JSON lines.
    #[arg(long, env = "ROLLCALL_LOG_JSON")]
    log_json: bool,
    /// How long the leader Lease is valid after a renewal; a standby takes over this long
    /// after a leader dies without releasing it.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// How long before the Lease expires its holder renews it.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    lease_grace: Duration,
    /// After taking the lead, how long a pool's status waits for the sidecars that were
    /// reporting before to report again (so a restart never rewrites history).
    #[arg(long, default_value = "25s", value_parser = humantime::parse_duration)]
    restart_grace: Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crd => {
            print!("{}", crd::yaml()?);
            Ok(())
        }
        Command::Run(args) => run(args).await,
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if args.log_json {
        logs.json().init();
    } else {
        logs.init();
    }
    let mut config = kube::Config::infer()
        .await
        .context("no Kubernetes client configuration")?;
    // Audit logs and the API server's request log tell replicas apart by this.
    let agent = format!(
        "rollcall-controller/{} ({})",
        env!("CARGO_PKG_VERSION"),
        args.identity
    );
    config.headers.push((
        ::http::header::USER_AGENT,
        ::http::HeaderValue::from_str(&agent)
            .context("the identity is not a valid header value")?,
    ));
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let state = State {
        hub: Arc::new(RosterHub::new()),
        reports: Arc::new(ReportStore::new()),
        metrics: Metrics::new()?,
    };
    let ready = Arc::new(AtomicBool::new(false));
    let grpc = TcpListener::bind(args.grpc_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.grpc_listen))?;
    let ops = TcpListener::bind(args.metrics_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.metrics_listen))?;
    let ctrl_c = || async {
        let _ = tokio::signal::ctrl_c().await;
    };
    tokio::spawn(server::serve(
        grpc,
        state.clone(),
        Limits::default(),
        ctrl_c(),
    ));
    tokio::spawn(http::serve(
        ops,
        state.metrics.clone(),
        ready.clone(),
        ctrl_c(),
    ));

    let lease = LeaseSettings {
        namespace: args.lease_namespace,
        name: "rollcall-controller".into(),
        identity: args.identity,
        duration: args.lease_duration.as_secs().max(2),
        grace: args
            .lease_grace
            .as_secs()
            .clamp(1, args.lease_duration.as_secs().max(2) - 1),
    };
    let mut leadership = leader::elect(client.clone(), &lease).await?;
    tracing::info!(identity = %lease.identity, "standing by for the leader lease");
    tokio::select! {
        _ = ctrl_c() => return Ok(()),
        acquired = leadership.acquired() => anyhow::ensure!(acquired, "leader election stopped"),
    }
    tracing::info!("leading: reconciling and serving rosters");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<&str>();
    tokio::spawn(async move {
        tokio::select! {
            _ = leadership.lost() => { let _ = stop_tx.send("lost the leader lease"); }
            _ = tokio::signal::ctrl_c() => { let _ = stop_tx.send("interrupted"); }
        }
    });
    let (why_tx, why_rx) = tokio::sync::oneshot::channel();
    let settings = Settings {
        restart_grace: args.restart_grace,
        ..Settings::default()
    };
    run::run(client, state, settings, ready, async move {
        let _ = why_tx.send(stop_rx.await.unwrap_or("interrupted"));
    })
    .await;
    match why_rx.await.unwrap_or("interrupted") {
        "interrupted" => Ok(()),
        why => anyhow::bail!("{why}; exiting to restart as a standby"),
    }
}
