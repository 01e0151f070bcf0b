//! An EndpointSlice as rosters are computed from it, parsed once when the watch delivers it:
//! its name, address family, TCP ports and, per endpoint, the first address parsed, the
//! conditions resolved and the Pod and zone. The slice cache holds only this form. Holding the
//! objects instead cost about 420 bytes an endpoint (k8s-openapi's `Endpoint` is ~370 bytes
//! inline, set or not, plus its strings, each its own allocation), and every reconcile parsed
//! every address again, from objects scattered over the heap: 4-5 ms for a 10,000-endpoint
//! pool under a fleet, against under 1 ms when the same data was hot in cache.

use std::net::IpAddr;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;

/// One EndpointSlice, reduced to what `compute` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedSlice {
    pub name: String,
    /// `IPv4`, `IPv6` or `FQDN`, as the slice says.
    pub address_type: Box<str>,
    /// The slice's TCP ports in order: name ("" when unnamed) and number (`None` when unset,
    /// zero or out of range, so a name whose first TCP port is unusable has no port).
    pub ports: Box<[(Box<str>, Option<u16>)]>,
    /// Endpoints whose first address parses, in the slice's order.
    pub endpoints: Box<[CachedEndpoint]>,
}

/// One endpoint of a slice: 56 bytes, its strings the only allocations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedEndpoint {
    /// The first address: the API says a consumer may use it for all of them.
    pub ip: IpAddr,
    /// The conditions with the API's defaults applied: unset `ready` is ready, unset
    /// `serving` is `ready`, unset `terminating` is not terminating.
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// The Pod behind it (a `targetRef` of another kind names none).
    pub pod: Option<Box<str>>,
    pub zone: Option<Box<str>>,
}

impl CachedSlice {
    /// The port number of the slice's first TCP port named `name`.
    pub fn port(&self, name: &str) -> Option<u16> {
        self.ports
            .iter()
            .find(|(n, _)| &**n == name)
            .and_then(|(_, port)| *port)
    }
}

impl From<&EndpointSlice> for CachedSlice {
    fn from(slice: &EndpointSlice) -> Self {
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter(|p| matches!(p.protocol.as_deref(), None | Some("TCP")))
            .map(|p| {
                let number = p
                    .port
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n != 0);
                (p.name.as_deref().unwrap_or_default().into(), number)
            })
            .collect();
        let endpoints = slice
            .endpoints
            .iter()
            .flatten()
            .filter_map(|source| {
                let ip = source.addresses.first()?.parse::<IpAddr>().ok()?;
                let cond = source.conditions.as_ref();
                let ready = cond.and_then(|c| c.ready).unwrap_or(true);
                Some(CachedEndpoint {
                    ip,
                    ready,
                    serving: cond.and_then(|c| c.serving).unwrap_or(ready),
                    terminating: cond.and_then(|c| c.terminating).unwrap_or(false),
                    pod: source
                        .target_ref
                        .as_ref()
                        .filter(|r| r.kind.as_deref() == Some("Pod"))
                        .and_then(|r| r.name.as_deref())
                        .map(Box::from),
                    zone: source.zone.as_deref().map(Box::from),
                })
            })
            .collect();
        Self {
            name: slice.name_any(),
            address_type: slice.address_type.as_str().into(),
            ports,
            endpoints,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    use kube::api::ObjectMeta;

    use super::*;

    fn endpoint(address: &str, conditions: Option<EndpointConditions>) -> Endpoint {
        Endpoint {
            addresses: vec![address.into(), "10.9.9.9".into()],
            conditions,
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                name: Some(format!("pod-{address}")),
                ..Default::default()
            }),
            zone: Some("zone-a".into()),
            ..Default::default()
        }
    }

    fn port(name: Option<&str>, number: Option<i32>, protocol: Option<&str>) -> EndpointPort {
        EndpointPort {
            name: name.map(Into::into),
            port: number,
            protocol: protocol.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn a_slice_keeps_what_rosters_read_with_the_api_defaults_applied() {
        let conditions = |ready, serving, terminating| {
            Some(EndpointConditions {
                ready,
                serving,
                terminating,
            })
        };
        let mut not_a_pod = endpoint("10.0.0.5", None);
        not_a_pod.target_ref.as_mut().unwrap().kind = Some("Node".into());
        not_a_pod.zone = None;
        let slice = EndpointSlice {
            metadata: ObjectMeta {
                name: Some("web-abc".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: Some(vec![
                endpoint("10.0.0.1", None),
                endpoint("10.0.0.2", conditions(Some(false), None, None)),
                endpoint("10.0.0.3", conditions(Some(false), Some(true), Some(true))),
                endpoint("not-an-address", None),
                not_a_pod,
            ]),
            ports: Some(vec![
                port(Some("dns"), Some(53), Some("UDP")),
                port(Some("http"), Some(8080), None),
                port(None, Some(9090), Some("TCP")),
                port(Some("zero"), Some(0), Some("TCP")),
                port(Some("zero"), Some(81), Some("TCP")),
                port(Some("big"), Some(70_000), Some("TCP")),
            ]),
        };
        let cached = CachedSlice::from(&slice);
        assert_eq!(cached.name, "web-abc");
        assert_eq!(&*cached.address_type, "IPv4");
        assert_eq!(cached.port("http"), Some(8080));
        assert_eq!(cached.port(""), Some(9090));
        assert_eq!(cached.port("dns"), None, "UDP ports are not ours");
        assert_eq!(
            cached.port("zero"),
            None,
            "the first TCP port of a name decides"
        );
        assert_eq!(cached.port("big"), None);
        let states: Vec<(String, bool, bool, bool)> = cached
            .endpoints
            .iter()
            .map(|e| (e.ip.to_string(), e.ready, e.serving, e.terminating))
            .collect();
        assert_eq!(
            states,
            [
                ("10.0.0.1".into(), true, true, false),
                ("10.0.0.2".into(), false, false, false),
                ("10.0.0.3".into(), false, true, true),
                ("10.0.0.5".into(), true, true, false),
            ],
            "unset conditions take the API's defaults; an unparsable address is left out"
        );
        assert_eq!(cached.endpoints[0].pod.as_deref(), Some("pod-10.0.0.1"));
        assert_eq!(cached.endpoints[0].zone.as_deref(), Some("zone-a"));
        assert_eq!(cached.endpoints[3].pod, None, "a Node is not a Pod");
        assert_eq!(cached.endpoints[3].zone, None);
    }

    #[test]
    fn a_cached_endpoint_stays_small() {
        assert!(std::mem::size_of::<CachedEndpoint>() <= 56);
    }
}
