//! Outlier detection from real traffic: consecutive-failure counters, the error-rate window, and
//! the judgements of whether an endpoint's streak (`streak.rs`) or error rate (`relative.rs`)
//! sets it apart from its peers.
//!
//! Everything here is pure (verdict in, `now` in, trip out) and knows nothing about endpoint
//! states: the health machine (`crate::health::machine`) owns one [`Detector`] per endpoint,
//! feeds it every request outcome, and decides what an ejection verdict means for the pool.

mod consecutive;
mod detector;
mod error_rate;
pub mod relative;
pub mod streak;

pub use consecutive::Consecutive;
pub use detector::{Detector, Limits, Trip};
pub use error_rate::{ErrorRateWindow, RecentOutcomes, WindowCounts};
