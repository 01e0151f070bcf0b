//! The HTTP/1.1 wire format for the sidecar's own forwarding path (`--http1-engine fast`):
//! message heads parsed by `httparse` straight from a connection's read buffer (`head`), body
//! framing per RFC 9112 as a state machine over byte slices (`body`), the head an endpoint is
//! sent, rewritten as a forwarding proxy must (`rewrite`), the head a client is sent for an
//! endpoint's answer (`respond`), and a chunked body's framing on the way out (`encode`). Bodies
//! are read (`read`) and written (`write`) by polling a connection the caller owns, so one task
//! can drive both directions; no allocation per ordinary message: the connections own the
//! buffers.
//!
//! Every decision mirrors hyper's HTTP/1 (the other engine), so the two refuse the same
//! messages with the same status and frame the same bodies; `differential_tests` holds them
//! side by side over one corpus, and the `h1_wire` fuzz target compares them on arbitrary bytes.

pub mod body;
pub mod encode;
pub mod fuzzing;
pub mod head;
pub mod read;
pub mod respond;
pub mod rewrite;
pub mod write;

#[cfg(test)]
mod body_tests;
#[cfg(test)]
mod differential_tests;
#[cfg(test)]
mod encode_tests;
#[cfg(test)]
mod head_tests;
#[cfg(test)]
mod respond_tests;
#[cfg(test)]
mod rewrite_tests;
#[cfg(test)]
mod write_tests;
