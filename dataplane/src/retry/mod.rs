//! Whether a failed try may be sent again, and where the retry budget stands. Pure: the forwarder
//! describes what happened and this module answers, so every rule of DESIGN.md's retry list is a
//! unit test. In order: a client that left is never retried; a request that never reached a
//! connection may go anywhere; once bytes were (or may have been) written only idempotent methods
//! or requests carrying the idempotency-key header are retried, and only with a replayable body;
//! a 5xx is retried only for the statuses in `retryOn`; never more than `attempts` tries.

use std::collections::HashSet;

use http::{HeaderName, Method};
use rollcall_api::policy::{Retries, RetryOn};

pub mod budget;

/// What went wrong with one try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No connection could be made: the endpoint never saw the request.
    ConnectFailed,
    /// A pooled connection was found dead before the request was written.
    DeadPooledConnection,
    /// The connection failed after the request was (or may have been) written, or the try
    /// timed out waiting for an answer.
    Reset,
    /// The endpoint answered with this 5xx status.
    Status(u16),
}

/// What the forwarder knows about the request.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts {
    pub idempotent: bool,
    pub body_replayable: bool,
    pub client_gone: bool,
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
    ClientGone,
    AttemptsExhausted,
    NotRetryable,
    NotIdempotent,
    BodyNotReplayable,
}

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

    pub fn decide(&self, failure: Failure, facts: RequestFacts) -> Decision {
        if facts.client_gone {
            return Decision::Stop(StopReason::ClientGone);
        }
        if failure == Failure::DeadPooledConnection {
            return Decision::RetryFree;
        }
        if facts.tries >= self.attempts {
            return Decision::Stop(StopReason::AttemptsExhausted);
        }
        let written = match failure {
            Failure::ConnectFailed => {
                return if self.on_connect_failure {
                    Decision::Retry
                } else {
                    Decision::Stop(StopReason::NotRetryable)
                };
            }
            Failure::DeadPooledConnection => return Decision::RetryFree,
            Failure::Reset => self.on_reset,
            Failure::Status(s) => self.status_retryable(s),
        };
        if !written {
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
