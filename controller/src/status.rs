//! Pool status from sidecar reports. `store` keeps the latest report of every sidecar stream,
//! as per-pool running totals (`tally`); `aggregate` is the pure function from a roster and
//! those totals to a `BackendPoolStatus`; `coalesce` decides when a status may be written (at
//! most about once per pool per second, never when nothing changed), `pacer` bounds the writes
//! of every pool together; `events` picks the Kubernetes Events a written change deserves.

pub mod aggregate;
pub mod coalesce;
pub mod events;
pub mod pacer;
pub mod retry;
mod slot_states;
pub mod store;
pub mod tally;

pub use aggregate::{Aggregated, Input, Majority, Served, aggregate, invalid_spec, summarize};
pub use coalesce::{Coalescer, Decision};
pub use pacer::Pacer;
pub use store::{ReportStore, StreamId};
pub use tally::PoolTally;
