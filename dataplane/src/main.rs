//! `rollcall-sidecar`: parse the command line, set up logging, run until SIGTERM or Ctrl-C,
//! then leave as a Kubernetes pod should (`Sidecar::terminate`): not ready at once, serving
//! through `--shutdown-delay`, then draining within `--shutdown-grace`, exit 0. A second
//! signal ends the pre-stop window early. Pools come from a config file (`--config`,
//! standalone) or from the controller (`--controller` with `--pool`s); one sidecar does one or
//! the other.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use rollcall_api::roster::SidecarId;
use rollcall_dataplane::access_log::{self, AccessLogConfig, Destination};
use rollcall_dataplane::drain::ShutdownPlan;
use rollcall_dataplane::pool::{Http1Engine, Tuning};
use rollcall_dataplane::roster::{ControllerCa, PoolBinding, RosterOptions};
use rollcall_dataplane::sidecar::{self, ControlledOptions, Options, RunOptions};
use tokio::signal::unix::{SignalKind, signal};

/// The Rollcall sidecar: a health-gated HTTP proxy in front of each pool's endpoints.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// YAML config: `pools:` with name, listen, endpoints and policy. Re-read when it changes
    /// and on SIGHUP; a bad edit is refused and the last good config keeps serving.
    #[arg(long, env = "ROLLCALL_CONFIG")]
    config: Option<PathBuf>,
    /// The controller's roster service, e.g. `http://rollcall-controller.rollcall-system:8300`. Pools
    /// then come from it: name them with `--pool`.
    #[arg(long, env = "ROLLCALL_CONTROLLER", value_name = "URL")]
    controller: Option<String>,
    /// A pool to route to and where the application sends to it: `NAMESPACE/NAME=LISTEN`,
    /// e.g. `shop/checkout=127.0.0.1:15001`. Repeat for more pools. Needs `--controller`.
    #[arg(long = "pool", value_name = "NAMESPACE/NAME=LISTEN")]
    pools: Vec<PoolBinding>,
    /// This pod's name, as the controller attributes reports (downward API: `POD_NAME`;
    /// else `HOSTNAME`, which Kubernetes sets to the pod name).
    #[arg(long, env = "POD_NAME")]
    pod: Option<String>,
    /// This pod's namespace (downward API: `POD_NAMESPACE`).
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: Option<String>,
    /// The pod's projected ServiceAccount token (audience `rollcall`), presented to the
    /// controller on every stream; re-read at each (re)connect, so the kubelet's rotation is
    /// picked up. Unset: no token (only a controller run with `--insecure-no-auth` accepts that).
    #[arg(long, env = "ROLLCALL_TOKEN_FILE", value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// The CA (PEM file) that signed the controller's roster certificate, for an `https://`
    /// `--controller`; only it is trusted. Read at start (a new CA needs a restart).
    #[arg(long, env = "ROLLCALL_CONTROLLER_CA", value_name = "PATH")]
    controller_ca: Option<PathBuf>,
    /// The same CA as PEM text: what the injector puts in the pod spec by default.
    #[arg(
        long,
        env = "ROLLCALL_CONTROLLER_CA_PEM",
        value_name = "PEM",
        conflicts_with = "controller_ca",
        hide_env_values = true
    )]
    controller_ca_pem: Option<String>,
    /// The name the controller's certificate must carry, when `--controller` names it by
    /// address (e.g. `rollcall-controller.rollcall-system.svc`).
    #[arg(long, env = "ROLLCALL_CONTROLLER_SERVER_NAME", value_name = "NAME")]
    controller_server_name: Option<String>,
    /// Dial an `http://` controller on another host (refused otherwise: a plaintext roster
    /// channel gives the pod's token, and its routing, to anyone on the path).
    #[arg(long, env = "ROLLCALL_INSECURE_PLAINTEXT_CONTROLLER")]
    insecure_plaintext_controller: bool,
    /// Probe every endpoint here instead of taking part in fleet health (where the controller
    /// assigns each endpoint a few checkers and shares their verdicts).
    #[arg(long, env = "ROLLCALL_NO_FLEET_HEALTH")]
    no_fleet_health: bool,
    /// An empty health report after this long without one, so the controller knows we live.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    report_heartbeat: Duration,
    /// Admin listener: /metrics, /endpoints, /ready, /live.
    #[arg(long, env = "ROLLCALL_ADMIN_LISTEN", default_value = "127.0.0.1:15000")]
    admin_listen: SocketAddr,
    /// How often to re-read the config file.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    reload_interval: Duration,
    /// Log format: `text` or `json`.
    #[arg(long, env = "ROLLCALL_LOG_FORMAT", default_value = "text")]
    log_format: String,
    /// A request body that sends nothing for this long is answered 408 and charged to no
    /// endpoint (`0s` disables).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    request_body_idle_timeout: Duration,
    /// A response body that sends nothing for this long is cut and charged to its endpoint
    /// (`0s` disables; long-lived streams need it off or long).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    response_body_idle_timeout: Duration,
    /// An upgraded tunnel (WebSocket) that moves no byte either way for this long is closed
    /// (`0s` disables).
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    tunnel_idle_timeout: Duration,
    /// Idle keep-alive connections (HTTP/1.1) each pool keeps, over all its endpoints; past it
    /// the connection idle longest is closed. Each costs about 38 KB of buffers, so a pool of
    /// thousands of endpoints would otherwise keep one per endpoint.
    #[arg(long, default_value_t = rollcall_dataplane::upstream::DEFAULT_MAX_IDLE_PER_POOL)]
    max_idle_connections: usize,
    /// On SIGTERM: not ready at once, but keep serving this long (endpoint removal takes time
    /// to reach every client).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    shutdown_delay: Duration,
    /// After the delay: stop accepting and give requests in flight this long before closing
    /// what is left. Keep delay + grace below the pod's terminationGracePeriodSeconds.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// The zone this sidecar runs in (its node's `topology.kubernetes.io/zone`), for pools with
    /// `loadBalancer.zoneAware.enabled`. Without it, an authenticated sidecar takes the zone
    /// the controller reads from its node.
    #[arg(long, env = "ROLLCALL_ZONE")]
    zone: Option<String>,
    /// Threads that run the proxy. One (the default, as in Linkerd's proxy) runs everything on
    /// one thread: no hand-offs between threads, the least CPU per request, and on a node whose
    /// cores the application uses too, more requests per second than two (bench/README.md).
    /// More spread a heavy load over cores the sidecar has to itself.
    #[arg(long, env = "ROLLCALL_THREADS", default_value = "1")]
    threads: NonZeroUsize,
    /// Write an access log: one JSON line per request (method, authority, path without its
    /// query, status, reason, endpoint, tries, durations, bytes; never headers or bodies) to
    /// this file, appended to, or `-` for standard output. Off by default. Written by a thread
    /// of its own; lines it cannot keep up with are dropped and counted in
    /// `rollcall_access_log_dropped_total`.
    #[arg(long, env = "ROLLCALL_ACCESS_LOG", value_name = "PATH|-")]
    access_log: Option<Destination>,
    /// The share of requests the access log records, from 0 to 1 (0.1: one in ten, at random).
    #[arg(long, env = "ROLLCALL_ACCESS_LOG_SAMPLE", default_value = "1", value_parser = access_log::parse_sample)]
    access_log_sample: f64,
    /// What serves clients' HTTP/1.x connections: `fast` (the sidecar's own, the default; it
    /// hands a connection to hyper's at the first request it does not handle: HTTP/2, an
    /// upgrade), or `hyper` (hyper's server for every connection).
    #[arg(long, env = "ROLLCALL_HTTP1_ENGINE", default_value = "fast")]
    http1_engine: Http1Engine,
}

