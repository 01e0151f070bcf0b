//! Draining, as pure timers and a thin closer.
//!
//! - `endpoints`: endpoints that left the roster get no new requests; each is done when nothing
//!   is in flight on it or at `draining.timeout`, whichever comes first. The pool's owner asks
//!   [`EndpointDrains::finished`] on every tick and closes what it returns.
//! - `shutdown`: the sidecar's own exit on SIGTERM, as a Kubernetes pod should: not ready at
//!   once, keep serving for the pre-stop window (endpoint removal takes time to reach every
//!   client), then stop accepting and give what is in flight the grace period.
//! - [`close`] and [`begin`] are the closer: the only two things draining does to connections.

mod endpoints;
mod shutdown;

pub use endpoints::{Drained, EndpointDrains};
pub use shutdown::{Phase, ShutdownPlan};

use crate::upstream::Upstream;

/// An endpoint starts draining: its idle connections close now, busy ones after their response.
pub fn begin(upstream: &Upstream) {
    upstream.drain();
}

/// A drain is over (or its time is): close every connection of the endpoint.
pub fn close(upstream: &Upstream) {
    upstream.close();
}
