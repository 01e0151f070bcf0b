//! `rollcall-injector`: serve the sidecar-injection webhook over HTTPS, keep its certificate
//! (its own CA and serving certificate, or cert-manager's) and serve `/metrics`, `/readyz`,
//! `/livez`, until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use rollcall_injector::certs::roster::{RosterCertificate, Trust};
use rollcall_injector::certs::store::{CertStore, Mode};
use rollcall_injector::certs::{self, CertResolver};
use rollcall_injector::config::SidecarSettings;
use rollcall_injector::metrics::Metrics;
use rollcall_injector::server::{self, Webhook};
use rollcall_injector::{Error, admin};
use tokio::net::TcpListener;
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Certificates {
    /// Create the CA and serving certificate, renew them, keep the webhook's caBundle.
    #[value(name = "self")]
    SelfManaged,
    /// Only read the Secret (cert-manager fills it and the caBundle).
    External,
}

/// The Rollcall sidecar injector: a mutating admission webhook for pods.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// HTTPS address the API server calls.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// Plain-HTTP address of /metrics, /readyz and /livez.
    #[arg(long, default_value = "0.0.0.0:9301")]
    admin_listen: SocketAddr,
    /// The sidecar settings (JSON; the chart's rollcall-injector ConfigMap).
    #[arg(long)]
    config: PathBuf,
    /// The injector's own namespace (the Secret's).
    #[arg(long, env = "POD_NAMESPACE", default_value = "rollcall-system")]
    namespace: String,
    /// The webhook's Service: the certificate covers its DNS names.
    #[arg(long, default_value = "rollcall-injector")]
    service: String,
    /// The Secret holding the certificates.
    #[arg(long, default_value = "rollcall-injector-tls")]
    tls_secret: String,
    /// The MutatingWebhookConfiguration whose caBundle trusts the CA.
    #[arg(long, default_value = "rollcall-injector")]
    webhook: String,
    #[arg(long, value_enum, default_value = "self")]
    certificates: Certificates,
    /// Keep the controller's roster certificate in this Secret (issued from the injector's
    /// CA) and hand its CA to every injected sidecar: TLS on the roster channel with nothing
    /// else to set up. Needs `--certificates self`.
    #[arg(long, value_name = "SECRET")]
    roster_secret: Option<String>,
    /// The controller's Service: the roster certificate covers its DNS names.
    #[arg(long, default_value = "rollcall-controller")]
    roster_service: String,
    /// Lifetime of a CA this injector creates.
    #[arg(long, default_value = "87600h", value_parser = humantime::parse_duration)]
    ca_validity: Duration,
    /// Lifetime of a serving certificate this injector issues.
    #[arg(long, default_value = "2160h", value_parser = humantime::parse_duration)]
    cert_validity: Duration,
    /// How often the Secret is read again (renewals by other replicas, cert-manager's).
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    resync: Duration,
    /// Log as JSON lines.
    #[arg(long, env = "ROLLCALL_LOG_JSON")]
    log_json: bool,
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if args.log_json {
        logs.json().init();
    } else {
        logs.init();
    }
    let settings = SidecarSettings::load(&args.config)?;
    if args.roster_secret.is_some() && matches!(args.certificates, Certificates::External) {
        anyhow::bail!(
            "--roster-secret needs --certificates self: with cert-manager, issue the controller's certificate there too and set controllerCA"
        );
    }
    settings
        .check_roster_tls(args.roster_secret.is_some())
        .map_err(|message| Error::InvalidConfig {
            path: args.config.display().to_string(),
            message,
        })?;
    let trust = args.roster_secret.as_ref().map(|_| Trust::default());
    let mut config = kube::Config::infer()
        .await
        .context("no Kubernetes client configuration")?;
    let agent = format!("rollcall-injector/{}", env!("CARGO_PKG_VERSION"));
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&agent).context("user agent")?,
    ));
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let metrics = Metrics::new()?;
    let resolver = Arc::new(CertResolver::default());
    let webhook_listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| Error::Listen(args.listen, e))?;
    let admin_listener = TcpListener::bind(args.admin_listen)
        .await
        .map_err(|e| Error::Listen(args.admin_listen, e))?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let admin = tokio::spawn(admin::serve(
        admin_listener,
        metrics.clone(),
        resolver.clone(),
        stopped(stop_rx.clone()),
    ));
    let store = CertStore {
        secrets: kube::Api::namespaced(client.clone(), &args.namespace),
        webhooks: kube::Api::all(client),
        secret: args.tls_secret.clone(),
        webhook: args.webhook.clone(),
        names: certs::dns_names(&args.service, &args.namespace),
        mode: match args.certificates {
            Certificates::SelfManaged => Mode::SelfManaged {
                ca_validity: args.ca_validity,
                cert_validity: args.cert_validity,
            },
            Certificates::External => Mode::External,
        },
        resolver: resolver.clone(),
        metrics: metrics.clone(),
        roster: args.roster_secret.clone().map(|secret| RosterCertificate {
            secret,
            names: certs::dns_names(&args.roster_service, &args.namespace),
        }),
        trust: trust.clone().unwrap_or_default(),
    };
    let certificates = tokio::spawn(store.run(
        args.resync,
        Duration::from_secs(5),
        stopped(stop_rx.clone()),
    ));
    let webhook = Arc::new(Webhook {
        settings,
        metrics,
        trust,
    });
    tracing::info!(listen = %args.listen, admin = %args.admin_listen, "serving the injection webhook");
    let server = tokio::spawn(server::serve(
        webhook_listener,
        resolver.server_config(&[b"h2", b"http/1.1"])?,
        webhook,
        Duration::from_secs(5),
        stopped(stop_rx),
    ));
    shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    let _ = server.await;
    let _ = certificates.await;
    let _ = admin.await;
    Ok(())
}
