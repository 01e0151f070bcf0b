//! Who is calling: the seam where sidecar authentication will sit. Today the interceptor
//! records the peer address and the identity the sidecar claims in its metadata
//! (`rollcall-pod`, `rollcall-namespace`); `Caller::may_watch` allows every pool. When mTLS
//! arrives, this module derives the identity from the peer certificate and restricts pools,
//! and nothing else in the server changes.

use std::net::SocketAddr;

use rollcall_api::roster::{PoolRef, SidecarId};
use tonic::{Request, Status};

pub use rollcall_api::roster::{
    NAMESPACE_METADATA as NAMESPACE_HEADER, POD_METADATA as POD_HEADER,
};

/// The caller of one RPC, as far as the server can tell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub peer: Option<SocketAddr>,
    /// What the caller says it is; unverified until authentication exists.
    pub claimed: Option<SidecarId>,
    pub authenticated: bool,
}

impl Caller {
    /// Whether the caller may receive `pool`'s roster. Everyone may, until authentication.
    pub fn may_watch(&self, _pool: &PoolRef) -> bool {
        true
    }

    /// The identity reports are attributed to: the verified one when there is one, else the
    /// claim in metadata, else the claim in the message.
    pub fn attribute(&self, in_message: Option<SidecarId>) -> SidecarId {
        self.claimed
            .clone()
            .or(in_message)
            .unwrap_or_else(|| SidecarId {
                pod: self.peer.map(|p| p.to_string()).unwrap_or_default(),
                ..Default::default()
            })
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
        authenticated: false,
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
        assert!(!caller.authenticated);
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
}
