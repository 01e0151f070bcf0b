//! `rollcall-controller`: `crd` prints the CustomResourceDefinition; `run` competes for the
//! leader Lease, and as leader serves rosters over gRPC and writes pool status; `/metrics`,
//! `/readyz` (ready only as a synced leader) and `/livez` are served throughout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

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
    let client = kube::Client::try_default()
        .await
        .context("no Kubernetes client configuration")?;
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
        duration: 15,
        grace: 5,
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
    run::run(client, state, Settings::default(), ready, async move {
        let _ = why_tx.send(stop_rx.await.unwrap_or("interrupted"));
    })
    .await;
    match why_rx.await.unwrap_or("interrupted") {
        "interrupted" => Ok(()),
        why => anyhow::bail!("{why}; exiting to restart as a standby"),
    }
}
