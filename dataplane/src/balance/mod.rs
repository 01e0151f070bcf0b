//! Balancing: which eligible endpoint gets the next request.
//!
//! The health machine decides *whether* an endpoint may get traffic and hands over the eligible
//! ones with a weight factor; this module decides *which* of them gets each request. Three
//! pieces, split by lifetime:
//! - [`EndpointLoad`] (one per endpoint, lives as long as the endpoint): in-flight count, released
//!   by the [`InFlight`] guard on every path, peak-EWMA latency of successes and the recent
//!   error rate;
//! - [`ShareTracker`] (one per pool): recent picks per endpoint, so no endpoint takes more than
//!   a multiple of its fair share, and a failing one no more than its fair share;
//! - [`Selector`] (one per candidate set): built on every roster or health change and swapped
//!   in whole by the pool; `pick` is the hot path.
//!
//! How the proxy uses it, per try of a request:
//!
//! ```text
//! let selector = pool.selector.load();                 // ArcSwap<Selector>
//! let key = selector.hash_header().and_then(|h| headers.get(h)).map(|v| v.as_bytes());
//! let Some(endpoint) = selector.pick(key, &tried, now) else { return 503 };
//! tried.push(endpoint.addr);
//! let in_flight = endpoint.load.start();               // released when dropped
//! // ... send; then, for an answer or a failure that is the endpoint's:
//! in_flight.finish(verdict /* crate::outcome::Verdict */, latency, Instant::now());
//! ```

mod load;
mod ring;
mod round_robin;
mod selector;
mod share;
#[cfg(test)]
mod test_support;

pub use load::{EWMA_DECAY, EndpointLoad, InFlight};
pub use selector::{Candidate, Selector};
pub use share::{DEFAULT_SHARE_WINDOW, ShareTracker};
