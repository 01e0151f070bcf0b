//! `rollcall-devcluster`: run the local API server until Ctrl-C or SIGTERM, writing a
//! kubeconfig for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use rollcall_devcluster::{DevCluster, Settings, cluster::Authorization};

#[derive(Parser)]
#[command(
    name = "rollcall-devcluster",
    version,
    about = "A local, in-memory Kubernetes API server for development and tests (a fixture, not a cluster)"
)]
struct Cli {
    /// Address to listen on; only loopback addresses are sensible.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write a kubeconfig for the admin user.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// The admin user's bearer token (random when not set).
    #[arg(long, env = "DEVCLUSTER_TOKEN")]
    token: Option<String>,
    /// Changes kept for watches and consistent lists before older versions answer 410.
    #[arg(long, default_value_t = 20_000)]
    history: usize,
    /// Seconds between bookmarks on watches that allow them.
    #[arg(long, default_value_t = 5.0)]
    bookmark_interval: f64,
    /// `rbac` (ServiceAccount tokens are held to the stored RBAC rules) or `always-allow`.
    #[arg(long, default_value = "rbac")]
    authorization: String,
    /// Shortest TokenRequest lifetime in seconds (600 on a real cluster).
    #[arg(long, default_value_t = 600)]
    min_token_seconds: i64,
    /// Seconds a token is still accepted past its expiry (go-jose's leeway: 60 on a cluster).
    #[arg(long, default_value_t = 60)]
    token_leeway: u64,
    /// Append every request to this JSON-lines file.
    #[arg(long)]
    request_log: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ROLLCALL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let mut settings = Settings::default();
    if let Some(token) = cli.token {
        settings.admin_token = token;
    }
    settings.history = cli.history;
    settings.bookmark_interval = Duration::from_secs_f64(cli.bookmark_interval.max(0.05));
    settings.min_token_seconds = cli.min_token_seconds.max(1);
    settings.token_leeway = Duration::from_secs(cli.token_leeway);
    settings.authorization = match cli.authorization.as_str() {
        "rbac" => Authorization::Rbac,
        "always-allow" => Authorization::AlwaysAllow,
        other => anyhow::bail!("--authorization must be rbac or always-allow, not {other}"),
    };
    let server = DevCluster::start(cli.listen, settings)
        .await
        .with_context(|| format!("cannot listen on {}", cli.listen))?;
    if let Some(path) = &cli.request_log {
        server
            .cluster
            .log
            .to_file(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
    }
    println!("listening on {}", server.server_url());
    if let Some(path) = &cli.kubeconfig_out {
        server
            .write_kubeconfig(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("export KUBECONFIG={}", path.display());
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    server.stop().await;
    Ok(())
}
