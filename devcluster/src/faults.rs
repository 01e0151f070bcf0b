//! Fault switches for tests: fail the next N API requests (optionally only one verb or
//! resource) with a status such as 500 or 429, or hold every response for a while. Dropping
//! every watch and expiring old resource versions act on the cluster directly; the control
//! endpoint (`/_devcluster/faults`) reaches all four.

use parking_lot::Mutex;
use serde::Deserialize;
use tokio::time::{Duration, Instant};

use crate::status::ApiError;

/// One failure rule: the next `count` matching requests get `code`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailRule {
    pub count: u32,
    #[serde(default = "default_code")]
    pub code: u16,
    /// Only requests with this verb (`list`, `watch`, `patch`...).
    #[serde(default)]
    pub verb: Option<String>,
    /// Only requests for this resource (`backendpools`, `leases`...).
    #[serde(default)]
    pub resource: Option<String>,
}

fn default_code() -> u16 {
    500
}

#[derive(Debug, Default)]
struct State {
    fail: Option<FailRule>,
    paused_until: Option<Instant>,
}

/// The switches, shared by every connection.
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<State>,
}

fn failure(code: u16) -> ApiError {
    match code {
        429 => ApiError::too_many_requests(1),
        503 => ApiError::internal(
            "the server is currently unable to handle the request (fault injected)",
        )
        .with_code(503, "ServiceUnavailable"),
        504 => ApiError::timeout("the request timed out (fault injected)"),
        code => ApiError::internal(
            "an error on the server (\"fault injected\") has prevented the request from succeeding",
        )
        .with_code(code, "InternalError"),
    }
}

// === impl Faults ===

impl Faults {
    pub fn fail(&self, rule: FailRule) {
        self.state.lock().fail = (rule.count > 0).then_some(rule);
    }

    /// Hold every API response until `duration` has passed.
    pub fn pause(&self, duration: Duration) {
        self.state.lock().paused_until = Some(Instant::now() + duration);
    }

    pub fn clear(&self) {
        *self.state.lock() = State::default();
    }

    /// Wait out a pause, then take one failure if the request matches the rule.
    pub async fn before(&self, verb: &str, resource: &str) -> Option<ApiError> {
        let until = self.state.lock().paused_until;
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
        let mut state = self.state.lock();
        let rule = state.fail.as_mut()?;
        let matches = rule.verb.as_deref().is_none_or(|v| v == verb)
            && rule.resource.as_deref().is_none_or(|r| r == resource);
        if !matches {
            return None;
        }
        rule.count -= 1;
        let code = rule.code;
        if rule.count == 0 {
            state.fail = None;
        }
        Some(failure(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn failures_are_counted_and_matched() {
        let faults = Faults::default();
        faults.fail(FailRule {
            count: 2,
            code: 429,
            verb: Some("list".into()),
            resource: None,
        });
        assert!(faults.before("get", "pods").await.is_none());
        assert_eq!(faults.before("list", "pods").await.unwrap().code, 429);
        assert_eq!(faults.before("list", "leases").await.unwrap().code, 429);
        assert!(faults.before("list", "pods").await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_requests_until_it_ends() {
        let faults = Faults::default();
        faults.pause(Duration::from_secs(3));
        let start = Instant::now();
        assert!(faults.before("get", "pods").await.is_none());
        assert!(start.elapsed() >= Duration::from_secs(3));
    }
}
