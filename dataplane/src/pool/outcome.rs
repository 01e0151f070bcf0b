//! How one try went (`AttemptOutcome`), as the metrics, the balancer and the health machine
//! each need to see it, and why no endpoint could be picked (`NoEndpoint`).

use crate::outlier::Outcome;

/// Why no endpoint could be picked.
#[derive(Debug)]
pub struct NoEndpoint {
    pub reason: &'static str,
    pub message: String,
}

/// How one try went, as the metrics and the health machine see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    Success,
    ClientError,
    ServerError,
    GatewayStatus,
    ConnectFailure,
    Reset,
    Timeout,
    ProtocolError,
}

impl AttemptOutcome {
    /// An answer, classified the way the health machine classifies it.
    pub fn from_status(status: u16) -> Self {
        match Outcome::from_status(status) {
            Outcome::GatewayError => Self::GatewayStatus,
            Outcome::ServerError => Self::ServerError,
            Outcome::ClientError => Self::ClientError,
            Outcome::Success => Self::Success,
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::ClientError => "client_error",
            Self::ServerError => "server_error",
            Self::GatewayStatus | Self::Reset | Self::ProtocolError => "gateway_error",
            Self::ConnectFailure => "connect_failure",
            Self::Timeout => "timeout",
        }
    }

    /// The `outcome` label of the request when this try was its last.
    pub fn request_label(self) -> &'static str {
        match self {
            Self::ConnectFailure | Self::Reset | Self::ProtocolError => "gateway_error",
            other => other.label(),
        }
    }

    pub(super) fn health(self) -> Outcome {
        match self {
            Self::Success => Outcome::Success,
            Self::ClientError => Outcome::ClientError,
            Self::ServerError => Outcome::ServerError,
            _ => Outcome::GatewayError,
        }
    }
}
