//! What the demo prints: one compact line per second and, at the end, a summary with the state
//! timeline of the backend that was killed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;

use rollcall_testkit::system::{EndpointView, PoolView};

/// Successes and failures over some span.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub ok: u64,
    pub failed: u64,
}

/// The state changes of one endpoint, with the time each began.
#[derive(Debug, Default)]
pub struct Timeline {
    entries: Vec<(f64, String)>,
}

// === impl Tally ===

impl Tally {
    pub fn total(&self) -> u64 {
        self.ok + self.failed
    }

    /// Success percentage; 100 when nothing was sent.
    pub fn success(&self) -> f64 {
        if self.total() == 0 {
            100.0
        } else {
            self.ok as f64 * 100.0 / self.total() as f64
        }
    }

    pub fn since(&self, earlier: Tally) -> Tally {
        Tally {
            ok: self.ok - earlier.ok,
            failed: self.failed - earlier.failed,
        }
    }
}

// === impl Timeline ===

impl Timeline {
    /// Records `endpoint` as seen at `now` (seconds since the demo started). A new state is
    /// dated by the sidecar's `sinceSeconds` when it reports one, else by `now`.
    pub fn observe(&mut self, now: f64, endpoint: &EndpointView) {
        let label = state_label(endpoint);
        let state_changed = self
            .entries
            .last()
            .is_none_or(|(_, last)| state_of(last) != endpoint.state);
        if !state_changed {
            return;
        }
        let began = endpoint.since_seconds.map_or(now, |since| now - since);
        let floor = self.entries.last().map_or(0.0, |(t, _)| *t);
        self.entries.push((began.clamp(floor, now).max(0.0), label));
    }

    pub fn render(&self) -> String {
        if self.entries.is_empty() {
            return "(no reports from the sidecar)".into();
        }
        self.entries
            .iter()
            .map(|(t, label)| format!("{t:.1}s {label}"))
            .collect::<Vec<_>>()
            .join(" -> ")
    }
}

fn state_label(endpoint: &EndpointView) -> String {
    match (&endpoint.reason, endpoint.state.as_str()) {
        (Some(reason), state) if state != "Healthy" => format!("{state} ({reason})"),
        (_, state) => state.to_owned(),
    }
}

fn state_of(label: &str) -> &str {
    label.split(' ').next().unwrap_or(label)
}

/// One line: time, success in the last second and overall, each backend's state.
pub fn line(
    t: f64,
    last: Tally,
    overall: Tally,
    pool: Option<&PoolView>,
    backends: &[SocketAddr],
) -> String {
    let mut out = format!(
        "t={t:>5.1}s  last 1s {:>6.2}% of {:<4} overall {:>6.2}% of {:<6}",
        last.success(),
        last.total(),
        overall.success(),
        overall.total()
    );
    match pool {
        None => out.push_str(" | admin /endpoints did not answer"),
        Some(pool) => {
            if pool.panic {
                out.push_str(" PANIC");
            }
            for (i, addr) in backends.iter().enumerate() {
                let state = find(pool, *addr).map_or_else(|| "absent".into(), state_label);
                let _ = write!(out, " | b{} {state}", i + 1);
            }
        }
    }
    out
}

/// The endpoint of `pool` at `addr`.
pub fn find(pool: &PoolView, addr: SocketAddr) -> Option<&EndpointView> {
    let addr = addr.to_string();
    pool.endpoints.iter().find(|e| e.address == addr)
}

/// The closing summary.
pub fn summary(
    overall: Tally,
    failures: &BTreeMap<String, u64>,
    victim: SocketAddr,
    events: &[(f64, String)],
    timeline: &Timeline,
) -> String {
    let mut out = format!(
        "\nsummary: {} requests, {} failed, {:.2}% success\n",
        overall.total(),
        overall.failed,
        overall.success()
    );
    if !failures.is_empty() {
        let kinds: Vec<String> = failures.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let _ = writeln!(out, "failures by kind: {}", kinds.join(", "));
    }
    for (t, event) in events {
        let _ = writeln!(out, "  {t:>5.1}s {event}");
    }
    let _ = writeln!(
        out,
        "b2 ({victim}) as the sidecar saw it: {}",
        timeline.render()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(state: &str, reason: Option<&str>, since: Option<f64>) -> EndpointView {
        EndpointView {
            address: "127.0.0.1:1".into(),
            state: state.into(),
            reason: reason.map(Into::into),
            since_seconds: since,
        }
    }

    #[test]
    fn timeline_dates_changes_by_since_seconds_and_skips_repeats() {
        let mut t = Timeline::default();
        t.observe(0.5, &ep("Healthy", Some("ProbeSucceeded"), Some(0.4)));
        t.observe(
            6.0,
            &ep("Ejected", Some("ConsecutiveGatewayErrors"), Some(0.7)),
        );
        t.observe(
            7.0,
            &ep("Ejected", Some("ConsecutiveGatewayErrors"), Some(1.7)),
        );
        t.observe(16.0, &ep("Probation", None, None));
        assert_eq!(
            t.render(),
            "0.1s Healthy -> 5.3s Ejected (ConsecutiveGatewayErrors) -> 16.0s Probation"
        );
    }
}
