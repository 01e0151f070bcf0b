//! Simulated sidecars, in their own process so their CPU is not the controller's: each one a
//! real `rollcall.v1.Roster` client on its own HTTP/2 connection, with a Watch stream for its
//! pools (deltas accepted, assembled as the sidecar does) and a ReportChanges stream that sends
//! a pool's complete health (in parts) when a complete roster arrives, what changed when a
//! delta does, and a heartbeat now and then, as `rollcall-sidecar` does. Every roster message received is printed
//! as one JSON line (`{"sidecar", "pool", "version", "endpoints", "at_ms"}`) for the driver.

use std::io::Write;
use std::time::Duration;

use rollcall_api::delta::Assembler;
use rollcall_api::proto::v1 as pb;
use rollcall_api::proto::v1::roster_client::RosterClient;
use tokio::sync::mpsc;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What one simulated sidecar watches, and the token it presents (none: the controller runs
/// without authentication).
pub struct SimSidecar {
    pub index: usize,
    pub pools: Vec<(String, String)>,
    pub token: Option<String>,
}

/// The Pod simulated sidecar `i` is (its token is bound to it).
pub fn pod_name(i: usize) -> String {
    format!("sim-{i}")
}

/// `message` with the sidecar's token, as the sidecar sends it on both RPCs.
fn bearer<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = token.and_then(|t| format!("Bearer {t}").parse().ok()) {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

fn pool_ref((ns, name): &(String, String)) -> pb::PoolRef {
    pb::PoolRef {
        namespace: ns.clone(),
        name: name.clone(),
    }
}

/// Health for every endpoint of the roster, all healthy: what a sidecar reports on a new roster.
fn health<'a>(
    pool: pb::PoolRef,
    version: u64,
    endpoints: impl Iterator<Item = &'a pb::Endpoint>,
) -> pb::PoolHealth {
    pb::PoolHealth {
        pool: Some(pool),
        roster_version: version,
        panic: false,
        endpoints: endpoints
            .map(|e| pb::EndpointHealth {
                ip: e.ip.clone(),
                port: e.port,
                state: pb::EndpointState::Healthy as i32,
                reason: "ProbeSucceeded".into(),
                since_unix_ms: now_ms(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// A complete report as `ReportChanges` carries it: parts of at most `PART_ENDPOINTS` entries.
fn in_parts(mut health: pb::PoolHealth) -> Vec<pb::PoolHealth> {
    let entries = std::mem::take(&mut health.endpoints);
    let chunks: Vec<&[pb::EndpointHealth]> = if entries.is_empty() {
        vec![&[]]
    } else {
        entries
            .chunks(rollcall_api::delta::PART_ENDPOINTS)
            .collect()
    };
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| pb::PoolHealth {
            endpoints: chunk.to_vec(),
            complete: i == 0,
            continued: i + 1 < n,
            ..health.clone()
        })
        .collect()
}

/// Run one sidecar until the process ends, reconnecting with a short back-off.
pub async fn run(
    controller: String,
    ca: Option<Vec<u8>>,
    sim: SimSidecar,
    out: mpsc::UnboundedSender<String>,
    heartbeat: Duration,
) {
    let identity = pb::SidecarIdentity {
        pod: pod_name(sim.index),
        namespace: sim.pools.first().map(|p| p.0.clone()).unwrap_or_default(),
        instance: format!("{}-{}", std::process::id(), sim.index),
    };
    // Kept across reconnects, as the sidecar keeps it: a new stream names what it holds.
    let mut assembler = Assembler::new();
    loop {
        assembler.new_stream();
        let Ok(mut endpoint) = Endpoint::from_shared(controller.clone()) else {
            return;
        };
        // As the sidecar does: only the roster certificate's issuer is trusted.
        if let Some(ca) = &ca {
            let config = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .domain_name("localhost");
            let Ok(with_tls) = endpoint.tls_config(config) else {
                return;
            };
            endpoint = with_tls;
        }
        let channel = match endpoint.connect().await {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200 + (sim.index % 50) as u64 * 10)).await;
                continue;
            }
        };
        let mut client = RosterClient::new(channel)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        let request = pb::WatchRequest {
            fleet_health: false,
            sidecar: Some(identity.clone()),
            pools: sim.pools.iter().map(pool_ref).collect(),
            accepts_deltas: true,
            held: assembler.held_rosters(),
        };
        let Ok(stream) = client.watch(bearer(request, sim.token.as_deref())).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let mut stream = stream.into_inner();
        let (reports_tx, reports_rx) = mpsc::channel::<pb::HealthReport>(16);
        let _ = reports_tx
            .send(pb::HealthReport {
                sidecar: Some(identity.clone()),
                pools: vec![],
            })
            .await;
        let mut reporter = client.clone();
        let index = sim.index;
        let reports = bearer(
            tokio_stream::wrappers::ReceiverStream::new(reports_rx),
            sim.token.as_deref(),
        );
        let report_task = tokio::spawn(async move {
            let Ok(response) = reporter.report_changes(reports).await else {
                return;
            };
            // Every pool is reported whole before its changes, so the controller has no
            // reason to ask back; say so if it does.
            let mut feedback = response.into_inner();
            while let Ok(Some(message)) = feedback.message().await {
                if !message.resend.is_empty() {
                    eprintln!("sim-{index}: the controller asks for complete reports");
                }
            }
        });
        let beat = reports_tx.clone();
        let beats = tokio::spawn(async move {
            loop {
                tokio::time::sleep(heartbeat).await;
                if beat.send(pb::HealthReport::default()).await.is_err() {
                    return;
                }
            }
        });
        let mut reported = std::collections::HashSet::new();
        while let Ok(Some(update)) = stream.message().await {
            let at = now_ms();
            let Some(pool) = update.pool.clone() else {
                continue;
            };
            // Deltas and parts are put together as the sidecar does; a state counts as
            // received when its last part is in.
            let version = match assembler.track(&update) {
                Ok(Some(version)) => version,
                Ok(None) => continue,
                Err(error) => {
                    eprintln!("sim-{}: {error}; reconnecting", sim.index);
                    break;
                }
            };
            let endpoints = assembler.held(&pool);
            // The first report of a pool on a stream is complete, as the sidecar's is.
            let first = reported.insert((pool.namespace.clone(), pool.name.clone()));
            let reports = match &update.state {
                // A delta: its new endpoints are healthy, its removed ones no longer reported.
                Some(pb::roster_update::State::Delta(d))
                    if d.base_version < update.version && !first =>
                {
                    let mut changes = health(pool.clone(), version, d.upserted.iter());
                    changes.removed.clone_from(&d.removed);
                    vec![changes]
                }
                // A complete state: reported whole, in parts as the sidecar sends it.
                Some(pb::roster_update::State::Roster(_) | pb::roster_update::State::Delta(_)) => {
                    in_parts(health(pool.clone(), version, assembler.endpoints(&pool)))
                }
                _ => Vec::new(),
            };
            // The roster is applied: say so before reporting on it. The sidecar's reporter is
            // its own task and never holds up the roster stream, so a report the controller is
            // slow to take (flow control while it ingests a fleet's reports) must not delay this
            // line either.
            let line = serde_json::json!({
                "sidecar": sim.index, "pool": format!("{}/{}", pool.namespace, pool.name),
                "version": update.version, "endpoints": endpoints, "at_ms": at,
            });
            if out.send(line.to_string()).is_err() {
                return;
            }
            for report in reports {
                let _ = reports_tx
                    .send(pb::HealthReport {
                        sidecar: None,
                        pools: vec![report],
                    })
                    .await;
            }
        }
        beats.abort();
        report_task.abort();
        tokio::time::sleep(Duration::from_millis(100 + (sim.index % 50) as u64 * 10)).await;
    }
}

/// `rollcall-fleet sim`: start every sidecar and print their lines on stdout.
pub async fn main(
    controller: String,
    ca: Option<Vec<u8>>,
    sims: Vec<SimSidecar>,
    heartbeat: Duration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    for sim in sims {
        tokio::spawn(run(
            controller.clone(),
            ca.clone(),
            sim,
            tx.clone(),
            heartbeat,
        ));
    }
    drop(tx);
    let stdout = std::io::stdout();
    while let Some(line) = rx.recv().await {
        let mut lock = stdout.lock();
        if writeln!(lock, "{line}").is_err() {
            return;
        }
    }
}
