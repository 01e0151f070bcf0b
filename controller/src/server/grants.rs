//! A Watch stream keeps its cross-namespace grants only while RBAC still gives them. A pod may
//! watch its own namespace's pools for as long as it lives; a pool in another namespace was
//! allowed by a RoleBinding there, and that binding may be deleted while the stream is open.
//! Every `every` (jittered by a tenth, so a fleet's streams do not ask together) the stream
//! asks again through the `Authorizer` (whose cache keeps an allowed answer for the same time,
//! so a withdrawal ends the stream within twice `every`, two minutes by default). A stream
//! whose grant is gone ends with PERMISSION_DENIED; the sidecar reconnects and is told which
//! pools it may no longer watch. When RBAC cannot be asked, the stream keeps going: an API
//! server outage must not cut routing, and the question is asked again next round.

use std::sync::Arc;
use std::time::Duration;

use rollcall_api::roster::PoolRef;
use tonic::Status;

use super::auth::Identity;
use super::authz::Authorizer;
use super::transport::jittered;

/// The `streams_ended_total` reason.
pub const WITHDRAWN: &str = "access_withdrawn";

/// The pools of `allowed` that `who` holds by an RBAC grant (not by its own namespace).
pub fn granted(
    who: Option<&Identity>,
    allowed: &std::collections::BTreeSet<PoolRef>,
) -> Vec<PoolRef> {
    who.map_or_else(Vec::new, |who| {
        allowed
            .iter()
            .filter(|pool| pool.namespace != who.namespace)
            .cloned()
            .collect()
    })
}

/// Resolves, with the status to end the stream with, once RBAC no longer lets `who` watch one
/// of `pools`; never when `pools` is empty or nobody is verified.
pub async fn withdrawn(
    authz: Arc<Authorizer>,
    who: Option<Identity>,
    pools: Vec<PoolRef>,
    every: Duration,
) -> Status {
    let Some(who) = who.filter(|_| !pools.is_empty()) else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(jittered(every)).await;
        for pool in &pools {
            match authz.may_watch(Some(&who), pool).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(%pool, namespace = %who.namespace, service_account = %who.service_account,
                        "a grant to watch a pool was withdrawn; ending the stream");
                    return Status::permission_denied(format!(
                        "ServiceAccount {}/{} may no longer watch {pool}: the RBAC grant was withdrawn",
                        who.namespace, who.service_account
                    ));
                }
                Err(error) => {
                    tracing::debug!(%pool, %error, "cannot re-check a grant now; keeping the stream");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::auth::Mode;

    fn who(namespace: &str) -> Identity {
        Identity {
            namespace: namespace.into(),
            service_account: "client".into(),
            pod: "client-1".into(),
            pod_uid: "u".into(),
            node: None,
        }
    }

    #[test]
    fn only_pools_of_other_namespaces_are_held_by_a_grant() {
        let allowed = [PoolRef::new("front", "own"), PoolRef::new("shop", "web")]
            .into_iter()
            .collect();
        assert_eq!(
            granted(Some(&who("front")), &allowed),
            vec![PoolRef::new("shop", "web")]
        );
        assert!(
            granted(None, &allowed).is_empty(),
            "nobody verified: nothing to re-check"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_to_recheck_never_ends_the_stream() {
        let authz = Arc::new(Authorizer::new(&Mode::Insecure));
        let never = withdrawn(
            authz.clone(),
            Some(who("front")),
            Vec::new(),
            Duration::from_secs(1),
        );
        assert!(
            tokio::time::timeout(Duration::from_secs(3600), never)
                .await
                .is_err()
        );
        // Without RBAC (authentication off) every grant stands, however often it is asked.
        let insecure = withdrawn(
            authz,
            Some(who("front")),
            vec![PoolRef::new("shop", "web")],
            Duration::from_secs(1),
        );
        assert!(
            tokio::time::timeout(Duration::from_secs(3600), insecure)
                .await
                .is_err()
        );
    }
}
