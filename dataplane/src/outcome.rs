//! How one try of a request ended ([`Outcome`]), and what that says about the endpoint
//! ([`Verdict`]). One vocabulary for everyone who looks at a try: the retry planner decides on
//! the outcome, the metrics count it, the balancer and the health machine weigh its verdict.
//!
//! The rule that matters most lives here, in [`Outcome::verdict`]: only the endpoint's own faults
//! count against it. A 4xx is the client's problem; a client whose body broke or stalled, a
//! client that left, a deadline the client chose (or what was left of ours after earlier tries),
//! and connections we closed ourselves (drain deadline, shutdown) say nothing about the endpoint.

use std::fmt;

/// How one try ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The endpoint answered with this status (its headers arrived).
    Answered(u16),
    /// No connection could be made: refused, connect timeout, failed handshake. The endpoint
    /// never saw the request.
    ConnectFailed,
    /// A pooled connection was found dead before the request was written: nothing reached the
    /// endpoint and the request came back whole.
    DeadPooledConnection,
    /// The connection failed after the request was (or may have been) written, or the response
    /// body broke off or stalled past its idle timeout.
    Reset,
    /// The endpoint answered with something that is not HTTP.
    ProtocolError,
    /// No answer within the try's whole allowance (`perTryTimeout`, or `timeouts.request` when
    /// that is shorter): the endpoint had its full time.
    TimedOut,
    /// A deadline ended the try before its allowance was up: the client's `grpc-timeout`, or
    /// what was left of the request's deadline after earlier tries.
    DeadlineCut,
    /// The client's request body failed (malformed framing, the client reset).
    ClientBodyFailed,
    /// The client's request body stalled past its idle timeout.
    ClientBodyStalled,
    /// We closed the connection (drain deadline, shutdown); the request may have been processed.
    ClosedLocally,
    /// The client went away before the try ended (hyper dropped its request, or the answer's
    /// body before it ended), and what the endpoint would have said is unknown.
    ClientLeft,
}

/// What an outcome says about the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// 1xx–3xx: the endpoint did its job.
    Success,
    /// 4xx: the client's problem; never counts for or against an endpoint.
    ClientError,
    /// A 5xx other than 502/503/504: the application's own failure.
    ServerError,
    /// A 502, 503 or 504 answer: the endpoint (or a proxy in front of it) said it could not
    /// serve. Judged against the peers, since an overloaded pool answers so everywhere.
    GatewayError,
    /// Connection-level, seen by the sidecar itself rather than answered: connect refused or
    /// timed out, a reset, a reply that is not HTTP, silence for the try's whole allowance.
    /// Counts as a gateway error too, but its streak is judged on its own (absolutely).
    ConnectionFailure,
    /// Not the endpoint's doing at all: nothing is recorded.
    NotTheEndpoint,
}

// === impl Outcome ===

impl Outcome {
    pub fn verdict(self) -> Verdict {
        match self {
            Self::Answered(status) => Verdict::from_status(status),
            Self::ConnectFailed | Self::Reset | Self::ProtocolError | Self::TimedOut => {
                Verdict::ConnectionFailure
            }
            Self::DeadPooledConnection
            | Self::DeadlineCut
            | Self::ClientBodyFailed
            | Self::ClientBodyStalled
            | Self::ClosedLocally
            | Self::ClientLeft => Verdict::NotTheEndpoint,
        }
    }

    /// Whether the endpoint was heard from at all, for the balancer's stall watch: `Some(true)`
    /// for any answer, a reset or a protocol error (something came back); `Some(false)` when
    /// it had its whole allowance and said nothing; `None` when the try says nothing either
    /// way (a failed connect may be a quick refusal or a dropped SYN; the other endings are
    /// not the endpoint's doing).
    pub fn heard_from(self) -> Option<bool> {
        match self {
            Self::Answered(_) | Self::Reset | Self::ProtocolError => Some(true),
            Self::TimedOut => Some(false),
            Self::ConnectFailed
            | Self::DeadPooledConnection
            | Self::DeadlineCut
            | Self::ClientBodyFailed
            | Self::ClientBodyStalled
            | Self::ClosedLocally
            | Self::ClientLeft => None,
        }
    }

