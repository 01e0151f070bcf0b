//! Turns the runs into the tables: one per scenario, one row per proxy, and the rollcall ratios.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::proxy::Kind;
use crate::scenario::{Outcome, Plan, Scenario};

/// One row's figures.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub requests: usize,
    pub failed: usize,
    pub failed_after: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p99_after_ms: f64,
    pub max_ms: f64,
    pub b2: String,
    pub last_b2: String,
    pub marked_down: String,
    pub kinds: String,
    /// POSTs that failed (no proxy retries one once it was sent).
    pub post_failed: usize,
    /// Tries the backends received per client request, after the injection.
    pub attempts: f64,
    /// `refused-5s`: from backend 2's return to the first request it got.
    pub back: String,
    /// POSTs (and GETs) that reached the backends more than once.
    pub duplicates: String,
    /// Backend 2's part of all traffic requests after the injection, and second by second.
    pub b2_share: Option<f64>,
    pub b2_share_by_second: Vec<Option<f64>>,
}

/// A proxy's result in one scenario: figures, or why there are none.
pub type Cell = Result<Row, String>;

/// Figures for one run.
pub fn row(scenario: Scenario, outcome: &Outcome) -> Row {
    let records = &outcome.records;
    let after: Vec<_> = records
        .iter()
        .filter(|r| r.at >= outcome.injected)
        .collect();
    let mut kinds = BTreeMap::<&str, usize>::new();
    for r in records {
        if let Some(kind) = &r.failure {
            *kinds.entry(kind.as_str()).or_default() += 1;
        }
    }
    let failed = kinds.values().sum();
    let window = outcome.duration.saturating_sub(outcome.injected);
    Row {
        requests: records.len(),
        failed,
        failed_after: after.iter().filter(|r| r.failure.is_some()).count(),
        p50_ms: percentile(records.iter().map(|r| r.latency), 0.50),
        p99_ms: percentile(records.iter().map(|r| r.latency), 0.99),
        p99_after_ms: percentile(after.iter().map(|r| r.latency), 0.99),
        max_ms: percentile(records.iter().map(|r| r.latency), 1.0),
        b2: if scenario.b2_counts() {
            outcome.b2_after.to_string()
        } else {
            "refused".into()
        },
        last_b2: match (scenario.b2_counts(), outcome.b2_last) {
            (false, _) => "n/a".into(),
            (true, None) => "none".into(),
            (true, Some(t)) if window.saturating_sub(t) < Duration::from_millis(500) => {
                "never stopped".into()
            }
            (true, Some(t)) => secs(t),
        },
        marked_down: match (outcome.has_view, outcome.marked_down) {
            (false, _) => "no view".into(),
            (true, None) => "never".into(),
            (true, Some(t)) => secs(t),
        },
        post_failed: records
            .iter()
            .filter(|r| r.post && r.failure.is_some())
            .count(),
        attempts: if after.is_empty() {
            0.0
        } else {
            outcome.backends_after as f64 / after.len() as f64
        },
        back: match (scenario.recovers(), outcome.back_after) {
            (false, _) => "-".into(),
            (true, None) => "never".into(),
            (true, Some(t)) => secs(t),
        },
        duplicates: format!("{}/{}", outcome.duplicate_posts, outcome.duplicate_gets),
        b2_share: (outcome.backends_after > 0 && scenario.b2_counts())
            .then(|| outcome.b2_after as f64 / outcome.backends_after as f64),
        b2_share_by_second: outcome.b2_share.clone(),
        kinds: if kinds.is_empty() {
            "-".into()
        } else {
            kinds
                .iter()
                .map(|(k, n)| format!("{k}:{n}"))
                .collect::<Vec<_>>()
                .join(" ")
        },
    }
}

