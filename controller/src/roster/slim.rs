//! What of an EndpointSlice the controller keeps in its cache: the fields a roster is computed
//! from (`compute`) and that the index files a slice under (`index`), nothing else. The slice
//! watch is cluster-wide, so a cache of whole objects holds, for every endpoint of the cluster,
//! its node and host names, topology hints and full Pod reference, and for every slice the
//! Service's labels (the EndpointSlice controller copies them), annotations and owner: none of
//! which a roster uses. Slimmed as each object arrives, before the reflector stores it.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::SERVICE_NAME_LABEL;

/// Drop every field neither `compute` nor the index reads. Kept: name, namespace, uid and
/// resourceVersion; the Service label; the address type and ports; per endpoint its first
/// address (the only one `compute` uses: an endpoint's addresses are fungible), conditions,
/// zone, and the kind and name of what it targets.
pub fn slim(slice: &mut EndpointSlice) {
    let meta = &mut slice.metadata;
    meta.managed_fields = None;
    meta.annotations = None;
    meta.owner_references = None;
    meta.finalizers = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|name, _| name == SERVICE_NAME_LABEL);
    }
    for endpoint in slice.endpoints.iter_mut().flatten() {
        endpoint.addresses.truncate(1);
        endpoint.addresses.shrink_to_fit();
        endpoint.hostname = None;
        endpoint.node_name = None;
        endpoint.hints = None;
        endpoint.deprecated_topology = None;
        if let Some(target) = endpoint.target_ref.as_mut() {
            *target = ObjectReference {
                kind: target.kind.take(),
                name: target.name.take(),
                ..Default::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::{EndpointHints, ForZone};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kube::ResourceExt;

    use super::*;
    use crate::fixtures::*;
    use crate::roster::compute;

    /// A slice as the EndpointSlice controller writes it: every field filled.
    fn as_written(name: &str, endpoints: &[(&str, Cond)]) -> EndpointSlice {
        let mut s = slice(name, "web", "IPv4", ("http", 8080), endpoints);
        let meta = &mut s.metadata;
        meta.uid = Some(format!("uid-{name}"));
        meta.resource_version = Some("41".into());
        meta.annotations = Some(
            [(
                "endpoints.kubernetes.io/last-change-trigger-time".to_string(),
                "2026-12-03T07:00:00Z".to_string(),
            )]
            .into(),
        );
        let labels = meta.labels.get_or_insert_with(Default::default);
        labels.insert(
            "endpointslice.kubernetes.io/managed-by".into(),
            "endpointslice-controller.k8s.io".into(),
        );
        labels.insert("app".into(), "web".into());
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            name: "web".into(),
            uid: "uid-svc".into(),
            ..Default::default()
        }]);
        for (i, endpoint) in s.endpoints.iter_mut().flatten().enumerate() {
            endpoint.addresses.push(format!("10.9.9.{i}"));
            endpoint.hostname = Some(format!("web-{i}"));
            endpoint.node_name = Some(format!("node-{i}"));
            endpoint.hints = Some(EndpointHints {
                for_zones: Some(vec![ForZone {
                    name: "zone-a".into(),
                }]),
                ..Default::default()
            });
            if let Some(target) = endpoint.target_ref.as_mut() {
                target.uid = Some(format!("uid-pod-{i}"));
                target.resource_version = Some("40".into());
            }
        }
        s
    }

    #[test]
    fn a_slimmed_slice_gives_the_same_roster_and_index_key() {
        let p = pool("web", "web", IntOrString::String("http".into()));
        let svc = service("web", &[("http", 80)]);
        let full = [
            as_written(
                "web-a",
                &[
                    ("10.0.0.1", READY),
                    ("10.0.0.2", NOT_READY),
                    ("10.0.0.3", TERMINATING_SERVING),
                ],
            ),
            as_written("web-b", &[("10.0.0.4", UNSET), ("10.0.0.1", NOT_READY)]),
        ];
        let mut slimmed = full.clone();
        slimmed.iter_mut().for_each(slim);
        assert_eq!(
            compute(&p, &slimmed, Some(&svc)),
            compute(&p, &full, Some(&svc))
        );
        for (before, after) in full.iter().zip(&slimmed) {
            assert_eq!(after.name_any(), before.name_any());
            assert_eq!(after.namespace(), before.namespace());
            assert_eq!(after.uid(), before.uid());
            assert_eq!(after.resource_version(), before.resource_version());
            assert_eq!(
                after.labels().get(SERVICE_NAME_LABEL),
                before.labels().get(SERVICE_NAME_LABEL)
            );
        }
    }

    #[test]
    fn what_no_roster_reads_is_dropped() {
        let mut s = as_written("web-a", &[("10.0.0.1", READY)]);
        slim(&mut s);
        assert!(s.metadata.annotations.is_none());
        assert!(s.metadata.owner_references.is_none());
        assert_eq!(s.labels().len(), 1);
        let endpoint = &s.endpoints.as_ref().unwrap()[0];
        assert_eq!(endpoint.addresses, ["10.0.0.1"]);
        assert!(endpoint.hostname.is_none() && endpoint.node_name.is_none());
        assert!(endpoint.hints.is_none());
        let target = endpoint.target_ref.as_ref().unwrap();
        assert_eq!(target.kind.as_deref(), Some("Pod"));
        assert_eq!(target.name.as_deref(), Some("web-0"));
        assert!(target.uid.is_none() && target.namespace.is_none());
        assert!(endpoint.conditions.is_some() && endpoint.zone.is_some());
    }
}
