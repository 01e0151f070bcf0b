//! `rollcall-controller`: `crd` prints the CustomResourceDefinition; `run` competes for the
//! leader Lease, and as leader serves rosters over gRPC and writes pool status; `/metrics`,
//! `/readyz` (ready only as a synced leader) and `/livez` are served throughout.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use rollcall_controller::leader::LeaseSettings;
use rollcall_controller::lease_runtime::LeaseRuntime;
use rollcall_controller::reconcile::Settings;
use rollcall_controller::server::Limits;
use rollcall_controller::server::throttle::PendingLimits;
use rollcall_controller::server::tls::TlsFiles;
use rollcall_controller::{api_client, app, crd};

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
    Run(Box<RunArgs>),
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
    /// How long before the Lease expires its holder renews it; a holder that cannot renew
    /// steps down half this before expiry (10 s of 15: 5 s before, as client-go's renew
    /// deadline).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    lease_grace: Duration,
    /// The audience sidecar tokens must carry (their projected volume's `audience`).
    #[arg(long, env = "ROLLCALL_TOKEN_AUDIENCE", default_value = "rollcall")]
    token_audience: String,
    /// Serve the roster port over TLS with this certificate (PEM, then any chain), e.g. a
    /// mounted `kubernetes.io/tls` Secret's `tls.crt`; re-read every 10 s, so a renewal is
    /// served without a restart. Without it the port is plaintext h2c.
    #[arg(long, value_name = "PATH", requires = "tls_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The certificate's private key (PEM), e.g. the Secret's `tls.key`.
    #[arg(long, value_name = "PATH", requires = "tls_cert_file")]
    tls_key_file: Option<PathBuf>,
    /// While leading, name this replica (`--identity` in `--lease-namespace`, at `--pod-ip`)
    /// as the one endpoint of this EndpointSlice, the slice of a selector-less Service that
    /// sidecars dial (the chart's); needs only `patch` on that one slice.
    #[arg(long, value_name = "NAME", requires = "pod_ip")]
    leader_endpointslice: Option<String>,
    /// This replica's Pod address, written into `--leader-endpointslice`.
    #[arg(long, env = "POD_IP")]
    pod_ip: Option<std::net::IpAddr>,
    /// How often an open Watch re-checks the RBAC grants behind its pools of other namespaces
    /// (an allowed answer is cached as long): a withdrawn grant ends the stream within twice
    /// this.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    grant_recheck: Duration,
    /// Roster connections not yet authenticated that one source address may hold (the
    /// rest are closed as soon as they are accepted). A sidecar authenticates on its first
    /// request; raise it only where many pods share one address (SNAT).
    #[arg(long, default_value_t = PendingLimits::default().per_source)]
    max_unauthenticated_connections_per_source: usize,
    /// Roster connections not yet authenticated, from all sources together (TLS handshakes in
    /// progress included): bounds what idle connections can cost; above the number of sidecars
    /// that reconnect at once after a restart.
    #[arg(long, default_value_t = PendingLimits::default().total)]
    max_unauthenticated_connections: usize,
    /// Kubernetes API requests a second, on average (the Lease has its own client).
    #[arg(long, default_value_t = 100.0)]
    api_qps: f64,
    /// Kubernetes API requests that may start at once.
    #[arg(long, default_value_t = 200)]
    api_burst: u64,
    /// Do not authenticate sidecars (trust the identity they claim): local development only.
    #[arg(long, env = "ROLLCALL_INSECURE_NO_AUTH")]
    insecure_no_auth: bool,
    /// After taking the lead, how long a pool's status waits for the sidecars that were
    /// reporting before to report again (so a restart never rewrites history).
    #[arg(long, default_value = "25s", value_parser = humantime::parse_duration)]
    restart_grace: Duration,
    /// At most this many BackendPool status writes a second over all pools (each pool writes
    /// at most once a second anyway), after a burst of twice as many; 0: no bound.
    #[arg(long, default_value_t = 50)]
    status_writes_per_second: u32,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Before any thread starts, so no thread has made an arena of its own yet.
    one_malloc_arena();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(async {
            match cli.command {
                Command::Crd => {
                    print!("{}", crd::yaml()?);
                    Ok(())
                }
                Command::Run(args) => run(*args).await,
            }
        })
}

/// Have glibc's malloc keep one arena instead of one per thread that allocates (up to eight per
/// core). The controller's allocations (connection buffers, reports, rosters) are made and freed
/// on whichever runtime thread polls them, and memory freed into one thread's arena does not
/// serve another's: under 1,000 sidecars one arena measured 72-73 MiB RSS against 80-83 with
/// the default, roster latency and resync unchanged, and the CPU of ingesting the fleet's first
/// reports up by about a sixth (median 8.0 against 6.8 s: the threads share one arena's lock;
/// `rollcall-fleet`, bench/README.md). Two arenas gave 75-78 MiB. An operator's
/// `MALLOC_ARENA_MAX` is left as glibc read it.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes a tunable of glibc's allocator; it is called before any
        // other thread exists, and M_ARENA_MAX bounds arenas created from now on.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
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
    let lease_runtime = LeaseRuntime::start(config.clone()).context("starting leader election")?;
    let limit = api_client::RateLimit {
        qps: args.api_qps,
        burst: args.api_burst,
    };
    let client = api_client::client(config, limit).context("building the Kubernetes client")?;
    let lease_duration = args.lease_duration.as_secs().max(2);
    let options = app::Options {
        grpc_listen: args.grpc_listen,
        metrics_listen: args.metrics_listen,
        lease: LeaseSettings {
            namespace: args.lease_namespace,
            name: "rollcall-controller".into(),
            identity: args.identity,
            duration: lease_duration,
            grace: args.lease_grace.as_secs().clamp(1, lease_duration - 1),
        },
        settings: Settings {
            restart_grace: args.restart_grace,
            status_writes_per_second: args.status_writes_per_second,
            status_write_burst: args.status_writes_per_second.saturating_mul(2),
            ..Settings::default()
        },
        limits: Limits {
            grant_recheck: args.grant_recheck,
            pending: PendingLimits {
                per_source: args.max_unauthenticated_connections_per_source,
                total: args.max_unauthenticated_connections,
            },
            ..Limits::default()
        },
        tls: args
            .tls_cert_file
            .zip(args.tls_key_file)
            .map(|(cert, key)| TlsFiles { cert, key }),
        leader_slice: args
            .leader_endpointslice
            .zip(args.pod_ip)
            .map(|(name, ip)| app::LeaderSliceSettings { name, ip }),
        lease_runtime: Some(Arc::new(lease_runtime)),
        authentication: if args.insecure_no_auth {
            app::Authentication::Insecure
        } else {
            app::Authentication::TokenReview {
                audience: args.token_audience,
            }
        },
    };
    match app::run(client, options).await? {
        app::Outcome::Stopped => Ok(()),
        app::Outcome::LostLead(why) => anyhow::bail!("{why}; exiting to restart as a standby"),
    }
}
