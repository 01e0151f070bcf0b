//! The answers the sidecar makes itself: why ([`LocalReason`]) and with what status
//! ([`LocalAnswer`]). One enum, from which the `x-rollcall-reason` header, the answer's sentence,
//! the `outcome` label of `rollcall_requests_total` and (in `grpc_status`) the gRPC code derive,
//! so a new reason cannot be half added; and the rate limit on their log line (`log`). Below
//! `pool`, `retry` and `proxy`, which all name them.

mod log;

pub use log::LocalAnswerLog;

/// Why the sidecar answered a request itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalReason {
    /// The pool has no endpoints.
    NoEndpoints,
    /// None is eligible and the pool is not in panic.
    NoHealthyEndpoints,
    /// A retry found no endpoint left to try, and the earlier tries left nothing to answer with.
    EndpointsExhausted,
    UpstreamConnectFailure,
    /// The endpoint closed or reset mid-request.
    UpstreamReset,
    /// The endpoint did not answer in HTTP.
    UpstreamProtocolError,
    /// The per-try timeout passed.
    UpstreamTimeout,
    /// The request's overall deadline passed.
    DeadlineExceeded,
    /// The client's request body broke (charged to no endpoint).
    ClientBodyError,
    /// The client's request body stopped arriving (charged to no endpoint).
    ClientBodyTimeout,
    /// The request itself cannot be forwarded.
    BadRequest,
    /// An upgrade to a protocol the sidecar does not carry.
    UnsupportedProtocol,
}

impl LocalReason {
    /// Every reason, for tests and documentation checks.
    pub const ALL: [Self; 12] = [
        Self::NoEndpoints,
        Self::NoHealthyEndpoints,
        Self::EndpointsExhausted,
        Self::UpstreamConnectFailure,
        Self::UpstreamReset,
        Self::UpstreamProtocolError,
        Self::UpstreamTimeout,
        Self::DeadlineExceeded,
        Self::ClientBodyError,
        Self::ClientBodyTimeout,
        Self::BadRequest,
        Self::UnsupportedProtocol,
    ];

    /// The `x-rollcall-reason` value (and the access log's `reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoEndpoints => "no-endpoints",
            Self::NoHealthyEndpoints => "no-healthy-endpoints",
            Self::EndpointsExhausted => "endpoints-exhausted",
            Self::UpstreamConnectFailure => "upstream-connect-failure",
            Self::UpstreamReset => "upstream-reset",
            Self::UpstreamProtocolError => "upstream-protocol-error",
            Self::UpstreamTimeout => "upstream-timeout",
            Self::DeadlineExceeded => "deadline-exceeded",
            Self::ClientBodyError => "client-body-error",
            Self::ClientBodyTimeout => "client-body-timeout",
            Self::BadRequest => "bad-request",
            Self::UnsupportedProtocol => "unsupported-protocol",
        }
    }

    /// What happened, in words, for the answer's body; empty where the detail says it all
    /// (the pool's own message names the pool and its endpoints).
    pub fn sentence(self) -> &'static str {
        match self {
            Self::UpstreamConnectFailure => "could not connect to an endpoint",
            Self::UpstreamReset => "the endpoint failed mid-request",
            Self::UpstreamProtocolError => "the endpoint did not answer in HTTP",
            Self::UpstreamTimeout => "the endpoint did not answer in time",
            Self::DeadlineExceeded => "the request deadline passed before an endpoint answered",
            Self::ClientBodyError => "reading the request body failed",
            Self::ClientBodyTimeout => "the request body stopped arriving",
            Self::NoEndpoints
            | Self::NoHealthyEndpoints
            | Self::EndpointsExhausted
            | Self::BadRequest
            | Self::UnsupportedProtocol => "",
        }
    }
}

/// An answer the sidecar makes: a status and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalAnswer {
    pub status: u16,
    pub reason: LocalReason,
}

impl LocalAnswer {
    /// The `outcome` label of `rollcall_requests_total` when this is the answer.
    pub fn request_label(self) -> &'static str {
        match (self.status, self.reason) {
            (400..=499, _) => "client_error",
            (504, _) => "timeout",
            (503, LocalReason::NoEndpoints | LocalReason::NoHealthyEndpoints) => "no_endpoint",
            _ => "gateway_error",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_reason_has_its_own_header_value_in_kebab_case() {
        let values: HashSet<&str> = LocalReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(values.len(), LocalReason::ALL.len());
        for value in values {
            assert!(
                value.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{value}"
            );
        }
    }

    #[test]
    fn every_reason_is_in_the_sidecar_reference() {
        let doc = include_str!("../../docs/sidecar.md");
        for reason in LocalReason::ALL {
            let value = reason.as_str();
            assert!(
                doc.contains(&format!("`{value}`")),
                "docs/sidecar.md's table of the sidecar's own answers lacks `{value}`"
            );
        }
    }

    #[test]
    fn the_request_label_follows_status_then_reason() {
        let label = |status, reason| LocalAnswer { status, reason }.request_label();
        assert_eq!(label(503, LocalReason::NoEndpoints), "no_endpoint");
        assert_eq!(label(503, LocalReason::NoHealthyEndpoints), "no_endpoint");
        assert_eq!(label(503, LocalReason::EndpointsExhausted), "gateway_error");
        assert_eq!(
            label(503, LocalReason::UpstreamConnectFailure),
            "gateway_error"
        );
        assert_eq!(label(504, LocalReason::DeadlineExceeded), "timeout");
        assert_eq!(label(408, LocalReason::ClientBodyTimeout), "client_error");
        assert_eq!(label(502, LocalReason::UpstreamReset), "gateway_error");
    }
}
