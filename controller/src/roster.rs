//! Rosters: what a pool routes to. `compute` is the pure function from a `BackendPool`, the
//! EndpointSlices of its Service and the Service itself to a roster (or the reason there is
//! none); `hub` holds the latest versioned roster of every pool for the gRPC server; `index` is
//! the slice cache: each Service's EndpointSlices as the watch delivers them, each kept in the
//! parsed form of `cached`.

pub mod cached;
pub mod compute;
pub mod hub;
pub mod index;

pub use cached::CachedSlice;
pub use compute::{Problem, SERVICE_NAME_LABEL, compute};
pub use hub::{Published, RosterHub};
pub use index::SliceIndex;
