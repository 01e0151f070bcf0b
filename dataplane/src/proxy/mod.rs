//! The data path: the per-pool listener (`server`), one request's journey as a thin driver over
//! the attempt planner (`forward`), one try on one endpoint (`attempt`) and its record, which
//! settles its in-flight count, metric and verdict once (`try_record`), the client's request
//! body (`client_body`), the answer a request gets (`reply`), the endpoint's response body
//! (`response_body`), the upstream request's form (`request`), header rules (`headers`), the
//! answers the sidecar makes itself (`answer`; their reasons and log line are
//! `crate::local_answer`), a sampled
//! request's access log line (`logged`), how a gRPC call's outcome is read and answered
//! (`grpc`) and protocol upgrades turned into tunnels (`upgrade`, then `tunnel`; WebSockets
//! over HTTP/2 translated by `websocket_h2`). Connections to the endpoints live below, in
//! `crate::upstream`.

pub mod answer;
mod attempt;
mod client_body;
pub(crate) mod fast;
pub mod forward;
pub(crate) mod grpc;
pub mod headers;
mod logged;
mod reply;
pub(crate) mod request;
mod response_body;
pub mod server;
mod try_record;
mod tunnel;
mod tunnel_idle;
pub mod upgrade;
mod websocket_h2;
