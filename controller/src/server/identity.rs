//! Who is calling, and what it may do. `identify` (a tonic interceptor) records the peer and
//! the identity the sidecar claims in its metadata (`rollcall-pod`, `rollcall-namespace`);
//! `auth` then verifies the caller's token, and a verified identity replaces the claim.
//!
//! What a verified caller may watch is `authz`'s to decide.

use std::net::SocketAddr;

use rollcall_api::roster::SidecarId;
use tonic::{Request, Status};

use super::auth::Identity;
use super::sessions::PodKey;

pub use rollcall_api::roster::{
    NAMESPACE_METADATA as NAMESPACE_HEADER, POD_METADATA as POD_HEADER,
};

/// The caller of one RPC, as far as the server can tell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub peer: Option<SocketAddr>,
    /// What the caller says it is.
    pub claimed: Option<SidecarId>,
    /// Who its token says it is, when authentication is on.
    pub verified: Option<Identity>,
}

impl Caller {
    /// The identity reports are attributed to: the verified pod (with the instance the
    /// sidecar names, so a restarted process is told apart), else the claim in metadata, else
    /// the claim in the message.
    pub fn attribute(&self, in_message: Option<SidecarId>) -> SidecarId {
        let instance = in_message
            .as_ref()
            .or(self.claimed.as_ref())
            .map(|s| s.instance.clone())
            .unwrap_or_default();
        if let Some(id) = &self.verified {
            return SidecarId {
                pod: id.pod.clone(),
                namespace: id.namespace.clone(),
                instance,
            };
        }
        self.claimed
            .clone()
            .or(in_message)
            .unwrap_or_else(|| SidecarId {
                pod: self.peer.map(|p| p.to_string()).unwrap_or_default(),
                ..Default::default()
            })
    }

    /// The pod whose sessions this call belongs to (verified, else claimed); `None` for an
    /// anonymous caller.
    pub fn pod(&self, in_message: Option<&SidecarId>) -> Option<PodKey> {
        if let Some(id) = &self.verified {
            return Some((id.namespace.clone(), id.pod.clone()));
        }
        self.claimed
            .as_ref()
            .or(in_message)
            .filter(|s| !s.pod.is_empty())
            .map(|s| (s.namespace.clone(), s.pod.clone()))
    }
}

/// The tonic interceptor: attaches a `Caller` to every request.
pub fn identify(mut req: Request<()>) -> Result<Request<()>, Status> {
    let header = |name: &str| {
        req.metadata()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let claimed = match (header(POD_HEADER), header(NAMESPACE_HEADER)) {
        (Some(pod), Some(namespace)) => Some(SidecarId {
            pod,
            namespace,
            instance: String::new(),
        }),
        _ => None,
    };
    let caller = Caller {
        peer: req.remote_addr(),
        claimed,
        verified: None,
    };
    req.extensions_mut().insert(caller);
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claimed_identity_comes_from_metadata() {
        let mut req = Request::new(());
        req.metadata_mut()
            .insert(POD_HEADER, "front-1".parse().unwrap());
        req.metadata_mut()
            .insert(NAMESPACE_HEADER, "shop".parse().unwrap());
        let req = identify(req).unwrap();
        let caller = req.extensions().get::<Caller>().unwrap();
        assert_eq!(caller.claimed.as_ref().unwrap().pod, "front-1");
        assert!(caller.verified.is_none());
        assert_eq!(caller.attribute(None).namespace, "shop");
    }

    #[test]
    fn anonymous_caller_is_attributed_to_its_message_claim() {
        let req = identify(Request::new(())).unwrap();
        let caller = req.extensions().get::<Caller>().unwrap().clone();
        let claim = SidecarId {
            namespace: "shop".into(),
            pod: "p".into(),
            instance: "i".into(),
        };
        assert_eq!(caller.attribute(Some(claim.clone())), claim);
    }

    #[test]
    fn a_verified_caller_is_its_pod_whatever_it_claims() {
        let caller = Caller {
            claimed: Some(SidecarId {
                pod: "someone-else".into(),
                namespace: "kube-system".into(),
                instance: "i-1".into(),
            }),
            verified: Some(Identity {
                namespace: "shop".into(),
                service_account: "front".into(),
                pod: "front-1".into(),
                pod_uid: "u".into(),
                node: None,
            }),
            ..Default::default()
        };
        let id = caller.attribute(None);
        assert_eq!(
            (id.namespace.as_str(), id.pod.as_str(), id.instance.as_str()),
            ("shop", "front-1", "i-1")
        );
        assert_eq!(caller.pod(None), Some(("shop".into(), "front-1".into())));
    }
}
