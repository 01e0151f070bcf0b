//! The attempt planner: what one request does next. The request loop reports how a try ended
//! (what happened, when it started and ended, which endpoint) and the planner answers: retry on
//! another endpoint after this back-off, or answer with this response. Pure apart from spending
//! the (atomic) retry budget; time and jitter are passed in.
//!
//! The request's clocks ([`Clock`]), as Envoy runs them: `timeouts.request` and each try's
//! `perTryTimeout` start only once the whole request has been received (at once for a buffered
//! body, at the end of the upload for a streamed one), so a slow upload is never a timeout; a
//! client's `grpc-timeout` counts from its headers, because that is the client's whole budget.
//!
//! Decisions made here (docs/design.md, "Retries", gives the reasons; change them here, and in the
//! tests that pin them):
//! - A try's allowance is `min(perTryTimeout, timeouts.request)`. A try that used it all without
//!   an answer timed out and is charged; one that a deadline ended sooner (the client's, or what
//!   was left of ours) is not: the endpoint was never given its time.
//! - A retry is started only when the time left after its back-off holds a whole allowance, or at
//!   least as long as the failed try took (a fast failure leaves room for another fast try).
//! - A retry needs an endpoint this request has not tried; without one nothing is spent and the
//!   client gets the last real answer.
//! - "The last real answer": a 5xx that was retried is kept, and is what the client gets when
//!   no later try produces an answer of its own, in preference to a synthetic one.
//! - The budget is spent last, once a retry is otherwise certain.

use std::net::SocketAddr;
use std::time::Duration;

use smallvec::SmallVec;
use tokio::time::Instant;

use super::backoff;
use super::{Decision, RequestFacts, RetryBudget, RetryRules};
pub use crate::local_answer::LocalAnswer;
use crate::local_answer::LocalReason;
use crate::outcome::Outcome;

/// Retries on a fresh connection after a pooled one was found dead before writing.
const MAX_FREE_RETRIES: u32 = 3;

/// The request's clocks.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// `headers_at + grpc-timeout`, when the client sent one.
    client_deadline: Option<Instant>,
    request_timeout: Duration,
    per_try_timeout: Duration,
    /// When the whole request (its body included) had been received.
    complete_at: Option<Instant>,
}

/// The time limits of one try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TryWindow {
    /// When the try's allowance runs out; unknown while the request is still being received.
    pub allowance_ends: Option<Instant>,
    /// The request's deadline, when there is one yet.
    pub deadline: Option<Instant>,
}

/// How one try ended, as the request loop reports it.
#[derive(Clone, Copy, Debug)]
pub struct TryReport {
    pub endpoint: SocketAddr,
    pub outcome: Outcome,
    pub started: Instant,
    pub ended: Instant,
    /// The body can be sent again.
    pub body_replayable: bool,
    /// The endpoint said it did not process the request (a gRPC `UNAVAILABLE` with no
    /// message): retried like an idempotent request, whatever the method.
    pub unprocessed: bool,
}

/// What the planner needs from the pool for one decision.
pub struct Context<'a> {
    pub rules: &'a RetryRules,
    pub budget: &'a RetryBudget,
    /// The pool has an eligible endpoint this request has not tried.
    pub untried_left: bool,
    /// Uniform in `0..1`, for the back-off.
    pub jitter: f64,
}

/// What the request does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Retry {
        after: Duration,
        reason: RetryReason,
        /// This try's answer (a 5xx) is kept as the fallback answer.
        keep_answer: bool,
    },
    Answer(Answer),
}

/// The answer the client gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The answer of the try just reported.
    ThisTry,
    /// The answer an earlier try got and kept.
    Kept,
    /// One the sidecar makes itself.
    Local(LocalAnswer),
}

/// Why a try was retried: the `reason` label of `rollcall_retries_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryReason {
    ConnectFailure,
    DeadPooledConnection,
    Reset,
    Timeout,
    Status,
}

/// One request's plan: its clocks, what it tried, what it kept.
#[derive(Debug)]
pub struct Plan {
    pub clock: Clock,
    idempotent: bool,
    /// Tries that count against `attempts` (free retries do not).
    tries: u32,
    free_retries: u32,
    /// Budgeted retries so far (the back-off's exponent).
    retries: u32,
    /// Inline up to four: a request makes one to three tries, and the list was a heap
    /// allocation on every request's first try.
    tried: SmallVec<[SocketAddr; 4]>,
    kept: bool,
    last_failure: Option<LocalAnswer>,
}

