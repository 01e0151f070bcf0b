//! Roster computation, pure: `(BackendPool, EndpointSlices, Service) -> Roster | Problem`, from
//! the slices as the cache holds them (`cached`: parsed once, on arrival).
//!
//! - The pool's `service.port` names a *Service* port (by name or number). EndpointSlice ports
//!   carry the Service port's name and the *target* port number, so the Service port is first
//!   resolved to its name, then each slice's port of that name gives the endpoint port (it may
//!   differ between slices while a named targetPort rolls out).
//! - Conditions follow the EndpointSlice API: unset `ready` means ready, unset `serving` means
//!   the same as `ready`, unset `terminating` means not terminating.
//! - An address in several slices (a slice being split or merged) appears once, keeping the
//!   most usable copy: ready, then serving, then not terminating.
//! - One address family per Service: its primary (`ipFamilies[0]`, IPv4 when unset). A
//!   dual-stack pod appears in an IPv4 and an IPv6 slice; using both would count it twice and
//!   double its weight. FQDN slices are ignored.
//! - A missing Service or port is a `Problem` with a reason, for a condition; a Service without
//!   endpoints is an empty roster (the status says `NoEndpoints`).

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use rollcall_api::roster::{Endpoint, Roster, UnavailableReason};

use super::cached::{CachedEndpoint, CachedSlice};
use crate::crd::BackendPool;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Why no roster could be computed; becomes a condition and an `unavailable` update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub reason: UnavailableReason,
    pub message: String,
}

/// Compute the roster of `pool` from the cached slices of its Service (`SliceIndex::slices_of`:
/// every one is of the pool's namespace and Service) and the Service, if it exists.
pub fn compute<'a>(
    pool: &BackendPool,
    slices: impl IntoIterator<Item = &'a CachedSlice>,
    service: Option<&Service>,
) -> Result<Roster, Problem> {
    let namespace = pool.namespace().unwrap_or_default();
    let svc_name = &pool.spec.service.name;
    let port_text = match &pool.spec.service.port {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    let service_label = format!("{namespace}/{svc_name}:{port_text}");
    let Some(service) = service.filter(|s| {
        s.name_any() == *svc_name && s.namespace().as_deref() == Some(namespace.as_str())
    }) else {
        return Err(Problem {
            reason: UnavailableReason::ServiceNotFound,
            message: format!("Service {namespace}/{svc_name} does not exist"),
        });
    };
    let port_name =
        service_port_name(service, &pool.spec.service.port).map_err(|message| Problem {
            reason: UnavailableReason::PortNotFound,
            message,
        })?;

    let family = service
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|f| f.first())
        .map_or("IPv4", String::as_str);
    // Every usable address with its rank, borrowed; sorted by address, most usable copy first
    // and, among equals, the first seen (slices by name, then their order), so the same slices
    // always give the same roster. Only the kept copy's strings are cloned.
    let mut seen: Vec<Candidate<'_>> = Vec::new();
    for slice in slices.into_iter().filter(|s| &*s.address_type == family) {
        let Some(port) = slice.port(&port_name) else {
            continue;
        };
        seen.extend(slice.endpoints.iter().map(|source| Candidate {
            addr: SocketAddr::new(source.ip, port),
            rank: (source.ready, source.serving, !source.terminating),
            source,
        }));
    }
    // Stable: equal copies keep the order they were seen in.
    seen.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.rank.cmp(&a.rank)));
    seen.dedup_by_key(|c| c.addr);
    let endpoints = seen
        .iter()
        .map(|c| Endpoint {
            addr: c.addr,
            pod: c.source.pod.as_deref().map(String::from),
            zone: c.source.zone.as_deref().map(String::from),
            ready: c.source.ready,
            serving: c.source.serving,
            terminating: c.source.terminating,
            weight: 1,
        })
        .collect();
    Ok(Roster {
        endpoints,
        policy: pool.spec.policy.clone(),
        service: service_label,
    })
}

/// One copy of an address in the slices: which copy of a duplicated address is kept is the
/// most usable one (`rank`: ready, then serving, then not terminating), then the first seen.
struct Candidate<'a> {
    addr: SocketAddr,
    rank: (bool, bool, bool),
    source: &'a CachedEndpoint,
}

/// The name of the Service's TCP port the pool refers to ("" for an unnamed single port).
fn service_port_name(service: &Service, port: &IntOrString) -> Result<String, String> {
    let name = service.name_any();
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let found = ports.iter().find(|p| match port {
        IntOrString::Int(n) => p.port == *n,
        IntOrString::String(s) => p.name.as_deref() == Some(s.as_str()),
    });
    let Some(found) = found else {
        let have: Vec<String> = ports
            .iter()
            .map(|p| match &p.name {
                Some(n) => format!("{n} ({})", p.port),
                None => p.port.to_string(),
            })
            .collect();
        let want = match port {
            IntOrString::Int(n) => format!("port {n}"),
            IntOrString::String(s) => format!("port named {s:?}"),
        };
        return Err(format!(
            "Service {name} has no {want}; its ports are [{}]",
            have.join(", ")
        ));
    };
    match found.protocol.as_deref() {
        None | Some("TCP") => Ok(found.name.clone().unwrap_or_default()),
        Some(other) => Err(format!(
            "Service {name} port {} is {other}; rollcall routes TCP only",
            found.port
        )),
    }
}

#[cfg(test)]
#[path = "compute_tests.rs"]
mod tests;
