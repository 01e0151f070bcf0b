//! Endpoint health: the pure state machine (`machine`) and the active probes that feed it
//! (`probe`, the only I/O here).

pub mod machine;
pub mod probe;
