//! The sidecar alone, no cluster: three local backends in-process, a sidecar config file,
//! `rollcall-sidecar`, steady traffic through it, backend 2 killed and revived, and what clients
//! and the sidecar saw every second.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use rollcall_testkit::system::{Sidecar, free_port};
use rollcall_testkit::{Behavior, TestBackend};
use tokio::time::Instant;

use crate::Schedule;
use crate::report::{self, Tally, Timeline};
use rollcall_testkit::traffic::Traffic;

/// How often the sidecar's view is sampled (the state timeline's resolution when the sidecar
/// does not report `sinceSeconds`).
const SAMPLE: Duration = Duration::from_millis(250);

/// The sidecar config for one pool over `backends`: HTTP probes every 500ms and a 5s base
/// ejection, so the demo shows detection and re-admission within seconds.
pub fn config_yaml(listen: SocketAddr, backends: &[SocketAddr]) -> String {
    let mut yaml = format!("pools:\n- name: demo\n  listen: \"{listen}\"\n  endpoints:\n");
    for addr in backends {
        yaml.push_str(&format!(
            "  - {{address: \"{addr}\", zone: a, weight: 1, terminating: false}}\n"
        ));
    }
    yaml.push_str(concat!(
        "  policy:\n",
        "    healthCheck: {type: HTTP, path: /healthz, interval: 500ms, timeout: 250ms}\n",
        "    outlierDetection: {baseEjectionTime: 5s}\n",
    ));
    yaml
}

pub async fn run(schedule: Schedule, rate: u32) -> anyhow::Result<()> {
    let mut backends = Vec::new();
    for _ in 0..3 {
        backends.push(TestBackend::spawn(Behavior::ok()).await?);
    }
    let addrs: Vec<SocketAddr> = backends.iter().map(TestBackend::addr).collect();
    let dir = std::env::temp_dir().join(format!("rollcall-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let config = dir.join("sidecar.yaml");
    let listen = free_port()?;
    std::fs::write(&config, config_yaml(listen, &addrs))
        .with_context(|| format!("writing {}", config.display()))?;

    for (i, addr) in addrs.iter().enumerate() {
        println!("backend b{} on {addr}", i + 1);
    }
    println!("config {}", config.display());
    let mut sidecar = Sidecar::with_config(&config, listen, &dir).await?;
    println!(
        "rollcall-sidecar listening on {listen}, admin on http://{}/endpoints, log {}",
        sidecar.admin,
        sidecar.process.log.display()
    );
    println!(
        "{rate} req/s for {}s; backend b2 dies at {}s and returns at {}s\n",
        schedule.duration, schedule.kill_at, schedule.revive_at
    );

    let outcome = drive(&backends, &mut sidecar, rate, schedule).await;
    sidecar.process.kill().await;
    drop(backends);
    if outcome.is_ok()
        && let Err(e) = std::fs::remove_dir_all(&dir)
    {
        tracing::warn!(error = %e, "removing {}", dir.display());
    }
    outcome
}

/// Drives traffic, the kill/revive script and the per-second lines.
async fn drive(
    backends: &[TestBackend],
    sidecar: &mut Sidecar,
    rate: u32,
    schedule: Schedule,
) -> anyhow::Result<()> {
    let duration = schedule.duration;
    let addrs: Vec<SocketAddr> = backends.iter().map(TestBackend::addr).collect();
    let victim = &backends[1];
    let (kill_at, revive_at) = (schedule.kill_at as f64, schedule.revive_at as f64);
    let start = Instant::now();
    let traffic = Traffic::start(sidecar.listen, rate);
    let mut ticks = tokio::time::interval(SAMPLE);
    let (mut killed, mut revived) = (false, false);
    let mut events = Vec::new();
    let mut timeline = Timeline::default();
    let mut last_print = (0.0, Tally::default());
    let mut next_print = 1.0;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut interrupted = false;

    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = &mut ctrl_c => {
                println!("\ninterrupted");
                interrupted = true;
            }
        }
        let t = start.elapsed().as_secs_f64();
        if !killed && t >= kill_at {
            victim.kill().await;
            killed = true;
            events.push((t, format!("killed b2 ({})", victim.addr())));
            println!(">>> t={t:.1}s killed b2 ({})", victim.addr());
        }
        if !revived && t >= revive_at {
            victim.revive().await?;
            revived = true;
            events.push((t, format!("revived b2 ({})", victim.addr())));
            println!(">>> t={t:.1}s revived b2 ({})", victim.addr());
        }
        if let Some(reason) = sidecar.process.exited() {
            anyhow::bail!("at t={t:.1}s {reason}");
        }
        let pool = sidecar.pool("demo").await;
        if let Some(endpoint) = pool.as_ref().and_then(|p| report::find(p, victim.addr())) {
            timeline.observe(start.elapsed().as_secs_f64(), endpoint);
        }
        let (ok, failed) = traffic.totals();
        let overall = Tally { ok, failed };
        if t >= next_print {
            let last = overall.since(last_print.1);
            println!("{}", report::line(t, last, overall, pool.as_ref(), &addrs));
            last_print = (t, overall);
            next_print += 1.0;
        }
        if t >= duration as f64 || interrupted {
            let failures = traffic.counts.failures.lock().clone();
            drop(traffic);
            println!(
                "{}",
                report::summary(overall, &failures, victim.addr(), &events, &timeline)
            );
            return Ok(());
        }
    }
}
