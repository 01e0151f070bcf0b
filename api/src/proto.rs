//! The generated protobuf and tonic code of `proto/rollcall/v1/roster.proto`. Nothing here is
//! hand-written; domain code converts at the edge (`crate::edge`) and never passes these types
//! around.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

/// Package `rollcall.v1`.
pub mod v1 {
    tonic::include_proto!("rollcall.v1");
}
