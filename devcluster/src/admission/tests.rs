//! Crate-level tests: the project's BackendPool CRD end to end, and conformance of each
//! keyword's message with upstream.

mod backendpool;
mod backendpool_policy;
mod conformance;
mod conformance_shapes;
