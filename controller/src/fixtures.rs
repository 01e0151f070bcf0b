//! Test fixtures: small builders for pools, Services and EndpointSlices, so a test reads as the
//! situation it sets up.

use k8s_openapi::api::core::v1::{ObjectReference, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rollcall_api::policy::PoolPolicy;

use crate::crd::{BackendPool, BackendPoolSpec, ServiceRef};
use crate::roster::compute::SERVICE_NAME_LABEL;

pub const NS: &str = "shop";

pub fn pool(name: &str, service: &str, port: IntOrString) -> BackendPool {
    let mut p = BackendPool::new(
        name,
        BackendPoolSpec {
            service: ServiceRef {
                name: service.into(),
                port,
            },
            policy: PoolPolicy::default(),
        },
    );
    p.metadata.namespace = Some(NS.into());
    p.metadata.generation = Some(1);
    p.metadata.uid = Some(format!("uid-{name}"));
    p
}

/// A Service with ports `(name, port)`; an empty name leaves the port unnamed.
pub fn service(name: &str, ports: &[(&str, i32)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| ServicePort {
                        name: (!n.is_empty()).then(|| n.to_string()),
                        port: *p,
                        protocol: Some("TCP".into()),
                        target_port: Some(IntOrString::Int(p + 8000)),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// How an endpoint's conditions read; `None` leaves a condition unset.
#[derive(Clone, Copy)]
pub struct Cond {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

pub const READY: Cond = Cond {
    ready: Some(true),
    serving: Some(true),
    terminating: Some(false),
};
pub const NOT_READY: Cond = Cond {
    ready: Some(false),
    serving: Some(false),
    terminating: Some(false),
};
pub const TERMINATING_SERVING: Cond = Cond {
    ready: Some(false),
    serving: Some(true),
    terminating: Some(true),
};
pub const UNSET: Cond = Cond {
    ready: None,
    serving: None,
    terminating: None,
};

/// An EndpointSlice of `service` with one port `(name, number)` and endpoints `(ip, cond)`.
pub fn slice(
    name: &str,
    service: &str,
    address_type: &str,
    port: (&str, i32),
    endpoints: &[(&str, Cond)],
) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: Some([(SERVICE_NAME_LABEL.to_string(), service.to_string())].into()),
            ..Default::default()
        },
        address_type: address_type.into(),
        ports: Some(vec![EndpointPort {
            name: Some(port.0.into()),
            port: Some(port.1),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        endpoints: Some(
            endpoints
                .iter()
                .enumerate()
                .map(|(i, (ip, c))| Endpoint {
                    addresses: vec![ip.to_string()],
                    conditions: Some(EndpointConditions {
                        ready: c.ready,
                        serving: c.serving,
                        terminating: c.terminating,
                    }),
                    target_ref: Some(ObjectReference {
                        kind: Some("Pod".into()),
                        name: Some(format!("{service}-{i}")),
                        namespace: Some(NS.into()),
                        ..Default::default()
                    }),
                    zone: Some("zone-a".into()),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}
