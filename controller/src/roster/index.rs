//! The EndpointSlice cache: every slice labelled with its Service, in the parsed form rosters
//! are computed from (`CachedSlice`), indexed by `(namespace, service)` as the watch delivers
//! them, so a reconcile reads only its own Service's slices. Fed the watcher's events in order:
//! a relist (`Init` .. `InitDone`) builds a fresh index that replaces the old one at `InitDone`,
//! as kube's reflector store does, and the first `InitDone` marks the cache synced.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use tokio::sync::watch;

use super::SERVICE_NAME_LABEL;
use super::cached::CachedSlice;

/// `(namespace, service)`.
pub type ServiceKey = (String, String);

#[derive(Debug, Default)]
struct Index {
    by_service: HashMap<ServiceKey, HashSet<ObjectRef<EndpointSlice>>>,
    slices: HashMap<ObjectRef<EndpointSlice>, (ServiceKey, Arc<CachedSlice>)>,
}

/// The index, and the one being rebuilt during a relist.
#[derive(Debug)]
pub struct SliceIndex {
    live: Index,
    rebuilding: Option<Index>,
    synced: watch::Sender<bool>,
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
            self.slices
                .insert(reference, (key, Arc::new(CachedSlice::from(slice))));
        }
    }

    fn remove(&mut self, reference: &ObjectRef<EndpointSlice>) {
        if let Some((key, _)) = self.slices.remove(reference)
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

impl Default for SliceIndex {
    fn default() -> Self {
        Self {
            live: Index::default(),
            rebuilding: None,
            synced: watch::Sender::new(false),
        }
    }
}

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
                self.synced.send_replace(true);
            }
        }
    }

    /// Turns true once a complete list has been applied (and stays true through relists).
    pub fn synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// The slices of Service `namespace/name`, by name.
    pub fn slices_of(&self, namespace: &str, service: &str) -> Vec<Arc<CachedSlice>> {
        let mut slices: Vec<Arc<CachedSlice>> = self
            .live
            .by_service
            .get(&(namespace.to_string(), service.to_string()))
            .into_iter()
            .flatten()
            .filter_map(|r| self.live.slices.get(r))
            .map(|(_, slice)| slice.clone())
            .collect();
        slices.sort_by(|a, b| a.name.cmp(&b.name));
        slices
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
            .map(|s| s.name.clone())
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

    #[test]
    fn the_cache_is_synced_by_the_first_complete_list_and_holds_the_parsed_slices() {
        let mut index = SliceIndex::default();
        let synced = index.synced();
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(slice("web-1", "shop", "web")));
        assert!(!*synced.borrow(), "a list is not complete until InitDone");
        index.apply(&Event::InitDone);
        assert!(*synced.borrow());
        let mut changed = slice("web-1", "shop", "web");
        changed.address_type = "IPv6".into();
        index.apply(&Event::Apply(changed.clone()));
        let cached = index.slices_of("shop", "web");
        assert_eq!(cached.len(), 1);
        assert_eq!(
            *cached[0],
            CachedSlice::from(&changed),
            "the newest version, parsed"
        );
        // A relist keeps it synced.
        index.apply(&Event::Init);
        assert!(*index.synced().borrow());
    }
}
