//! The object store: every object under one monotonic `resourceVersion` counter, as etcd keeps
//! them. Each key keeps its versions back to the compaction point, so a list can be served as of
//! an older version (`resourceVersionMatch=Exact`, `continue` tokens) and a watch can start from
//! one; changes older than the retained history answer `410 Gone` like a compacted etcd.
//! Pure data structure: the caller holds it under one lock and publishes changes to watchers.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

/// Where an object lives: its storage (shared by every API that shows the same objects, such
/// as core and `events.k8s.io` Events), namespace (empty for cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub storage: String,
    pub namespace: String,
    pub name: String,
}

/// What a change did to its object, as watch events name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One committed write. For a deletion `object` is the last state, stamped with the deletion's
/// resourceVersion, as etcd's watch reports it.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub kind: ChangeKind,
    pub key: Key,
    pub object: Arc<Value>,
    pub previous: Option<Arc<Value>>,
}

/// A `resourceVersion` older than the retained history.
#[derive(Debug, PartialEq, Eq)]
pub struct TooOld {
    pub requested: u64,
    pub oldest: u64,
}

#[derive(Debug)]
struct Version {
    rv: u64,
    object: Option<Arc<Value>>,
}

/// All objects and their recent history.
#[derive(Debug)]
pub struct Store {
    rv: u64,
    /// Changes at or below this version are forgotten.
    compacted: u64,
    objects: BTreeMap<Key, Vec<Version>>,
    history: VecDeque<Arc<Change>>,
    max_history: usize,
}

