//! What the benchmark reads off a process (resident memory, CPU time from `/proc`) and the
//! percentiles it prints.

use std::time::Duration;

/// Resident set size in MiB.
pub fn rss_mib(pid: u32) -> f64 {
    rollcall_testkit::hostile::rss_kib(pid) as f64 / 1024.0
}

/// User + system CPU seconds so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// Below this share of one core over a sampling window, a process counts as quiet.
const QUIET_SHARE: f64 = 0.1;
/// How often `settle` samples.
const SETTLE_WINDOW: Duration = Duration::from_millis(500);

/// Wait until every process in `pids` has been quiet (under a tenth of a core) for two
/// consecutive half-second windows, or `limit` has passed: what follows then measures the
/// steady state, not the tail of what came before (the first reports of a fleet still being
/// ingested). Returns how long it waited and whether they settled.
pub async fn settle(pids: &[u32], limit: Duration) -> (Duration, bool) {
    let started = tokio::time::Instant::now();
    let mut before: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p)).collect();
    let mut quiet_windows = 0;
    while started.elapsed() < limit {
        tokio::time::sleep(SETTLE_WINDOW).await;
        let now: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p)).collect();
        let busiest = now
            .iter()
            .zip(&before)
            .map(|(n, b)| n - b)
            .fold(0.0, f64::max);
        before = now;
        if busiest < QUIET_SHARE * SETTLE_WINDOW.as_secs_f64() {
            quiet_windows += 1;
            if quiet_windows == 2 {
                return (started.elapsed(), true);
            }
        } else {
            quiet_windows = 0;
        }
    }
    (started.elapsed(), false)
}

/// The `q`-th percentile (0..=1) of `values` (nearest rank).
pub fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.5), 50.0);
        assert_eq!(percentile(&mut v, 0.99), 99.0);
        assert_eq!(percentile(&mut v, 1.0), 100.0);
        assert!(cpu_seconds(std::process::id()) >= 0.0);
        assert!(rss_mib(std::process::id()) > 0.0);
    }
}
