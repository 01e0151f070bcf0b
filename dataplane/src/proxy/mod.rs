//! The data path: the per-pool listener (`server`), one request's tries (`forward`), the
//! connections to each endpoint (`upstream`), response bodies (`body`) and header rules
//! (`headers`).

pub mod body;
pub mod forward;
pub mod headers;
mod request;
pub mod server;
pub mod upstream;