fn set_resource_version(object: &mut Value, rv: u64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

// === impl Store ===

impl Store {
    /// A store that retains at least `max_history` changes for watches and consistent lists.
    pub fn new(max_history: usize) -> Self {
        Self {
            // Real clusters never hand out small versions; starting higher makes
            // off-by-one handling in clients visible.
            rv: 1000,
            compacted: 1000,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            max_history: max_history.max(1),
        }
    }

    /// The newest resourceVersion handed out.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// The oldest version a watch or list may still start from.
    pub fn oldest_rv(&self) -> u64 {
        self.compacted
    }

    pub fn get(&self, key: &Key) -> Option<Arc<Value>> {
        self.objects
            .get(key)
            .and_then(|versions| versions.last())
            .and_then(|v| v.object.clone())
    }

    /// Objects of `storage` (in `namespace`, when given) as of version `at` (now when `None`),
    /// ordered by namespace and name.
    pub fn list(
        &self,
        storage: &str,
        namespace: Option<&str>,
        at: Option<u64>,
    ) -> Result<Vec<Arc<Value>>, TooOld> {
        if let Some(at) = at
            && at < self.compacted
        {
            return Err(TooOld {
                requested: at,
                oldest: self.compacted,
            });
        }
        let start = Key {
            storage: storage.to_string(),
            namespace: namespace.unwrap_or_default().to_string(),
            name: String::new(),
        };
        let mut out = Vec::new();
        for (key, versions) in self.objects.range(start..) {
            if key.storage != storage {
                break;
            }
            if let Some(ns) = namespace
                && key.namespace != ns
            {
                break;
            }
            let version = match at {
                None => versions.last(),
                Some(at) => versions.iter().rev().find(|v| v.rv <= at),
            };
            if let Some(object) = version.and_then(|v| v.object.clone()) {
                out.push(object);
            }
        }
        Ok(out)
    }

    /// Commit `object` under `key` (a create or an update): stamps a new resourceVersion into
    /// its metadata and returns the change.
    pub fn put(&mut self, key: Key, mut object: Value) -> Arc<Change> {
        self.rv += 1;
        let rv = self.rv;
        set_resource_version(&mut object, rv);
        let previous = self.get(&key);
        let kind = if previous.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        let object = Arc::new(object);
        self.objects.entry(key.clone()).or_default().push(Version {
            rv,
            object: Some(object.clone()),
        });
        self.record(Change {
            rv,
            kind,
            key,
            object,
            previous,
        })
    }

    /// Remove the object under `key`; `None` when there is none.
    pub fn delete(&mut self, key: &Key) -> Option<Arc<Change>> {
        let previous = self.get(key)?;
        self.rv += 1;
        let rv = self.rv;
        let mut last = (*previous).clone();
        set_resource_version(&mut last, rv);
        self.objects
            .entry(key.clone())
            .or_default()
            .push(Version { rv, object: None });
        Some(self.record(Change {
            rv,
            kind: ChangeKind::Deleted,
            key: key.clone(),
            object: Arc::new(last),
            previous: Some(previous),
        }))
    }

    /// Changes of `storage` newer than `rv`, oldest first, or `TooOld` when some of them are
    /// already forgotten.
    pub fn changes_since(&self, storage: &str, rv: u64) -> Result<Vec<Arc<Change>>, TooOld> {
        if rv < self.compacted {
            return Err(TooOld {
                requested: rv,
                oldest: self.compacted,
            });
        }
        let newer = self.history.partition_point(|c| c.rv <= rv);
        Ok(self
            .history
            .range(newer..)
            .filter(|c| c.key.storage == storage)
            .cloned()
            .collect())
    }

    /// Forget every change up to the newest: the next watch or list from an older version
    /// gets `410 Gone` (the fault switch "expire old resource versions").
    pub fn compact_all(&mut self) {
        let drop = self.history.len();
        self.compact(drop);
        self.compacted = self.rv;
    }

    fn record(&mut self, change: Change) -> Arc<Change> {
        let change = Arc::new(change);
        self.history.push_back(change.clone());
        // Compact in batches so a steady writer pays O(1) per change.
        let slack = self.max_history / 4 + 1;
        if self.history.len() > self.max_history + slack {
            self.compact(self.history.len() - self.max_history);
        }
        change
    }

    /// Drop the oldest `count` changes and the object versions only they could still show.
    fn compact(&mut self, count: usize) {
        for change in self.history.drain(..count.min(self.history.len())) {
            self.compacted = self.compacted.max(change.rv);
            let compacted = self.compacted;
            let Some(versions) = self.objects.get_mut(&change.key) else {
                continue;
            };
            // Keep the newest version at or below the compaction point: it is still the state
            // as of any version from there on.
            let keep_from = versions
                .iter()
                .rposition(|v| v.rv <= compacted)
                .unwrap_or(0);
            versions.drain(..keep_from);
            if versions.len() == 1 && versions[0].object.is_none() {
                self.objects.remove(&change.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(name: &str) -> Key {
        Key {
            storage: "configmaps".into(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn object(name: &str, data: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}, "data": {"v": data}})
    }

    fn names(objects: &[Arc<Value>]) -> Vec<String> {
        objects
            .iter()
            .map(|o| format!("{}={}", o["metadata"]["name"], o["data"]["v"]).replace('"', ""))
            .collect()
    }

    #[test]
    fn every_write_gets_a_higher_version_stamped_into_the_object() {
        let mut store = Store::new(100);
        let a = store.put(key("a"), object("a", "1"));
        let b = store.put(key("a"), object("a", "2"));
        assert!(b.rv > a.rv);
        assert_eq!(b.kind, ChangeKind::Modified);
        assert_eq!(
            store.get(&key("a")).unwrap()["metadata"]["resourceVersion"],
            b.rv.to_string()
        );
        let gone = store.delete(&key("a")).unwrap();
        assert_eq!(gone.kind, ChangeKind::Deleted);
        assert_eq!(
            gone.object["metadata"]["resourceVersion"],
            gone.rv.to_string()
        );
        assert!(store.get(&key("a")).is_none());
        assert!(store.delete(&key("a")).is_none());
    }

    #[test]
    fn lists_show_the_state_as_of_an_older_version() {
        let mut store = Store::new(100);
        let first = store.put(key("a"), object("a", "1")).rv;
        store.put(key("b"), object("b", "1"));
        store.put(key("a"), object("a", "2"));
        store.delete(&key("b"));
        assert_eq!(
            names(&store.list("configmaps", None, Some(first)).unwrap()),
            ["a=1"]
        );
        assert_eq!(
            names(
                &store
                    .list("configmaps", Some("default"), Some(first + 1))
                    .unwrap()
            ),
            ["a=1", "b=1"]
        );
        assert_eq!(
            names(&store.list("configmaps", None, None).unwrap()),
            ["a=2"]
        );
        assert!(
            store
                .list("configmaps", Some("other"), None)
                .unwrap()
                .is_empty()
        );
        assert!(store.list("secrets", None, None).unwrap().is_empty());
    }

    #[test]
    fn compaction_forgets_old_changes_but_keeps_current_objects() {
        let mut store = Store::new(4);
        let first = store.put(key("a"), object("a", "0")).rv;
        for i in 1..20 {
            store.put(key("b"), object("b", &i.to_string()));
        }
        assert!(store.oldest_rv() > first);
        assert_eq!(
            store.changes_since("configmaps", first).unwrap_err(),
            TooOld {
                requested: first,
                oldest: store.oldest_rv()
            }
        );
        assert!(store.list("configmaps", None, Some(first)).is_err());
        // The untouched object is still there, as of any retained version.
        let oldest = store.oldest_rv();
        assert_eq!(
            names(&store.list("configmaps", None, Some(oldest)).unwrap()).len(),
            2
        );
        let recent = store.changes_since("configmaps", oldest).unwrap();
        assert!(!recent.is_empty() && recent.iter().all(|c| c.rv > oldest));
    }

    #[test]
    fn compact_all_makes_every_older_version_too_old() {
        let mut store = Store::new(100);
        let rv = store.put(key("a"), object("a", "1")).rv;
        store.delete(&key("a"));
        store.compact_all();
        assert!(store.changes_since("configmaps", rv).is_err());
        assert!(
            store
                .changes_since("configmaps", store.current_rv())
                .unwrap()
                .is_empty()
        );
        assert!(store.list("configmaps", None, None).unwrap().is_empty());
    }
}
