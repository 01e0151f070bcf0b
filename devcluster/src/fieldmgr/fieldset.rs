//! Sets of field paths (structured-merge-diff's `fieldpath.Set`): a tree whose nodes hold
//! members (paths that end there) and children, with set algebra and the `FieldsV1` JSON form
//! stored in `metadata.managedFields` (`{"f:spec":{"f:replicas":{}},"k:{..}":{".":{}}}`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::path::{Path, PathElement};

/// A set of field paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    pub fn new() -> Self {
        FieldSet::default()
    }

    /// A set of the given paths.
    pub fn from_paths<I: IntoIterator<Item = Path>>(paths: I) -> Self {
        let mut set = FieldSet::new();
        for path in paths {
            set.insert(&path.0);
        }
        set
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds a path (an empty path adds nothing).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The subtree under one path element (upstream `WithPrefix`).
    pub fn child(&self, element: &PathElement) -> Option<&FieldSet> {
        self.children.get(element)
    }

    pub(crate) fn has_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, set) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(set),
                None => set.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, set)| {
                let both = set.intersection(other.children.get(pe)?);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths of `self` that are not in `other` (members of `other` do not remove subtrees).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, set)| match other.children.get(pe) {
                Some(theirs) => {
                    let diff = set.difference(theirs);
                    (!diff.is_empty()).then(|| (pe.clone(), diff))
                }
                None => Some((pe.clone(), set.clone())),
            })
            .collect();
        FieldSet { members, children }
    }

    /// Like [`FieldSet::difference`], but a member of `other` also removes everything below it.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !other.members.contains(pe))
            .filter_map(|(pe, set)| match other.children.get(pe) {
                Some(theirs) => {
                    let diff = set.recursive_difference(theirs);
                    (!diff.is_empty()).then(|| (pe.clone(), diff))
                }
                None => Some((pe.clone(), set.clone())),
            })
            .collect();
        FieldSet { members, children }
    }

    /// Every path in the set, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        // Upstream iterates members before children at each level.
        for pe in &self.members {
            prefix.push(pe.clone());
            out.push(Path(prefix.clone()));
            prefix.pop();
        }
        for (pe, set) in &self.children {
            prefix.push(pe.clone());
            set.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Adds as members the children that are declared struct fields of the schema, so that
    /// removing the set removes those fields as a whole (upstream `EnsureNamedFieldsAreMembers`).
    pub(crate) fn ensure_named_fields_are_members(
        &self,
        schema: Option<super::schema::Schema>,
    ) -> FieldSet {
        let atom = schema.map(|s| s.atom());
        let map = atom.as_ref().and_then(|a| a.map);
        let list_element = atom.as_ref().and_then(|a| a.list.as_ref().map(|(_, e)| *e));
        let mut out = FieldSet {
            members: self.members.clone(),
            children: BTreeMap::new(),
        };
        for (pe, set) in &self.children {
            let child_schema = match pe {
                PathElement::Field(name) => {
                    if map.is_some_and(|m| m.field(name).is_some()) {
                        out.members.insert(pe.clone());
                    }
                    map.and_then(|m| m.child(name))
                }
                PathElement::Key(_) => list_element,
                _ => None,
            };
            out.children.insert(
                pe.clone(),
                set.ensure_named_fields_are_members(child_schema),
            );
        }
        out
    }

    /// The `FieldsV1` JSON form.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map(false))
    }

    fn to_map(&self, include_self: bool) -> Map<String, Value> {
        let mut map = Map::new();
        if include_self && !self.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(self.children.keys());
        for pe in keys {
            let value = match self.children.get(pe) {
                Some(child) => child.to_map(self.members.contains(pe)),
                None => Map::new(),
            };
            map.insert(pe.to_key(), Value::Object(value));
        }
        map
    }

    /// Parses the `FieldsV1` JSON form.
    pub fn from_value(value: &Value) -> Result<FieldSet, String> {
        match value {
            Value::Object(map) => Ok(Self::from_map(map)?.0),
            _ => Err("FieldsV1 must be a JSON object".into()),
        }
    }

    /// The set under a node and whether the node itself is a member.
    fn from_map(map: &Map<String, Value>) -> Result<(FieldSet, bool), String> {
        let mut set = FieldSet::new();
        let mut is_member = false;
        for (key, value) in map {
            if key == "." {
                is_member = true;
                continue;
            }
            let Some(pe) = PathElement::from_key(key)
                .map_err(|e| format!("parsing key as path element: {e}"))?
            else {
                continue;
            };
            let inner = value
                .as_object()
                .ok_or_else(|| format!("expected an object for {key}"))?;
            let (child, child_member) = Self::from_map(inner)?;
            if child_member {
                set.members.insert(pe.clone());
            }
            if !child.is_empty() {
                set.children.insert(pe, child);
            }
        }
        if set.is_empty() {
            is_member = true;
        }
        Ok((set, is_member))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_v1_round_trips() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}},
            }}}, "f:finalizers": {"v:\"a\"": {}}}
        });
        let set = FieldSet::from_value(&v).unwrap();
        assert_eq!(set.to_value(), v);
        assert!(set.has(&Path::fields(&["metadata", "labels"]).0));
        assert!(!set.has(&Path::fields(&["metadata"]).0));
        let paths: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
        assert!(paths.contains(&".spec.template.spec.containers[name=\"app\"].image".to_string()));
        assert!(paths.contains(&".spec.finalizers[=\"a\"]".to_string()));
    }

    #[test]
    fn algebra_follows_upstream() {
        let a = FieldSet::from_paths([
            Path::fields(&["a", "b"]),
            Path::fields(&["a", "c"]),
            Path::fields(&["d"]),
        ]);
        let b = FieldSet::from_paths([Path::fields(&["a", "b"]), Path::fields(&["a"])]);
        assert_eq!(
            a.difference(&b),
            FieldSet::from_paths([Path::fields(&["a", "c"]), Path::fields(&["d"])])
        );
        assert_eq!(
            a.recursive_difference(&b),
            FieldSet::from_paths([Path::fields(&["d"])])
        );
        assert_eq!(
            a.intersection(&b),
            FieldSet::from_paths([Path::fields(&["a", "b"])])
        );
        assert_eq!(a.union(&b).paths().len(), 4);
        assert!(a.difference(&a).is_empty());
        assert!(
            FieldSet::from_value(&json!({"x:unknown": {}}))
                .unwrap()
                .is_empty()
        );
        assert!(FieldSet::from_value(&json!({"nocolon": {}})).is_err());
    }
}
