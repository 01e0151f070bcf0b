//! A tunnel between a client and an endpoint once both agreed to switch protocols
//! (`super::upgrade`): it copies bytes both ways until either side closes, it moves no byte for
//! its idle limit (`super::tunnel_idle`), the endpoint's connections are closed, or the
//! listener's grace period ends; meanwhile it holds the endpoint's in-flight count, and it
//! writes a sampled upgrade's access log line when it closes.

use std::net::SocketAddr;
use std::time::Duration;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::logged::Arrival;
use super::tunnel_idle::Activity;
use crate::balance::InFlight;

/// A tunnel, once both sides agreed to switch: what it needs to run and to be accounted for.
pub(super) struct Tunnel {
    pub pool_name: String,
    pub addr: SocketAddr,
    pub tries: usize,
    pub answered_at: Instant,
    pub idle_limit: Duration,
    /// The listener's grace period is over.
    pub cut: CancellationToken,
    /// The endpoint's connections are being closed.
    pub closing: CancellationToken,
    /// The endpoint's in-flight count, held while the tunnel is open.
    pub open: InFlight,
    pub logged: Option<Box<Arrival>>,
}

impl Tunnel {
    /// Join the two upgraded streams and copy bytes both ways until either side closes, the
    /// tunnel moves no byte for its idle limit, the endpoint closes, or the grace period ends.
    pub async fn run(self, client_side: OnUpgrade, endpoint_side: OnUpgrade) {
        let Self {
            pool_name,
            addr,
            tries,
            answered_at,
            idle_limit,
            cut,
            closing,
            open,
            logged,
        } = self;
        let (client_io, endpoint_io) = match tokio::try_join!(client_side, endpoint_side) {
            Ok(both) => both,
            Err(error) => {
                tracing::debug!(pool = %pool_name, endpoint = %addr, %error, "upgrade did not complete");
                drop(open);
                if let Some(arrival) = logged {
                    arrival.tunnel_closed(addr, tries, answered_at, (0, 0));
                }
                return;
            }
        };
        let activity = Activity::new();
        let mut client_io = activity.track(TokioIo::new(client_io));
        let mut endpoint_io = activity.track(TokioIo::new(endpoint_io));
        tokio::select! {
            result = tokio::io::copy_bidirectional(&mut client_io, &mut endpoint_io) => {
                if let Err(error) = result {
                    tracing::debug!(pool = %pool_name, endpoint = %addr, %error, "tunnel ended with an error");
                }
            }
            () = cut.cancelled() => {
                tracing::info!(pool = %pool_name, endpoint = %addr, "grace period over: closing a tunnel");
            }
            () = closing.cancelled() => {
                tracing::info!(pool = %pool_name, endpoint = %addr, "endpoint closed: closing its tunnel");
            }
            () = activity.idle_for(idle_limit) => {
                tracing::debug!(pool = %pool_name, endpoint = %addr, limit = ?idle_limit, "tunnel idle: closing it");
            }
        }
        drop(open);
        if let Some(arrival) = logged {
            let bytes = (client_io.bytes_read(), endpoint_io.bytes_read());
            arrival.tunnel_closed(addr, tries, answered_at, bytes);
        }
    }
}
