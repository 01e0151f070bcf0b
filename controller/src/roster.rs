//! Rosters: what a pool routes to. `compute` is the pure function from a `BackendPool`, the
//! EndpointSlices of its Service and the Service itself to a roster (or the reason there is
//! none); `hub` holds the latest versioned roster of every pool for the gRPC server; `index`
//! maps each Service to its EndpointSlices as the watch delivers them; `slim` cuts each slice
//! down to what those read before it is cached.

pub mod compute;
pub mod hub;
pub mod index;
pub mod slim;

pub use compute::{Problem, SERVICE_NAME_LABEL, compute};
pub use hub::{Published, RosterHub};
pub use index::SliceIndex;