/// The table for one scenario, with the ratios.
pub fn table(scenario: Scenario, plan: &Plan, cells: &[(Kind, Cell)]) -> String {
    let mut out = String::new();
    let window = scenario
        .duration(plan)
        .saturating_sub(plan.inject_at)
        .as_secs_f64();
    let _ = writeln!(
        out,
        "== {}: {}\n   injected at t={:.0}s, {window:.0}s observed after it",
        scenario.name(),
        scenario.describe(),
        plan.inject_at.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "{:<9} {:>8} {:>7} {:>7} {:>5} {:>7} {:>8} {:>9} {:>8} {:>7} {:>13} {:>11} {:>8} {:>6} {:>7}  client failures by kind",
        "proxy",
        "requests",
        "failed",
        "after",
        "POSTs",
        "p50 ms",
        "p99 ms",
        "p99 after",
        "max ms",
        "b2 got",
        "last b2 req",
        "marked down",
        "b2 back",
        "tries",
        "dup P/G"
    );
    for (kind, cell) in cells {
        match cell {
            Ok(r) => {
                let _ = writeln!(
                    out,
                    "{:<9} {:>8} {:>7} {:>7} {:>5} {:>7.2} {:>8.2} {:>9.2} {:>8.0} {:>7} {:>13} {:>11} {:>8} {:>6.2} {:>7}  {}",
                    kind.name(),
                    r.requests,
                    r.failed,
                    r.failed_after,
                    r.post_failed,
                    r.p50_ms,
                    r.p99_ms,
                    r.p99_after_ms,
                    r.max_ms,
                    r.b2,
                    r.last_b2,
                    r.marked_down,
                    r.back,
                    r.attempts,
                    r.duplicates,
                    r.kinds
                );
            }
            Err(why) => {
                let _ = writeln!(out, "{:<9} skipped: {why}", kind.name());
            }
        }
    }
    if scenario.shows_share() {
        for (kind, cell) in cells {
            if let Ok(r) = cell {
                let _ = writeln!(
                    out,
                    "{:<9} b2 share after the injection {}; by second: {}",
                    kind.name(),
                    percent(r.b2_share),
                    r.b2_share_by_second
                        .iter()
                        .map(|s| percent(*s))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
        }
    }
    let find = |k: Kind| {
        cells
            .iter()
            .find(|(kind, _)| *kind == k)
            .and_then(|(_, c)| c.as_ref().ok())
    };
    if let Some(ours) = find(Kind::Rollcall) {
        for other in [Kind::Haproxy, Kind::Nginx] {
            if let Some(theirs) = find(other) {
                let _ = writeln!(
                    out,
                    "rollcall vs {}: failed {} vs {} ({}), p99 {}",
                    other.name(),
                    ours.failed,
                    theirs.failed,
                    ratio(ours.failed as f64, theirs.failed as f64),
                    ratio(ours.p99_ms, theirs.p99_ms)
                );
                if scenario.shows_share() {
                    let _ = writeln!(
                        out,
                        "rollcall vs {}: b2 share {} vs {}",
                        other.name(),
                        percent(ours.b2_share),
                        percent(theirs.b2_share)
                    );
                }
            }
        }
    }
    out
}

/// The legend printed once under the tables.
pub fn legend(plan: &Plan) -> String {
    format!(
        "columns: requests sent at {} req/s (open loop, GET / with every 5th a POST /, keep-alive, no client retries); \
failed = non-2xx, connection error or no answer within {:.0}s; after = of those, sent at or after \
the injection; POSTs = failed POSTs (never retried once sent); p50/p99 over the whole run, p99 after = requests sent after the injection; max = the slowest request; \
b2 got = traffic requests backend 2 received after the injection (refused: a killed backend \
cannot count); last b2 req = seconds from the injection to the last one (never stopped = still \
arriving in the last 0.5 s); marked down = seconds until the proxy's own status view said b2 \
was out (rollcall /endpoints Ejected, HAProxy stats DOWN; nginx has no view); b2 back = \
refused-5s only, seconds from backend 2's return to the first request it got; b2 share (slow \
scenarios) = backend 2's part of the traffic requests all backends received after the injection, \
then second by second (a third is an even split); tries = requests \
all backends received per client request after the injection (retries included); dup P/G = POSTs / \
GETs that reached the backends more than once (a POST there twice is an order placed twice). Ratios below 1x \
favour rollcall; 0 vs 0 is `same`.",
        plan.rate,
        plan.client_timeout.as_secs_f64()
    )
}

fn ratio(ours: f64, theirs: f64) -> String {
    if ours == theirs {
        "same".into()
    } else if theirs == 0.0 {
        "worse: they had none".into()
    } else {
        format!("{:.2}x", ours / theirs)
    }
}

/// A share as a whole percentage; `-` for none.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".into(), |s| format!("{:.0}%", s * 100.0))
}

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// The `q` quantile in milliseconds (nearest rank); 0 for no samples.
fn percentile(samples: impl Iterator<Item = Duration>, q: f64) -> f64 {
    let mut v: Vec<Duration> = samples.collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1].as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ms = |n: u64| Duration::from_millis(n);
        let v: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(v.iter().copied(), 0.99), 99.0);
        assert_eq!(percentile(v.iter().copied(), 0.50), 50.0);
        assert_eq!(percentile(std::iter::empty(), 0.99), 0.0);
    }

    #[test]
    fn ratios_say_what_zero_means() {
        assert_eq!(ratio(0.0, 0.0), "same");
        assert_eq!(ratio(3.0, 0.0), "worse: they had none");
        assert_eq!(ratio(1.0, 4.0), "0.25x");
    }

    #[test]
    fn shares_print_as_whole_percentages() {
        assert_eq!(percent(Some(1.0 / 3.0)), "33%");
        assert_eq!(percent(Some(0.004)), "0%");
        assert_eq!(percent(None), "-");
    }
}
