//! Balancing: which eligible endpoint gets the next request.
//!
//! The health machine decides *whether* an endpoint may get traffic and hands over the eligible
//! ones with a weight factor; this module decides *which* of them gets each request. Three
//! pieces, split by lifetime:
//! - [`EndpointLoad`] (one per endpoint, part of it, lives as long as it): in-flight count,
//!   released by the [`InFlight`] guard on every path, peak-EWMA latency of successes and the
//!   recent error rate;
//! - [`ShareTracker`] (one per pool): recent picks per endpoint, so no endpoint takes more than
//!   a multiple of its fair share, and a failing one no more than its fair share;
//! - [`Selector`] (one per candidate set): built on every roster or health change and swapped
//!   in whole by the pool; `pick` is the hot path. Generic over what it picks ([`Balanced`]:
//!   an address and a load), so a pool's selector hands back the pool's own endpoint.
//!
//! How the proxy uses it, per try of a request (`proxy::forward::answer_request`):
//! `pool::Routing::pick` asks the pool's current [`Selector::pick`] for an endpoint not yet
//! tried by this request; `InFlight::start_try` counts the try in flight and watches it for
//! a stall; `InFlight::answered` settles the wait when the headers come (or the try fails); and
//! `InFlight::finish` records the verdict and latency when the try ends, at the answer or, for
//! a streamed body, in `proxy::response_body` when the body ends or breaks. Dropping the guard
//! on any other path releases the in-flight count.

mod load;
mod ring;
mod round_robin;
mod selector;
mod share;
#[cfg(test)]
mod test_support;

pub use load::{EWMA_DECAY, EndpointLoad, HoldsLoad, InFlight};
pub use selector::{Balanced, Candidate, Selector};
pub use share::{DEFAULT_SHARE_WINDOW, PickWindow, ShareTracker};
