//! Rollcall's shared contract: the `BackendPool` policy (`policy`, one set of types for the
//! sidecar's roster file and the CRD), the roster gRPC protocol generated from
//! `proto/rollcall/v1/roster.proto` (`proto`), its domain types (`roster`), roster deltas and
//! multi-part states at both ends (`delta`), the one edge
//! where protobuf becomes domain types and inbound values are checked (`edge`), and the serving
//! certificate both servers swap in place when it is renewed (`tls`).
#![forbid(unsafe_code)]

pub mod delta;
pub mod edge;
#[doc(hidden)]
pub mod fuzzing;
pub mod policy;
pub mod proto;
pub mod roster;
pub mod tls;