// === impl Clock ===

impl Clock {
    pub fn new(
        headers_at: Instant,
        client_timeout: Option<Duration>,
        request_timeout: Duration,
        per_try_timeout: Duration,
    ) -> Self {
        Self {
            client_deadline: client_timeout
                .map(|t| saturating_add(headers_at, t.min(MAX_CLIENT_TIMEOUT))),
            request_timeout,
            per_try_timeout,
            complete_at: None,
        }
    }

    /// The whole request has been received (the first call counts).
    pub fn complete(&mut self, at: Instant) {
        self.complete_at.get_or_insert(at);
    }

    pub fn is_complete(&self) -> bool {
        self.complete_at.is_some()
    }

    /// The request's deadline: the client's, and ours once the request is complete.
    pub fn deadline(&self) -> Option<Instant> {
        let ours = self
            .complete_at
            .map(|at| saturating_add(at, self.request_timeout));
        match (self.client_deadline, ours) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What one try may take: `min(perTryTimeout, timeouts.request)`.
    pub fn allowance(&self) -> Duration {
        self.per_try_timeout.min(self.request_timeout)
    }

    /// The limits of a try that started at `started`.
    pub fn window(&self, started: Instant) -> TryWindow {
        TryWindow {
            allowance_ends: self
                .complete_at
                .map(|at| saturating_add(at.max(started), self.allowance())),
            deadline: self.deadline(),
        }
    }
}

// === impl TryWindow ===

impl TryWindow {
    /// When the try ends if nothing comes back, and whether that is its own allowance running
    /// out (`true`: it had its full time) or a deadline cutting it short.
    pub fn ends(&self) -> Option<(Instant, bool)> {
        match (self.allowance_ends, self.deadline) {
            (Some(a), Some(d)) if d < a => Some((d, false)),
            (Some(a), _) => Some((a, true)),
            (None, Some(d)) => Some((d, false)),
            (None, None) => None,
        }
    }
}

// === impl Plan ===

impl Plan {
    pub fn new(clock: Clock, idempotent: bool) -> Self {
        Self {
            clock,
            idempotent,
            tries: 0,
            free_retries: 0,
            retries: 0,
            tried: SmallVec::new(),
            kept: false,
            last_failure: None,
        }
    }

    /// Endpoints this request has tried (and must not be sent to again while others can serve).
    pub fn tried(&self) -> &[SocketAddr] {
        &self.tried
    }

    /// Whether no try was made yet.
    pub fn first_try(&self) -> bool {
        self.tries == 0 && self.free_retries == 0
    }

    /// Before a try: `Err` with the answer when the deadline has already passed.
    pub fn may_start(&self, now: Instant) -> Result<(), Answer> {
        match self.clock.deadline() {
            Some(deadline) if now >= deadline => Err(self.fallback(DEADLINE_EXCEEDED)),
            _ => Ok(()),
        }
    }

    /// No endpoint could be picked for the next try: the kept answer, else what the last
    /// failure said, else `answer` (why there was none).
    pub fn no_endpoint(&self, answer: LocalAnswer) -> Answer {
        self.fallback(self.last_failure.unwrap_or(answer))
    }

    /// One try ended: what next?
    pub fn after_try(&mut self, report: TryReport, cx: Context<'_>) -> Next {
        let outcome = report.outcome;
        if outcome != Outcome::DeadPooledConnection {
            self.tries += 1;
            self.tried.push(report.endpoint);
        }
        let facts = RequestFacts {
            idempotent: self.idempotent || report.unprocessed,
            body_replayable: report.body_replayable,
            tries: self.tries,
        };
        let stop = self.answer_for(outcome);
        match cx.rules.decide(outcome, facts) {
            Decision::Stop(_) => Next::Answer(stop),
            Decision::RetryFree => {
                self.free_retries += 1;
                if self.free_retries > MAX_FREE_RETRIES || self.may_start(report.ended).is_err() {
                    return Next::Answer(stop);
                }
                Next::Retry {
                    after: Duration::ZERO,
                    reason: RetryReason::DeadPooledConnection,
                    keep_answer: false,
                }
            }
            Decision::Retry => {
                let after = backoff::before_retry(self.retries + 1, cx.jitter);
                let took = report.ended.saturating_duration_since(report.started);
                if !cx.untried_left
                    || !self.fits(report.ended + after, took)
                    || !cx.budget.try_retry(report.ended)
                {
                    return Next::Answer(stop);
                }
                self.retries += 1;
                let keep_answer = outcome.answered().is_some();
                if keep_answer {
                    self.kept = true;
                } else if let Answer::Local(local) = stop {
                    self.last_failure = Some(local);
                }
                Next::Retry {
                    after,
                    reason: RetryReason::of(outcome),
                    keep_answer,
                }
            }
        }
    }

