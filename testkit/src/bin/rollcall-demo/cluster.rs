//! The whole system on one machine: the local API server with the CRD and `deploy/demo/`
//! applied, the controller, two sidecars in controller mode, steady traffic through both, one
//! backend killed and revived — and the pool as `kubectl get bp -w` shows it, its ejections,
//! its Events and the clients' success rate, live. `--keep` leaves it all running for kubectl.

use std::time::Duration;

use anyhow::Context;
use rollcall_testkit::system::{Stack, StackOptions};
use tokio::time::Instant;

use crate::report::Tally;
use crate::{Schedule, view};
use rollcall_testkit::traffic::Traffic;

pub async fn run(schedule: Schedule, rate: u32, keep: bool) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("rollcall-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    println!("starting the whole system (logs in {})", dir.display());
    let options = StackOptions {
        announce: true,
        ..StackOptions::default()
    };
    let mut stack = tokio::select! {
        stack = Stack::start(&dir, options) => stack?,
        _ = tokio::signal::ctrl_c() => {
            println!("interrupted");
            return Ok(());
        }
    };
    let addrs: Vec<String> = (0..3).map(|i| stack.backend_address(i)).collect();
    for (i, addr) in addrs.iter().enumerate() {
        println!(
            "backend b{} on {addr} (EndpointSlice shop/web-b{})",
            i + 1,
            i + 1
        );
    }
    let names = {
        let addrs = addrs.clone();
        move |address: &str| {
            addrs
                .iter()
                .position(|a| a == address)
                .map_or_else(|| "?".to_string(), |i| format!("b{}", i + 1))
        }
    };
    println!(
        "\n{rate} req/s through the two sidecars for {}s; b2 dies at {}s and returns at {}s\n",
        schedule.duration, schedule.kill_at, schedule.revive_at
    );
    let (mut lines, mut watches) = view::start(stack.api.client.clone(), names);
    let traffic: Vec<Traffic> = stack
        .sidecars
        .iter()
        .map(|s| Traffic::start(s.listen, (rate / 2).max(1)))
        .collect();
    let totals = |traffic: &[Traffic]| {
        traffic.iter().fold(Tally::default(), |t, x| {
            let (ok, failed) = x.totals();
            Tally {
                ok: t.ok + ok,
                failed: t.failed + failed,
            }
        })
    };

    let start = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.tick().await;
    let (mut killed, mut revived) = (false, false);
    let mut last = Tally::default();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let interrupted = loop {
        tokio::select! {
            Some(line) = lines.recv() => {
                println!("{line}");
                continue;
            }
            _ = ticks.tick() => {}
            _ = &mut ctrl_c => break true,
        }
        let t = start.elapsed().as_secs_f64();
        if !killed && t >= schedule.kill_at as f64 {
            stack.backends[1].kill().await;
            killed = true;
            println!(">>> t={t:.0}s killed b2 ({})", addrs[1]);
        }
        if !revived && t >= schedule.revive_at as f64 {
            stack.backends[1].revive().await?;
            revived = true;
            println!(">>> t={t:.0}s revived b2 ({})", addrs[1]);
        }
        for sidecar in stack.sidecars.iter_mut() {
            if let Some(reason) = sidecar.process.exited() {
                anyhow::bail!("{reason}");
            }
        }
        let overall = totals(&traffic);
        let recent = overall.since(last);
        last = overall;
        println!(
            "t={t:>3.0}s  clients: last 1s {:>6.2}% of {:<4} overall {:>6.2}% of {}",
            recent.success(),
            recent.total(),
            overall.success(),
            overall.total()
        );
        if t >= schedule.duration as f64 {
            break false;
        }
    };
    let overall = totals(&traffic);
    drop(traffic);
    println!(
        "\nsummary: {} requests through 2 sidecars, {} failed, {:.2}% success",
        overall.total(),
        overall.failed,
        overall.success()
    );
    if keep && !interrupted {
        println!(
            "\neverything keeps running; in another shell:\n  export KUBECONFIG={}\n  kubectl get bp -n shop\n  kubectl describe bp web -n shop\n  kubectl get events -n shop\nCtrl-C stops it all.",
            stack.api.kubeconfig.display()
        );
        loop {
            tokio::select! {
                Some(line) = lines.recv() => println!("{line}"),
                _ = tokio::signal::ctrl_c() => break,
            }
        }
    }
    // The view's watches end before the API server does, or kube's client reports the server
    // going away as errors after the summary.
    watches.shutdown().await;
    for controller in stack.controllers.iter_mut() {
        controller.process.terminate(Duration::from_secs(5)).await;
    }
    drop(stack);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        tracing::debug!(error = %e, "removing {}", dir.display());
    }
    Ok(())
}
