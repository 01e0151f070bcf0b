//! Comparison of two versions of an object through its schema (structured-merge-diff's
//! `TypedValue.Compare`): which fields the newer one added, modified and removed.

use serde_json::Value;

use super::fieldset::FieldSet;
use super::path::PathElement;
use super::schema::{ListType, Schema};
use super::typed::{Resolved, Shape, equal, item_element};

/// What changed from one object to another. A field is in at most one of the three sets;
/// `added` and `removed` also name whole containers (maps, list items) that appeared or went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Compares `old` to `new`.
pub fn compare(old: &Value, new: &Value, schema: Schema) -> Comparison {
    let mut walker = Walker {
        result: Comparison::default(),
        path: Vec::new(),
    };
    walker.compare(Some(old), Some(new), schema);
    walker.result
}

struct Walker {
    result: Comparison,
    path: Vec<PathElement>,
}

fn same_shape(a: &Shape, b: &Shape) -> bool {
    matches!(
        (a, b),
        (Shape::Scalar(_), Shape::Scalar(_))
            | (Shape::List(..), Shape::List(..))
            | (Shape::Map(_), Shape::Map(_))
    )
}

impl Walker {
    fn compare(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, schema: Schema) {
        let resolved = Resolved::new(&schema);
        let (l_shape, r_shape) = (resolved.shape(lhs), resolved.shape(rhs));
        let mut in_leaf = false;
        if rhs.is_none() {
            self.handle(l_shape, lhs, rhs, &mut in_leaf);
        } else if lhs.is_none() || same_shape(&l_shape, &r_shape) {
            self.handle(r_shape, lhs, rhs, &mut in_leaf);
        } else {
            let mut other_leaf = in_leaf;
            self.handle(l_shape, lhs, rhs, &mut other_leaf);
            self.handle(r_shape, lhs, rhs, &mut in_leaf);
        }
        if !in_leaf {
            if lhs.is_none() {
                self.result.added.insert(&self.path);
            } else if rhs.is_none() {
                self.result.removed.insert(&self.path);
            }
        }
    }

    fn leaf(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, in_leaf: &mut bool) {
        if *in_leaf {
            return;
        }
        *in_leaf = true;
        match (lhs, rhs) {
            (None, _) => self.result.added.insert(&self.path),
            (_, None) => self.result.removed.insert(&self.path),
            (Some(l), Some(r)) if !equal(l, r) => self.result.modified.insert(&self.path),
            _ => {}
        }
    }

    fn handle(
        &mut self,
        shape: Shape,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) {
        match shape {
            Shape::Scalar(_) => self.leaf(lhs, rhs, in_leaf),
            Shape::List(list, element) => {
                let l = lhs.and_then(Value::as_array);
                let r = rhs.and_then(Value::as_array);
                let empty = |v: Option<&Vec<Value>>| v.is_none_or(|v| v.is_empty());
                if list == ListType::Atomic || (empty(l) && empty(r)) {
                    return self.leaf(lhs, rhs, in_leaf);
                }
                self.list_items(&list, element, l.map(Vec::as_slice), r.map(Vec::as_slice));
            }
            Shape::Map(map) => {
                let l = lhs.and_then(Value::as_object);
                let r = rhs.and_then(Value::as_object);
                let empty =
                    |v: Option<&serde_json::Map<String, Value>>| v.is_none_or(|v| v.is_empty());
                if map.atomic || (empty(l) && empty(r)) {
                    return self.leaf(lhs, rhs, in_leaf);
                }
                let mut keys: Vec<&String> = l.map(|m| m.keys().collect()).unwrap_or_default();
                if let Some(r) = r {
                    keys.extend(r.keys().filter(|k| l.is_none_or(|l| !l.contains_key(*k))));
                }
                for key in keys {
                    let child = map.child(key).unwrap_or_else(Schema::deduced);
                    self.path.push(PathElement::Field(key.clone()));
                    self.compare(
                        l.and_then(|m| m.get(key)),
                        r.and_then(|m| m.get(key)),
                        child,
                    );
                    self.path.pop();
                }
            }
        }
    }

    fn list_items(
        &mut self,
        list: &ListType,
        element: Schema,
        lhs: Option<&[Value]>,
        rhs: Option<&[Value]>,
    ) {
        let mut order: Vec<PathElement> = Vec::new();
        let mut left: Vec<(PathElement, Vec<&Value>)> = Vec::new();
        let mut right: Vec<(PathElement, Vec<&Value>)> = Vec::new();
        for (side, items) in [(&mut left, lhs), (&mut right, rhs)] {
            for (i, item) in items.unwrap_or_default().iter().enumerate() {
                let Ok(pe) = item_element(list, &element, item, i) else {
                    continue;
                };
                match side.iter_mut().find(|(p, _)| *p == pe) {
                    Some((_, values)) => values.push(item),
                    None => {
                        if !order.contains(&pe) {
                            order.push(pe.clone());
                        }
                        side.push((pe, vec![item]));
                    }
                }
            }
        }
        for pe in order {
            let (l, r) = (find(&left, &pe), find(&right, &pe));
            self.path.push(pe);
            match (l.len(), r.len()) {
                (0..=1, 0..=1) => self.compare(l.first().copied(), r.first().copied(), element),
                (2.., 2..) => {
                    let same = l.len() == r.len() && l.iter().zip(&r).all(|(a, b)| equal(a, b));
                    if !same {
                        self.result.modified.insert(&self.path);
                    }
                }
                (2.., _) => {
                    if let Some(first) = r.first() {
                        self.compare(None, Some(first), element);
                    }
                    self.result.removed.insert(&self.path);
                }
                _ => {
                    if let Some(first) = l.first() {
                        self.compare(Some(first), None, element);
                    }
                    self.result.added.insert(&self.path);
                }
            }
            self.path.pop();
        }
    }
}

fn find<'v>(side: &[(PathElement, Vec<&'v Value>)], pe: &PathElement) -> Vec<&'v Value> {
    side.iter()
        .find(|(p, _)| p == pe)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}
