//! `kubectl-rollcall` (run as `kubectl rollcall`): `check` before and after an install, and
//! for one pool. Exit code 1 when any check failed, 2 when the checks could not run.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use rollcall_cli::checks::{self, Context, Options};

#[derive(Parser)]
#[command(
    name = "kubectl-rollcall",
    version,
    about = "Rollcall's kubectl plugin"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Check that Rollcall can be installed (--pre), is healthy, and a pool (--pool) is.
    Check {
        /// Before an install: can this cluster take Rollcall, and may you install it?
        #[arg(long)]
        pre: bool,
        /// Also check this pool, NAMESPACE/NAME: its status and what its sidecars see.
        #[arg(long, value_name = "NAMESPACE/NAME")]
        pool: Option<String>,
        /// Rollcall's namespace.
        #[arg(short, long, default_value = "rollcall-system")]
        namespace: String,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
        /// The controller's metrics address (e.g. after kubectl port-forward); default: the
        /// API server's service proxy.
        #[arg(long, value_name = "URL")]
        controller_metrics: Option<String>,
        /// The webhook's address (e.g. after kubectl port-forward); default: the service proxy.
        #[arg(long, value_name = "URL")]
        webhook_url: Option<String>,
        /// A sidecar's admin address to read; repeat for more. Default: every injected pod that
        /// routes to --pool, through the API server's pod proxy.
        #[arg(long = "sidecar", value_name = "URL")]
        sidecars: Vec<String>,
    },
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

#[tokio::main]
async fn main() -> ExitCode {
    let Command::Check {
        pre,
        pool,
        namespace,
        output,
        controller_metrics,
        webhook_url,
        sidecars,
    } = Cli::parse().command;
    let pool = match pool.map(|p| {
        p.split_once('/')
            .map(|(ns, n)| (ns.to_string(), n.to_string()))
    }) {
        Some(None) => {
            eprintln!("--pool takes NAMESPACE/NAME, e.g. shop/checkout");
            return ExitCode::from(2);
        }
        Some(Some(pool)) => Some(pool),
        None => None,
    };
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("no Kubernetes client configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let ctx = Context {
        client,
        options: Options {
            namespace,
            pre,
            pool,
            controller_metrics,
            webhook_url,
            sidecars,
        },
        now: now_unix(),
    };
    let report = checks::run(&ctx).await;
    match output {
        Output::Text => print!("{}", report.text()),
        Output::Json => println!("{}", report.json()),
    }
    if report.failed() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