/// Give glibc's free pages back to the system (`rollcall_dataplane::memory`): after a roster of
/// 5,000 endpoints, 360 KiB of an idle sidecar's 3 MiB of anonymous memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() -> bool {
    // SAFETY: malloc_trim takes no pointer and touches only glibc's own free lists, under the
    // arenas' locks.
    unsafe { libc::malloc_trim(0) != 0 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() -> bool {
    false
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    rollcall_dataplane::memory::set_release(release_free_memory);
    let threads = args.threads.get();
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .context("cannot start the runtime")?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ROLLCALL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if args.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    tracing::debug!(threads = args.threads.get(), "runtime started");
    let run = RunOptions {
        tuning: Tuning {
            request_body_idle: args.request_body_idle_timeout,
            response_body_idle: args.response_body_idle_timeout,
            tunnel_idle: args.tunnel_idle_timeout,
            max_idle_connections: args.max_idle_connections,
            local_zone: args.zone.filter(|z| !z.is_empty()).map(Into::into),
            http1_engine: args.http1_engine,
            ..Tuning::default()
        },
        shutdown: ShutdownPlan {
            pre_stop: args.shutdown_delay,
            grace: args.shutdown_grace,
        },
        access_log: args.access_log.map(|destination| AccessLogConfig {
            destination,
            sample: args.access_log_sample,
        }),
    };
    let sidecar = match (args.config, args.controller) {
        (Some(_), Some(_)) => anyhow::bail!(
            "--config and --controller cannot be combined: a sidecar's pools come either from \
             a config file (standalone) or from the controller; pick one"
        ),
        (None, None) => anyhow::bail!(
            "nothing to route: give --config FILE, or --controller URL with --pool NAMESPACE/NAME=LISTEN"
        ),
        (Some(_), None) if !args.pools.is_empty() => {
            anyhow::bail!("--pool needs --controller; a config file names its own pools")
        }
        (Some(config), None) => {
            sidecar::start_with(
                Options {
                    config,
                    admin_listen: args.admin_listen,
                    reload_interval: args.reload_interval,
                },
                run,
            )
            .await
        }
        (None, Some(controller)) => {
            let identity = SidecarId {
                pod: args.pod.or_else(|| std::env::var("HOSTNAME").ok()).unwrap_or_default(),
                namespace: args.namespace.unwrap_or_default(),
                instance: format!("{:016x}", rand::random::<u64>()),
            };
            if identity.pod.is_empty() || identity.namespace.is_empty() {
                tracing::warn!(sidecar = %identity, "pod or namespace unknown (set POD_NAME and POD_NAMESPACE from the downward API); reports will be attributed to this");
            }
            let mut roster = RosterOptions::new(controller, args.pools, identity);
            roster.heartbeat = args.report_heartbeat;
            roster.token_file = args.token_file;
            roster.controller_ca = args
                .controller_ca
                .map(ControllerCa::File)
                .or(args.controller_ca_pem.map(ControllerCa::Pem));
            roster.controller_server_name = args.controller_server_name;
            roster.insecure_plaintext = args.insecure_plaintext_controller;
            roster.fleet_health = !args.no_fleet_health;
            sidecar::start_controlled_with(
                ControlledOptions {
                    admin_listen: args.admin_listen,
                    roster,
                },
                run,
            )
            .await
        }
    }
    .context("rollcall-sidecar could not start")?;
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = term.recv() => {}
    }
    let hurry = async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    };
    sidecar.terminate(hurry).await;
    Ok(())
}
