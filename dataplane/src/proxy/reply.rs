//! How one request is answered, once the planner has said which answer it gets: the answer of
//! the try just made, the 5xx an earlier try got and kept, or one the sidecar makes itself
//! (logged with the tries behind it). Every answer is counted in the request metrics here, and
//! says how it was reached (`Facts`) for the access log.

use std::net::SocketAddr;
use std::sync::Arc;

use http::Response;
use tokio::time::Instant;

use super::answer;
use super::client_body::Progress;
use super::logged::Facts;
use super::response_body::{Answered, TrackedBody};
use crate::local_answer::LocalReason;
use crate::outcome::Verdict;
use crate::pool::{Endpoint, Pool};
use crate::retry::{Answer, LocalAnswer};
use crate::upstream::{EndpointBody, ProxyBody, Release};

/// A 5xx kept while a retry tries to do better.
pub(super) struct Kept {
    pub response: Response<EndpointBody>,
    pub release: Release,
    pub endpoint: Arc<Endpoint>,
    /// When its headers arrived.
    pub answered_at: Instant,
}

/// What every answer of one request needs: where it is counted and in which form it goes.
pub(super) struct Reply<'a> {
    pub pool: &'a Arc<Pool>,
    pub received: Instant,
    pub client: &'a Arc<Progress>,
    /// A gRPC call: the sidecar's own answers are gRPC answers.
    pub grpc_call: bool,
}

impl Reply<'_> {
    /// Turn the planner's answer into the response, counted in the request metrics; an answer
    /// the sidecar makes itself is logged with the tries behind it. `this` is the try's answer
    /// and when its headers arrived; `tried` the endpoints tried, in order.
    pub(super) fn respond(
        &self,
        answer: Answer,
        this: Option<(Answered, Instant)>,
        kept: Option<Kept>,
        detail: &str,
        tried: &[SocketAddr],
    ) -> (Response<ProxyBody>, Facts) {
        let pool = self.pool;
        let real = match answer {
            Answer::ThisTry => this,
            Answer::Kept => kept.map(|k| {
                let answered = Answered {
                    response: k.response,
                    release: k.release,
                    record: None,
                    endpoint: k.endpoint,
                    client: Arc::clone(self.client),
                };
                (answered, k.answered_at)
            }),
            Answer::Local(local) => return self.local(local, detail, tried),
        };
        match real {
            Some((answered, answered_at)) => {
                let facts = Facts {
                    reason: None,
                    endpoint: Some(answered.endpoint.addr()),
                    tries: tried.len(),
                    first_byte: Some(answered_at),
                };
                let label = status_label(answered.response.status().as_u16());
                let response = pool.finish(
                    TrackedBody::wrap(answered, pool.tuning().response_body_idle),
                    label,
                    self.received,
                );
                (response, facts)
            }
            // The planner only names a real answer when there is one; never panic over it.
            None => {
                let fallback = LocalAnswer {
                    status: 502,
                    reason: LocalReason::UpstreamReset,
                };
                self.local(fallback, detail, tried)
            }
        }
    }

    /// An answer the sidecar makes itself, logged with the tries behind it.
    fn local(
        &self,
        local: LocalAnswer,
        detail: &str,
        tried: &[SocketAddr],
    ) -> (Response<ProxyBody>, Facts) {
        let pool = self.pool;
        pool.log_local_answer(local.status, local.reason, tried.len(), detail);
        let response = pool.finish(
            answer::local(local, detail, self.grpc_call),
            local.request_label(),
            self.received,
        );
        (response, Facts::local(local.reason, tried))
    }
}

pub(super) fn status_label(status: u16) -> &'static str {
    match Verdict::from_status(status) {
        Verdict::Success => "success",
        Verdict::ClientError => "client_error",
        Verdict::ServerError => "server_error",
        Verdict::GatewayError | Verdict::ConnectionFailure | Verdict::NotTheEndpoint => {
            "gateway_error"
        }
    }
}
