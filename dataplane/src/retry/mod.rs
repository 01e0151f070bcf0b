//! Whether a request may be tried again, and when. Pure: the request loop reports how a try
//! ended and this module answers, so every rule is a unit test.
//!
//! - `RetryRules` (this file) are the rules of docs/design.md, "Retries", in order: a request
//!   that never reached a connection may go anywhere; a pooled connection found dead before
//!   writing is retried free; once bytes were (or may have been) written only idempotent methods
//!   or requests carrying the idempotency-key header are retried, and only with a replayable
//!   body; a 5xx only for the statuses in `retryOn`; never more than `attempts` tries; nothing
//!   the client caused.
//! - `planner` turns one try's outcome into the next step: retry after a jittered back-off
//!   (`backoff`) when the deadline can hold it and the budget (`budget`) allows, or answer, with
//!   the endpoint's own last answer when a retry cannot do better.

use std::collections::HashSet;

use http::{HeaderName, Method};
use rollcall_api::policy::{Retries, RetryOn};

use crate::outcome::Outcome;

pub mod backoff;
pub mod budget;
pub mod planner;

pub use budget::RetryBudget;
pub use planner::{Answer, Clock, LocalAnswer, Next, Plan, RetryReason, TryReport, TryWindow};

/// What the request loop knows about the request when a try failed.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts {
    pub idempotent: bool,
    pub body_replayable: bool,
    /// Tries made so far, this one included.
    pub tries: u32,
}

/// The retry rules of one pool, parsed once per config.
#[derive(Clone, Debug)]
pub struct RetryRules {
    pub attempts: u32,
    on_connect_failure: bool,
    on_reset: bool,
    on_any_5xx: bool,
    statuses: HashSet<u16>,
    pub idempotency_key_header: Option<HeaderName>,
}

/// A retry decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Retry,
    /// Retry on a fresh connection; does not count as a try (the request was never sent).
    RetryFree,
    Stop(StopReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The endpoint answered with something that is not a failure.
    Answered,
    /// The client broke or stalled its own request, or its deadline passed.
    ClientFault,
    AttemptsExhausted,
    NotRetryable,
    NotIdempotent,
    BodyNotReplayable,
}

// === impl RetryRules ===

impl RetryRules {
    pub fn from_policy(policy: &Retries) -> Self {
        let mut rules = Self {
            attempts: policy.attempts.max(1),
            on_connect_failure: false,
            on_reset: false,
            on_any_5xx: false,
            statuses: HashSet::new(),
            idempotency_key_header: policy
                .idempotency_key_header
                .as_deref()
                .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok()),
        };
        for cond in policy
            .retry_on
            .iter()
            .filter_map(|c| c.parse::<RetryOn>().ok())
        {
            match cond {
                RetryOn::ConnectFailure => rules.on_connect_failure = true,
                RetryOn::Reset => rules.on_reset = true,
                RetryOn::Any5xx => rules.on_any_5xx = true,
                RetryOn::Status(s) => {
                    rules.statuses.insert(s);
                }
            }
        }
        rules
    }

    /// Is this method idempotent (RFC 9110 §9.2.2), or does the request carry the key header?
    pub fn idempotent(&self, method: &Method, headers: &http::HeaderMap) -> bool {
        matches!(
            *method,
            Method::GET
                | Method::HEAD
                | Method::OPTIONS
                | Method::PUT
                | Method::DELETE
                | Method::TRACE
        ) || self
            .idempotency_key_header
            .as_ref()
            .is_some_and(|h| headers.contains_key(h))
    }

    /// Should a status be retried at all (before the method rules)?
    pub fn status_retryable(&self, status: u16) -> bool {
        (500..=599).contains(&status) && (self.on_any_5xx || self.statuses.contains(&status))
    }

    pub fn decide(&self, outcome: Outcome, facts: RequestFacts) -> Decision {
        let written_rule = match outcome {
            Outcome::DeadPooledConnection => return Decision::RetryFree,
            Outcome::ClientBodyFailed
            | Outcome::ClientBodyStalled
            | Outcome::DeadlineCut
            | Outcome::ClientLeft => {
                return Decision::Stop(StopReason::ClientFault);
            }
            Outcome::Answered(status) if status < 500 => {
                return Decision::Stop(StopReason::Answered);
            }
            _ if facts.tries >= self.attempts => {
                return Decision::Stop(StopReason::AttemptsExhausted);
            }
            Outcome::ConnectFailed => {
                return if self.on_connect_failure {
                    Decision::Retry
                } else {
                    Decision::Stop(StopReason::NotRetryable)
                };
            }
            Outcome::Reset
            | Outcome::ProtocolError
            | Outcome::TimedOut
            | Outcome::ClosedLocally => self.on_reset,
            Outcome::Answered(status) => self.status_retryable(status),
        };
        if !written_rule {
            Decision::Stop(StopReason::NotRetryable)
        } else if !facts.idempotent {
            Decision::Stop(StopReason::NotIdempotent)
        } else if !facts.body_replayable {
            Decision::Stop(StopReason::BodyNotReplayable)
        } else {
            Decision::Retry
        }
    }
}

#[cfg(test)]
mod tests;
