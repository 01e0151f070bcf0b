//! One run of one scenario through one proxy: restore the backends, start the proxy fresh, load
//! it, break backend 2 on schedule, watch backend 2's own request counter and the proxy's own
//! view of it, stop everything.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Duration;

use anyhow::bail;
use rollcall_testkit::{Behavior, TestBackend};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::Shape;
use crate::load::Load;
use crate::proxy::{Kind, Running, Setup, StatusView};
use crate::scenario::{Outcome, Plan, RECOVER_AFTER, Scenario};

/// Every backend alive, answering 200, healthy, counters at zero.
pub async fn restore(backends: &[TestBackend]) -> anyhow::Result<()> {
    for b in backends {
        b.revive().await?;
        b.set_behavior(Behavior::ok());
        b.set_healthz(true);
        b.reset_counters();
    }
    Ok(())
}

/// Runs `scenario` through a fresh `kind`. `stop` aborts the run (ctrl-c).
pub async fn run(
    scenario: Scenario,
    kind: Kind,
    setup: &Setup,
    backends: &[TestBackend],
    plan: Plan,
    stop: &AtomicBool,
) -> anyhow::Result<Outcome> {
    restore(backends).await?;
    let backends = &backends[..scenario.backends().min(backends.len())];
    scenario.baseline(backends);
    let addrs: Vec<SocketAddr> = backends.iter().map(TestBackend::addr).collect();
    let shape = Shape {
        rollcall_algorithm: setup.rollcall_algorithm,
        ..scenario.shape()
    };
    let mut proxy = Running::start(kind, setup, &addrs, shape, scenario.name()).await?;
    let result = drive(scenario, &mut proxy, backends, plan, stop).await;
    proxy.save_counters().await;
    proxy.stop().await;
    // Black-holed requests stay open until the backend's connections close; a revive later
    // starts a new life, so nothing of this run leaks into the next.
    restore(backends).await?;
    result
}

async fn drive(
    scenario: Scenario,
    proxy: &mut Running,
    backends: &[TestBackend],
    plan: Plan,
    stop: &AtomicBool,
) -> anyhow::Result<Outcome> {
    tokio::time::sleep(plan.settle).await;
    let b2 = &backends[1];
    for b in backends {
        b.reset_counters();
    }
    let view = proxy.view();
    let load = Load::start(proxy.listen, plan.rate, plan.client_timeout);
    let start = load.started;
    let mut ticks = tokio::time::interval(Duration::from_millis(5));
    let mut injected: Option<(Instant, u64)> = None;
    let mut watcher: Option<JoinHandle<Option<Duration>>> = None;
    let (mut last_count, mut b2_last) = (0, None);
    let mut failure = None;
    let duration = scenario.duration(&plan);
    let total = |backends: &[TestBackend]| backends.iter().map(TestBackend::requests).sum::<u64>();
    let mut all_before = 0;
    // For a scenario that recovers: when backend 2 came back.
    let mut recovered: Option<Instant> = None;
    let mut back_after = None;
    // Backend 2's and every backend's counts at the last whole second after the injection.
    let mut share_mark = (0, 0);
    let mut b2_share = Vec::new();
    while start.elapsed() < duration {
        ticks.tick().await;
        if stop.load(SeqCst) {
            failure = Some("interrupted".to_owned());
            break;
        }
        if let Some(reason) = proxy.exited() {
            failure = Some(reason);
            break;
        }
        if let Some((at, _)) = injected
            && recovered.is_none()
            && at.elapsed() >= RECOVER_AFTER
            && scenario.recover(backends).await?
        {
            recovered = Some(Instant::now());
            last_count = b2.requests();
        }
        if let Some((at, _)) = injected {
            scenario.flap(backends, at.elapsed()).await?;
        }
        let count = b2.requests();
        if let Some((at, _)) = injected
            && at.elapsed() >= Duration::from_secs(b2_share.len() as u64 + 1)
        {
            let now = (count, total(backends));
            let b2_delta = now.0.saturating_sub(share_mark.0);
            let all_delta = now.1.saturating_sub(share_mark.1);
            b2_share.push((all_delta > 0).then(|| b2_delta as f64 / all_delta as f64));
            share_mark = now;
        }
        match injected {
            None if start.elapsed() >= plan.inject_at => {
                let at = Instant::now();
                all_before = total(backends);
                scenario.inject(backends).await;
                let count = b2.requests();
                injected = Some((at, count));
                share_mark = (count, total(backends));
                last_count = count;
                watcher = Some(tokio::spawn(watch_down(view, b2.addr(), at)));
            }
            Some((at, _)) if count != last_count => {
                last_count = count;
                b2_last = Some(at.elapsed());
                if let Some(back) = recovered {
                    back_after.get_or_insert(back.elapsed());
                }
            }
            _ => {}
        }
    }
    let records = load.finish().await;
    let (duplicate_posts, duplicate_gets) = duplicates(backends);
    let marked_down = match watcher {
        Some(w) => {
            w.abort();
            w.await.ok().flatten()
        }
        None => None,
    };
    if let Some(reason) = failure {
        bail!(reason);
    }
    let Some((at, before)) = injected else {
        bail!("the failure was never injected");
    };
    Ok(Outcome {
        records,
        injected: at.duration_since(start),
        b2_after: b2.requests().saturating_sub(before),
        b2_last,
        marked_down,
        has_view: view.is_some(),
        backends_after: total(backends).saturating_sub(all_before),
        back_after,
        b2_share,
        duration,
        duplicate_posts,
        duplicate_gets,
    })
}

/// Requests whose id reached the backends more than once, POSTs and GETs.
fn duplicates(backends: &[TestBackend]) -> (u64, u64) {
    let mut seen = std::collections::HashMap::<String, u32>::new();
    for b in backends {
        for id in b.request_ids() {
            *seen.entry(id).or_default() += 1;
        }
    }
    let twice = |prefix: &str| {
        seen.iter()
            .filter(|(id, n)| id.starts_with(prefix) && **n > 1)
            .count() as u64
    };
    (twice("post-"), twice("get-"))
}

/// Polls the proxy's own view every 20 ms; resolves with the first "down" after `since`.
/// Never resolves for a proxy without a view (the caller aborts it).
async fn watch_down(
    view: Option<StatusView>,
    backend: SocketAddr,
    since: Instant,
) -> Option<Duration> {
    let view = view?;
    loop {
        if view.says_down(backend, 1).await == Some(true) {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
