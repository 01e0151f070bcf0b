//! One try's record, from the moment its endpoint is picked to the end of its answer. It owns
//! what a try holds and owes: the endpoint's in-flight count (`balance::InFlight`), its count in
//! `rollcall_attempts_total`, and its verdict for the health machine and the balancer. All three
//! are settled in one place (`settle`, reached through [`TryRecord::finish`] and its named
//! endings, or from `Drop`), once, with the try's final outcome, however the try ends:
//! - its outcome stands as the head (or the failure) gave it: it is retried, answered by the
//!   sidecar, declined an upgrade, or its answer has no body;
//! - its answer's body ends (for a gRPC call whose status is in the trailers, judged by them);
//! - its answer's body breaks off or stalls (`Outcome::Reset`, or not the endpoint's doing when
//!   the client's own body broke first);
//! - the client goes away (the record is dropped unfinished): the head's outcome stands if there
//!   was one to judge, otherwise nothing is held against the endpoint (`Outcome::ClientLeft`).
//!
//! So an answer whose body breaks after a good head is one failure, not a success and then a
//! failure. The latency the balancer learns is the time to the answer's head (or to the
//! failure), never the time a body or a tunnel stayed open.

use std::sync::Arc;

use tokio::time::Instant;

use crate::balance::InFlight;
use crate::grpc_status::{Code, http_equivalent};
use crate::outcome::Outcome;
use crate::poll_clock;
use crate::pool::{Endpoint, Pool};

/// One try in flight on one endpoint; see the module header.
pub(super) struct TryRecord {
    pool: Arc<Pool>,
    endpoint: Arc<Endpoint>,
    /// `Some` until the record is finished.
    in_flight: Option<InFlight>,
    started: Instant,
    /// What the try's wait ended with, and when: the head's status or the failure.
    head: Option<(Outcome, Instant)>,
    /// The head was a gRPC answer whose status comes in the trailers.
    status_in_trailers: bool,
}

impl TryRecord {
    /// A try on `endpoint` sent `now`: counted in flight, and watched for a stall until
    /// [`TryRecord::answered`].
    pub(super) fn start(pool: &Arc<Pool>, endpoint: Arc<Endpoint>, now: Instant) -> Self {
        let in_flight = endpoint.start_try(now);
        Self {
            pool: Arc::clone(pool),
            endpoint,
            in_flight: Some(in_flight),
            started: now,
            head: None,
            status_in_trailers: false,
        }
    }

    /// The head was a gRPC answer judged by the trailers still to come.
    pub(super) fn status_in_trailers(&self) -> bool {
        self.status_in_trailers
    }

    /// The try's wait is over at `at`: its answer's head came (`Outcome::Answered`), or it
    /// failed. `status_in_trailers`: a gRPC answer that is judged by its trailers.
    pub(super) fn answered(&mut self, outcome: Outcome, at: Instant, status_in_trailers: bool) {
        if let Some(in_flight) = self.in_flight.as_mut() {
            in_flight.answered(outcome.heard_from(), at);
        }
        self.head = Some((outcome, at));
        self.status_in_trailers = status_in_trailers;
    }

    /// The outcome as it stands now: the head's, unless the trailers are still to judge it;
    /// `ClientLeft` before any head.
    fn standing(&self) -> Outcome {
        match self.head {
            Some((outcome, _)) if !self.status_in_trailers => outcome,
            _ => Outcome::ClientLeft,
        }
    }

    /// The try ends with the outcome it has ([`TryRecord::answered`]).
    pub(super) fn finish_as_it_stands(self, detail: &str) {
        let outcome = self.standing();
        self.finish(outcome, detail, poll_clock::now());
    }

    /// The answer's body ended at `at`; `grpc_status` is the trailer's, for an answer judged by
    /// its trailers (none there is an error by the gRPC spec, `UNKNOWN`).
    pub(super) fn body_ended(self, grpc_status: Option<Code>, at: Instant) {
        if !self.status_in_trailers {
            let outcome = self.standing();
            return self.finish(outcome, "", at);
        }
        let outcome = Outcome::Answered(http_equivalent(grpc_status.unwrap_or(Code::Unknown)));
        // A success needs no words (and no allocation per call).
        let detail = match grpc_status {
            None => "the gRPC answer ended without a grpc-status".to_owned(),
            Some(code) if outcome.verdict().is_failure() => format!("grpc-status {}", code as i32),
            Some(_) => String::new(),
        };
        self.finish(outcome, &detail, at);
    }

    /// The answer's body broke off or stalled at `at`: the endpoint's failure, unless
    /// `client_fault` (the client's own body broke first: an endpoint that echoes a stream stops
    /// when its input does).
    pub(super) fn body_broke(self, client_fault: bool, detail: &str, at: Instant) {
        let outcome = if client_fault {
            Outcome::ClientBodyFailed
        } else {
            Outcome::Reset
        };
        self.finish(outcome, detail, at);
    }

    /// The one place a try is settled: counted by outcome, its verdict sent to the health
    /// machine, and the balancer told how it went (with the latency to its head) as its
    /// in-flight count is released.
    pub(super) fn finish(mut self, outcome: Outcome, detail: &str, at: Instant) {
        self.settle(outcome, detail, at);
    }

    fn settle(&mut self, outcome: Outcome, detail: &str, at: Instant) {
        let Some(in_flight) = self.in_flight.take() else {
            return;
        };
        let head_at = self.head.map_or(at, |(_, head_at)| head_at);
        self.endpoint.count_attempt(outcome);
        let verdict = outcome.verdict();
        self.pool
            .record_verdict(self.endpoint.addr(), verdict, detail);
        in_flight.finish(verdict, head_at.saturating_duration_since(self.started), at);
    }
}

impl Drop for TryRecord {
    /// Dropped unfinished: the client left (hyper dropped the request's future or its answer's
    /// body), so the try ends with what it has.
    fn drop(&mut self) {
        if self.in_flight.is_some() {
            let outcome = self.standing();
            self.settle(outcome, "", poll_clock::now());
        }
    }
}

#[cfg(test)]
mod tests;
