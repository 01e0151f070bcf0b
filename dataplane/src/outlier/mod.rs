//! Outlier detection from real traffic: consecutive-failure counters and the error-rate window.
//!
//! Everything here is pure (verdict in, `now` in, trip out) and knows nothing about endpoint
//! states: the health machine (`crate::health::machine`) owns one [`Detector`] per endpoint,
//! feeds it every request outcome, and decides what an ejection verdict means for the pool.

mod consecutive;
mod detector;
mod error_rate;

pub use consecutive::Consecutive;
pub use detector::{Detector, Limits, Trip};
pub use error_rate::{ErrorRateWindow, WindowCounts};
