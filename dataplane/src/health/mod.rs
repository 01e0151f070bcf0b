//! Endpoint health: the pure state machine (`machine`) and the active probes that feed it.

pub mod machine;
