//! What a report may put into a pool's status: only endpoints of the roster the controller
//! serves, reasons from the closed set this controller knows (anything else reads `Other`),
//! and bounded error text, so no sidecar can invent endpoints, smuggle markup into Events, or
//! grow a status past the object size limit.

use std::net::SocketAddr;

use rollcall_api::roster::PoolHealth;

use crate::FastSet;

/// Reasons a sidecar may give for an endpoint's state.
pub const REASONS: &[&str] = &[
    "New",
    "ProbeSucceeded",
    "RequestSucceeded",
    "ProbeFailures",
    "ConsecutiveGatewayErrors",
    "Consecutive5xx",
    "ErrorRate",
    "ProbationFailed",
    "ProbationPassed",
    "EjectionExpired",
    "Terminating",
    "RemovedFromRoster",
    "BackInRoster",
    "Stalled",
];

/// What a reason outside [`REASONS`] is recorded as.
pub const OTHER_REASON: &str = "Other";

/// Longest `lastError` kept, in characters.
pub const MAX_ERROR_CHARS: usize = 256;

/// `health` cut down to what the roster and the rules allow; returns how many endpoint
/// entries were dropped.
pub fn admit(health: &mut PoolHealth, known: &FastSet<SocketAddr>) -> usize {
    let before = health.endpoints.len();
    health.endpoints.retain(|e| known.contains(&e.addr));
    let mut seen = FastSet::with_capacity_and_hasher(health.endpoints.len(), Default::default());
    health.endpoints.retain(|e| seen.insert(e.addr));
    if let Some(refused) = &mut health.refused {
        refused.reason = bounded(&refused.reason);
    }
    for e in &mut health.endpoints {
        if !e.reason.is_empty() && !REASONS.contains(&e.reason.as_str()) {
            e.reason = OTHER_REASON.into();
        }
        if let Some(error) = &mut e.last_error {
            *error = bounded(error);
        }
    }
    before - health.endpoints.len()
}

/// At most `MAX_ERROR_CHARS` characters, none of them control characters.
fn bounded(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(MAX_ERROR_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use rollcall_api::roster::{Endpoint, EndpointHealth, EndpointState, PoolRef, Roster};

    use super::*;

    fn endpoint(addr: &str) -> Endpoint {
        Endpoint::serving(addr.parse().unwrap())
    }

    fn health(addr: &str, reason: &str, error: Option<&str>) -> EndpointHealth {
        EndpointHealth {
            probe: None,
            addr: addr.parse().unwrap(),
            state: EndpointState::Ejected,
            reason: reason.into(),
            since_unix_ms: 1,
            times_ejected: 1,
            last_error: error.map(String::from),
            ejection_suppressed: false,
        }
    }

    #[test]
    fn reports_keep_only_roster_endpoints_known_reasons_and_bounded_errors() {
        let roster = Roster {
            endpoints: vec![endpoint("10.0.0.1:80"), endpoint("10.0.0.2:80")],
            policy: Default::default(),
            service: "shop/web:http".into(),
        };
        let huge = "x".repeat(1 << 20);
        let mut report = PoolHealth {
            pool: PoolRef::new("shop", "web"),
            roster_version: 1,
            panic: false,
            endpoints: vec![
                health("10.0.0.1:80", "ProbeFailures", Some(&huge)),
                health("10.0.0.1:80", "ProbeFailures", None),
                health("10.0.0.2:80", "<script>", Some("refused\n\u{7}")),
                health("10.9.9.9:80", "ProbeFailures", None),
            ],
            refused: Some(rollcall_api::roster::Refusal {
                version: 2,
                reason: format!("policy.x: bad\n{huge}"),
            }),
            complete: false,
            continued: false,
            removed: Vec::new(),
        };
        let known: FastSet<SocketAddr> = roster.endpoints.iter().map(|e| e.addr).collect();
        assert_eq!(admit(&mut report, &known), 2);
        assert_eq!(report.endpoints.len(), 2);
        assert_eq!(
            report.endpoints[0].last_error.as_ref().unwrap().len(),
            MAX_ERROR_CHARS
        );
        assert_eq!(report.endpoints[1].reason, "Other");
        assert_eq!(report.endpoints[1].last_error.as_deref(), Some("refused"));
        let refused = report.refused.as_ref().unwrap();
        assert_eq!(refused.reason.chars().count(), MAX_ERROR_CHARS);
        assert!(
            refused.reason.starts_with("policy.x: bad"),
            "{}",
            refused.reason
        );
    }
}