    /// The `outcome` label of `rollcall_attempts_total` (one of `ATTEMPT_OUTCOMES`).
    pub fn attempt_label(self) -> &'static str {
        match self {
            Self::Answered(status) => match Verdict::from_status(status) {
                Verdict::Success => "success",
                Verdict::ClientError => "client_error",
                Verdict::ServerError => "server_error",
                _ => "gateway_error",
            },
            Self::ConnectFailed => "connect_failure",
            Self::Reset | Self::ProtocolError => "gateway_error",
            Self::TimedOut => "timeout",
            Self::DeadPooledConnection
            | Self::DeadlineCut
            | Self::ClientBodyFailed
            | Self::ClientBodyStalled
            | Self::ClosedLocally
            | Self::ClientLeft => "cancelled",
        }
    }

    /// The endpoint answered (whatever the status).
    pub fn answered(self) -> Option<u16> {
        match self {
            Self::Answered(status) => Some(status),
            _ => None,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Answered(status) => write!(f, "answered {status}"),
            Self::ConnectFailed => f.write_str("connect failed"),
            Self::DeadPooledConnection => f.write_str("pooled connection was dead"),
            Self::Reset => f.write_str("connection reset"),
            Self::ProtocolError => f.write_str("protocol error"),
            Self::TimedOut => f.write_str("timed out"),
            Self::DeadlineCut => f.write_str("cut by the deadline"),
            Self::ClientBodyFailed => f.write_str("client body failed"),
            Self::ClientBodyStalled => f.write_str("client body stalled"),
            Self::ClosedLocally => f.write_str("closed by the sidecar"),
            Self::ClientLeft => f.write_str("the client left"),
        }
    }
}

// === impl Verdict ===

impl Verdict {
    /// Classify an HTTP status an endpoint answered with.
    pub fn from_status(status: u16) -> Self {
        match status {
            502..=504 => Self::GatewayError,
            500..=599 => Self::ServerError,
            400..=499 => Self::ClientError,
            _ => Self::Success,
        }
    }

    /// Counts against the endpoint (a 5xx, a gateway error or a connection failure).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Self::ServerError | Self::GatewayError | Self::ConnectionFailure
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_endpoints_own_faults_count_against_it() {
        let cases = [
            (Outcome::Answered(200), Verdict::Success),
            (Outcome::Answered(404), Verdict::ClientError),
            (Outcome::Answered(500), Verdict::ServerError),
            (Outcome::Answered(503), Verdict::GatewayError),
            (Outcome::ConnectFailed, Verdict::ConnectionFailure),
            (Outcome::Reset, Verdict::ConnectionFailure),
            (Outcome::ProtocolError, Verdict::ConnectionFailure),
            (Outcome::TimedOut, Verdict::ConnectionFailure),
            (Outcome::DeadPooledConnection, Verdict::NotTheEndpoint),
            (Outcome::DeadlineCut, Verdict::NotTheEndpoint),
            (Outcome::ClientBodyFailed, Verdict::NotTheEndpoint),
            (Outcome::ClientBodyStalled, Verdict::NotTheEndpoint),
            (Outcome::ClosedLocally, Verdict::NotTheEndpoint),
            (Outcome::ClientLeft, Verdict::NotTheEndpoint),
        ];
        for (outcome, verdict) in cases {
            assert_eq!(outcome.verdict(), verdict, "{outcome}");
        }
    }

    #[test]
    fn attempt_labels_are_the_metric_vocabulary() {
        for outcome in [
            Outcome::Answered(200),
            Outcome::Answered(418),
            Outcome::Answered(500),
            Outcome::Answered(502),
            Outcome::ConnectFailed,
            Outcome::TimedOut,
            Outcome::ClientBodyFailed,
        ] {
            assert!(
                crate::metrics::ATTEMPT_OUTCOMES.contains(&outcome.attempt_label()),
                "{outcome}"
            );
        }
    }
}
