//! The data path: the per-pool listener (`server`), one request's journey as a thin driver over
//! the attempt planner (`forward`), one try on one endpoint (`attempt`), the client's request
//! body (`client_body`), the endpoint's response body (`response_body`), the upstream request's
//! form (`request`), header rules (`headers`) and the answers the sidecar makes itself
//! (`answer`). Connections to the endpoints live below, in `crate::upstream`.

pub mod answer;
mod attempt;
mod client_body;
pub mod forward;
mod grpc;
pub mod headers;
mod request;
mod response_body;
pub mod server;
pub mod upgrade;
