//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager): only the leader
//! reconciles, writes status and serves rosters; a standby keeps its gRPC port open but is not
//! ready, so the Service sends sidecars to the leader, and sidecars ride out a switch on their
//! last roster. Losing the lease ends the leader's run, and the process exits so it restarts
//! as a clean standby rather than carrying state from its time as leader.
//!
//! kube-lease-manager keeps saying "leader" while its renewals fail, so `confirm` watches the
//! Lease on its own: once this replica cannot show a renewal that is still valid (the Lease
//! could have expired for the others, who may then take over), it gives up the lead.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
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

// === impl LeaseSettings ===

impl LeaseSettings {
    /// How long before the Lease expires a leader that could not renew steps down (and stops
    /// writing status): half the grace, at least a second. With the defaults (15 s, renewed
    /// with 10 s left, every 5 s) that is 5 s before expiry, 10 s after the last renewal:
    /// client-go's renew deadline of 10 s in a 15 s lease. The margin is what absorbs clock
    /// skew between the leader's node and a standby's.
    pub fn step_down_margin(&self) -> Duration {
        Duration::from_secs((self.grace / 2).max(1))
    }
}

/// Leadership as it changes: `true` while this replica holds the Lease. Dropping the receiver
/// releases the Lease.
pub struct Leadership {
    pub is_leader: watch::Receiver<bool>,
    pub task: tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// The field manager this replica writes its Lease claims with: its own, never shared.
/// kube-lease-manager claims a free Lease by server-side apply without `force`, so the claim
/// of a replica that lost the race must conflict with the winner's, which only happens when the
/// two are different managers. With one shared manager both claims succeeded and, seen once
/// in the end-to-end tests, both replicas started leading. Field managers are at most 128
/// characters.
pub fn lease_field_manager(identity: &str) -> String {
    let mut manager = format!("{}/{identity}", crate::reconcile::FIELD_MANAGER);
    if manager.len() > 128 {
        let mut cut = 128;
        while !manager.is_char_boundary(cut) {
            cut -= 1;
        }
        manager.truncate(cut);
    }
    manager
}

/// Start competing for the Lease.
pub async fn elect(client: Client, s: &LeaseSettings) -> Result<Leadership> {
    let manager = LeaseManagerBuilder::new(client, &s.name)
        .with_namespace(&s.namespace)
        .with_identity(&s.identity)
        .with_duration(s.duration)
        .with_grace(s.grace)
        .with_field_manager(lease_field_manager(&s.identity))
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
    pub async fn lost(&mut self) {
        let _ = self.is_leader.wait_for(|leads| !*leads).await;
    }

    /// Give the Lease up (so a standby takes over at once, not after it expires), waiting at
    /// most `within` for the API server.
    pub async fn release(self, within: Duration) {
        let Self { is_leader, task } = self;
        drop(is_leader);
        match tokio::time::timeout(within, task).await {
            Ok(Ok(Ok(_))) => tracing::info!("released the leader lease"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "could not release the leader lease"),
            Ok(Err(e)) => tracing::warn!(error = %e, "the lease task failed"),
            Err(_) => tracing::warn!("the leader lease was not released in time; it will expire"),
        }
    }
}

/// Resolves once the Lease has been released by its holder. kube-lease-manager's standby only
/// looks again when the holder's Lease would expire, so without this a leader's clean release
/// would not shorten the handover at all. (An expired Lease is kube-lease-manager's to take.)
pub async fn freed(client: Client, s: &LeaseSettings) {
    let leases: Api<Lease> = Api::namespaced(client, &s.namespace);
    let every = Duration::from_secs(1);
    let mut held = false;
    loop {
        tokio::time::sleep(every).await;
        let Ok(Ok(lease)) = tokio::time::timeout(every, leases.get(&s.name)).await else {
            continue;
        };
        let holder = lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        // Only a Lease seen held and then free was released; one never held is free already,
        // and the standby's own election takes it.
        if holder.is_empty() && held {
            return;
        }
        held = !holder.is_empty() && holder != s.identity;
    }
}

/// Until when (Unix seconds) `lease` is valid for `identity`; `None` when someone else holds it.
pub fn held_until(lease: &Lease, identity: &str) -> Option<i64> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref()?.0.as_second();
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    Some(renewed + duration)
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Watch the Lease while leading; resolves with the reason once this replica can no longer
/// show that it holds a valid Lease: another holder, or no renewal it can see that is still
/// valid (a partition or an API server refusing its renewals). `margin` is how long before
/// the Lease expires for the others it steps down.
pub async fn confirm(client: Client, s: &LeaseSettings, margin: Duration) -> String {
    let leases: Api<Lease> = Api::namespaced(client, &s.namespace);
    let every = Duration::from_secs((s.grace / 2).max(1));
    let mut valid_until = now_unix() + s.duration as i64;
    // Seconds until this replica must have seen a renewal (0: now).
    let left = |valid_until: i64| (valid_until - margin.as_secs() as i64 - now_unix()).max(0);
    loop {
        // Never wait past the deadline for an answer, nor sleep past it.
        let wait = every.min(Duration::from_secs(left(valid_until).max(1) as u64));
        match tokio::time::timeout(wait, leases.get(&s.name)).await {
            Ok(Ok(lease)) => match held_until(&lease, &s.identity) {
                Some(until) => valid_until = valid_until.max(until),
                None => return "another replica holds the leader lease".into(),
            },
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot read the leader lease"),
            Err(_) => tracing::warn!("reading the leader lease timed out"),
        }
        let remaining = left(valid_until);
        if remaining == 0 {
            return format!(
                "could not confirm a renewal of the leader lease {}s before it expires (valid until {valid_until})",
                margin.as_secs()
            );
        }
        tokio::time::sleep(every.min(Duration::from_secs(remaining as u64))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_replica_claims_the_lease_as_its_own_field_manager() {
        let a = lease_field_manager("rollcall-controller-7d9f-abcde");
        let b = lease_field_manager("rollcall-controller-7d9f-fghij");
        assert_ne!(a, b);
        assert_eq!(a, "rollcall-controller/rollcall-controller-7d9f-abcde");
        assert!(lease_field_manager(&"é".repeat(100)).len() <= 128);
    }

    #[test]
    fn a_leader_steps_down_half_its_grace_before_expiry() {
        let lease = |duration, grace| LeaseSettings {
            namespace: "rollcall-system".into(),
            name: "rollcall-controller".into(),
            identity: "a".into(),
            duration,
            grace,
        };
        // The chart's default: renewed with 10 s of 15 left, steps down with 5 s left.
        assert_eq!(lease(15, 10).step_down_margin(), Duration::from_secs(5));
        // The end-to-end tests' short lease, and a grace too small to halve.
        assert_eq!(lease(4, 2).step_down_margin(), Duration::from_secs(1));
        assert_eq!(lease(2, 1).step_down_margin(), Duration::from_secs(1));
    }
}
