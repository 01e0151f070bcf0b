//! Which EndpointSlices belong to which Service, kept from the slice watch as it happens, so a
//! reconcile reads only its own Service's slices instead of scanning every cached slice. Fed
//! the watcher's events in order: a relist (`Init` .. `InitDone`) builds a fresh index that
//! replaces the old one at `InitDone`, as the reflector's store does.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

use super::SERVICE_NAME_LABEL;

/// `(namespace, service)`.
pub type ServiceKey = (String, String);

#[derive(Debug, Default)]
struct Index {
    by_service: HashMap<ServiceKey, HashSet<ObjectRef<EndpointSlice>>>,
    service_of: HashMap<ObjectRef<EndpointSlice>, ServiceKey>,
}

/// The index, and the one being rebuilt during a relist.
#[derive(Debug, Default)]
pub struct SliceIndex {
    live: Index,
    rebuilding: Option<Index>,
}

fn key_of(slice: &EndpointSlice) -> Option<ServiceKey> {
    Some((
        slice.namespace()?,
        slice.labels().get(SERVICE_NAME_LABEL)?.clone(),
    ))
}

// === impl Index ===

impl Index {
    fn put(&mut self, slice: &EndpointSlice) {
        let reference = ObjectRef::from_obj(slice);
        self.remove(&reference);
        if let Some(key) = key_of(slice) {
            self.by_service
                .entry(key.clone())
                .or_default()
                .insert(reference.clone());
            self.service_of.insert(reference, key);
        }
    }

    fn remove(&mut self, reference: &ObjectRef<EndpointSlice>) {
        if let Some(key) = self.service_of.remove(reference)
            && let Some(set) = self.by_service.get_mut(&key)
        {
            set.remove(reference);
            if set.is_empty() {
                self.by_service.remove(&key);
            }
        }
    }
}

// === impl SliceIndex ===

impl SliceIndex {
    /// Apply one watcher event.
    pub fn apply(&mut self, event: &Event<EndpointSlice>) {
        match event {
            Event::Apply(slice) => self.live.put(slice),
            Event::Delete(slice) => self.live.remove(&ObjectRef::from_obj(slice)),
            Event::Init => self.rebuilding = Some(Index::default()),
            Event::InitApply(slice) => match &mut self.rebuilding {
                Some(index) => index.put(slice),
                None => self.live.put(slice),
            },
            Event::InitDone => {
                if let Some(index) = self.rebuilding.take() {
                    self.live = index;
                }
            }
        }
    }

    /// The slices of Service `namespace/name`, by name.
    pub fn slices_of(&self, namespace: &str, service: &str) -> Vec<ObjectRef<EndpointSlice>> {
        let mut refs: Vec<ObjectRef<EndpointSlice>> = self
            .live
            .by_service
            .get(&(namespace.to_string(), service.to_string()))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        refs.sort_by(|a, b| a.name.cmp(&b.name));
        refs
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::ObjectMeta;

    use super::*;

    fn slice(name: &str, ns: &str, service: &str) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                labels: Some(BTreeMap::from([(
                    SERVICE_NAME_LABEL.into(),
                    service.into(),
                )])),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            ..Default::default()
        }
    }

    fn names(index: &SliceIndex, ns: &str, svc: &str) -> Vec<String> {
        index
            .slices_of(ns, svc)
            .into_iter()
            .map(|r| r.name)
            .collect()
    }

    #[test]
    fn slices_are_indexed_by_their_service_and_follow_label_changes() {
        let mut index = SliceIndex::default();
        index.apply(&Event::Apply(slice("web-1", "shop", "web")));
        index.apply(&Event::Apply(slice("web-2", "shop", "web")));
        index.apply(&Event::Apply(slice("db-1", "shop", "db")));
        index.apply(&Event::Apply(slice("web-1", "other", "web")));
        assert_eq!(names(&index, "shop", "web"), ["web-1", "web-2"]);
        assert_eq!(names(&index, "other", "web"), ["web-1"]);
        // Relabelled to another Service: it moves.
        index.apply(&Event::Apply(slice("web-2", "shop", "db")));
        assert_eq!(names(&index, "shop", "web"), ["web-1"]);
        assert_eq!(names(&index, "shop", "db"), ["db-1", "web-2"]);
        index.apply(&Event::Delete(slice("db-1", "shop", "db")));
        assert_eq!(names(&index, "shop", "db"), ["web-2"]);
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_completes() {
        let mut index = SliceIndex::default();
        index.apply(&Event::Apply(slice("gone", "shop", "web")));
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(slice("kept", "shop", "web")));
        // Until the relist is done, readers see the old state.
        assert_eq!(names(&index, "shop", "web"), ["gone"]);
        index.apply(&Event::InitDone);
        assert_eq!(names(&index, "shop", "web"), ["kept"]);
    }
}
