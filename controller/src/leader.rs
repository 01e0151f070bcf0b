//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager): only the leader
//! reconciles, writes status and serves rosters; a standby keeps its gRPC port open but is not
//! ready, so the Service sends sidecars to the leader, and sidecars ride out a switch on their
//! last roster. Losing the lease ends the leader's run, and the process exits so it restarts
//! as a clean standby rather than carrying state from its time as leader.

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;

use crate::{Error, Result};

/// Where the Lease lives and who we are.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// Unique per replica; the pod name.
    pub identity: String,
    /// Seconds a lease is valid after its last renewal.
    pub duration: u64,
    /// Seconds before expiry at which the holder renews.
    pub grace: u64,
}

/// Leadership as it changes: `true` while this replica holds the Lease. Dropping the receiver
/// releases the Lease.
pub struct Leadership {
    pub is_leader: watch::Receiver<bool>,
    pub task: tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// Start competing for the Lease.
pub async fn elect(client: Client, s: &LeaseSettings) -> Result<Leadership> {
    let manager = LeaseManagerBuilder::new(client, &s.name)
        .with_namespace(&s.namespace)
        .with_identity(&s.identity)
        .with_duration(s.duration)
        .with_grace(s.grace)
        .with_field_manager(crate::reconcile::FIELD_MANAGER)
        .build()
        .await
        .map_err(Error::Lease)?;
    let (is_leader, task) = manager.watch().await;
    Ok(Leadership { is_leader, task })
}

impl Leadership {
    /// Resolves once this replica leads.
    pub async fn acquired(&mut self) -> bool {
        self.is_leader.wait_for(|leads| *leads).await.is_ok()
    }

    /// Resolves when leadership is lost (or the election task died).
    pub async fn lost(mut self) {
        let _ = self.is_leader.wait_for(|leads| !*leads).await;
    }
}