    /// A try that can never be repeated ended (an upgrade's handshake, once sent: its stream
    /// became the request's own): counted as a try, and the answer it leaves.
    pub fn last_try(&mut self, endpoint: SocketAddr, outcome: Outcome) -> Answer {
        self.tries += 1;
        self.tried.push(endpoint);
        self.answer_for(outcome)
    }

    /// Whether a retry starting at `start` can be given its time.
    fn fits(&self, start: Instant, took: Duration) -> bool {
        let Some(deadline) = self.clock.deadline() else {
            return true;
        };
        let left = deadline.saturating_duration_since(start);
        !left.is_zero() && (left >= self.clock.allowance() || left >= took)
    }

    /// The answer if this try is the last.
    fn answer_for(&self, outcome: Outcome) -> Answer {
        match outcome {
            Outcome::Answered(_) => Answer::ThisTry,
            // The client's own fault is the answer, whatever an earlier try got.
            Outcome::ClientBodyFailed | Outcome::ClientBodyStalled => {
                Answer::Local(local_for(outcome))
            }
            other => self.fallback(local_for(other)),
        }
    }

    /// The kept real answer if there is one, else `answer`.
    fn fallback(&self, answer: LocalAnswer) -> Answer {
        if self.kept {
            Answer::Kept
        } else {
            Answer::Local(answer)
        }
    }
}

const DEADLINE_EXCEEDED: LocalAnswer = LocalAnswer {
    status: 504,
    reason: LocalReason::DeadlineExceeded,
};

/// What the sidecar answers for a try that got no answer of its own.
pub fn local_for(outcome: Outcome) -> LocalAnswer {
    let (status, reason) = match outcome {
        Outcome::ConnectFailed => (503, LocalReason::UpstreamConnectFailure),
        Outcome::ProtocolError => (502, LocalReason::UpstreamProtocolError),
        Outcome::TimedOut => (504, LocalReason::UpstreamTimeout),
        Outcome::DeadlineCut => return DEADLINE_EXCEEDED,
        Outcome::ClientBodyFailed => (400, LocalReason::ClientBodyError),
        Outcome::ClientBodyStalled => (408, LocalReason::ClientBodyTimeout),
        Outcome::Reset
        | Outcome::ClosedLocally
        | Outcome::ClientLeft
        | Outcome::DeadPooledConnection
        | Outcome::Answered(_) => (502, LocalReason::UpstreamReset),
    };
    LocalAnswer { status, reason }
}

// === impl RetryReason ===

impl RetryReason {
    fn of(outcome: Outcome) -> Self {
        match outcome {
            Outcome::ConnectFailed => Self::ConnectFailure,
            Outcome::DeadPooledConnection => Self::DeadPooledConnection,
            Outcome::TimedOut => Self::Timeout,
            Outcome::Answered(_) => Self::Status,
            _ => Self::Reset,
        }
    }

    /// One of `RETRY_REASONS`.
    pub fn label(self) -> &'static str {
        match self {
            Self::ConnectFailure => "connect_failure",
            Self::DeadPooledConnection => "dead_pooled_connection",
            Self::Reset => "reset",
            Self::Timeout => "timeout",
            Self::Status => "status",
        }
    }
}

/// Longest client deadline honoured (a `grpc-timeout` may say 99999999H).
const MAX_CLIENT_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// `at + d`. Policy durations are bounded when they are read and client ones here, so this
/// cannot overflow; if it ever did, the deadline would be "now", which fails fast, not open.
fn saturating_add(at: Instant, d: Duration) -> Instant {
    at.checked_add(d).unwrap_or(at)
}

#[cfg(test)]
mod tests;
