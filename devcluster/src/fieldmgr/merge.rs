//! Schema-directed merging and removal (structured-merge-diff's `TypedValue.Merge` and
//! `RemoveItems`): an applied configuration merged into the live object, and fields pruned
//! from it by path.

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
use super::path::PathElement;
use super::schema::{ListType, Schema};
use super::typed::{Resolved, Shape, item_element};

/// Merges `rhs` (the applied configuration) into `lhs` (the live object): leaves take `rhs`'s
/// value, atomic lists and maps are replaced, associative lists and granular maps merge item by
/// item, and items keep `lhs`'s order unless `rhs` reorders shared ones.
pub fn merge(lhs: &Value, rhs: &Value, schema: Schema) -> Value {
    merge_at(Some(lhs), Some(rhs), schema).unwrap_or(Value::Null)
}

fn merge_at(lhs: Option<&Value>, rhs: Option<&Value>, schema: Schema) -> Option<Value> {
    let resolved = Resolved::new(&schema);
    let shape = match rhs {
        None => resolved.shape(lhs),
        Some(_) => resolved.shape(rhs),
    };
    match shape {
        Shape::Scalar(_) => rhs.or(lhs).cloned(),
        Shape::List(list, element) => {
            let l = lhs.and_then(Value::as_array);
            let r = rhs.and_then(Value::as_array);
            let empty = |v: Option<&Vec<Value>>| v.is_none_or(|v| v.is_empty());
            if list == ListType::Atomic || (empty(l) && empty(r)) {
                return rhs.or(lhs).cloned();
            }
            let out = merge_list(
                &list,
                element,
                l.map(Vec::as_slice).unwrap_or_default(),
                r.map(Vec::as_slice).unwrap_or_default(),
            );
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Shape::Map(map) => {
            let l = lhs.and_then(Value::as_object);
            let r = rhs.and_then(Value::as_object);
            let empty = |v: Option<&Map<String, Value>>| v.is_none_or(|v| v.is_empty());
            if map.atomic || (empty(l) && empty(r)) {
                return rhs.or(lhs).cloned();
            }
            let mut out = Map::new();
            let mut keys: Vec<&String> = l.map(|m| m.keys().collect()).unwrap_or_default();
            if let Some(r) = r {
                keys.extend(r.keys().filter(|k| l.is_none_or(|l| !l.contains_key(*k))));
            }
            for key in keys {
                let child = map.child(key).unwrap_or_else(Schema::deduced);
                if let Some(v) = merge_at(
                    l.and_then(|m| m.get(key)),
                    r.and_then(|m| m.get(key)),
                    child,
                ) {
                    out.insert(key.clone(), v);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
    }
}

/// Path elements of a list's items, with the item each names (a repeated element names null).
fn index_items<'v>(
    list: &ListType,
    element: &Schema,
    items: &'v [Value],
) -> (Vec<PathElement>, Vec<(PathElement, Option<&'v Value>)>) {
    let mut pes = Vec::new();
    let mut observed: Vec<(PathElement, Option<&'v Value>)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Ok(pe) = item_element(list, element, item, i) else {
            continue;
        };
        match observed.iter_mut().find(|(p, _)| *p == pe) {
            Some(entry) => entry.1 = None,
            None => observed.push((pe.clone(), Some(item))),
        }
        pes.push(pe);
    }
    (pes, observed)
}

/// upstream `mergingWalker.visitListItems`, order-preserving.
fn merge_list(list: &ListType, element: Schema, lhs: &[Value], rhs: &[Value]) -> Vec<Value> {
    let (rhs_pes, observed_rhs) = index_items(list, &element, rhs);
    let (lhs_pes, observed_lhs) = index_items(list, &element, lhs);
    let lookup = |observed: &Vec<(PathElement, Option<&Value>)>,
                  pe: &PathElement|
     -> Option<Option<Value>> {
        observed
            .iter()
            .find(|(p, _)| p == pe)
            .map(|(_, v)| Some(v.cloned().unwrap_or(Value::Null)))
    };
    let in_rhs = |pe: &PathElement| observed_rhs.iter().any(|(p, _)| p == pe);
    let mut shared: std::collections::VecDeque<&PathElement> = rhs_pes
        .iter()
        .filter(|pe| observed_lhs.iter().any(|(p, _)| p == *pe))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: Vec<PathElement> = Vec::new();
    let mut out = Vec::new();
    let push_merged = |out: &mut Vec<Value>, l: Option<Value>, r: Option<Value>| {
        if let Some(v) = merge_at(l.as_ref(), r.as_ref(), element) {
            out.push(v);
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < lhs_pes.len() || ri < rhs_pes.len() {
        if li < lhs_pes.len() && ri < rhs_pes.len() {
            let pe = &lhs_pes[li];
            if *pe == rhs_pes[ri] {
                merged_rhs.push(pe.clone());
                let l = lookup(&observed_lhs, pe).flatten();
                let r = lookup(&observed_rhs, pe).flatten();
                push_merged(&mut out, l, r);
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_rhs(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs_pes.len() {
            let pe = &lhs_pes[li];
            if !in_rhs(pe) {
                push_merged(&mut out, lhs.get(li).cloned(), None);
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rhs_pes.len() {
            let pe = &rhs_pes[ri];
            merged_rhs.push(pe.clone());
            let l = lookup(&observed_lhs, pe).flatten();
            let r = lookup(&observed_rhs, pe).flatten();
            push_merged(&mut out, l, r);
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// Removes the paths of `set` from `value` (upstream `RemoveItems`): members go entirely,
/// containers that end up empty become null.
pub fn remove_items(value: &Value, set: &FieldSet, schema: Schema) -> Value {
    let resolved = Resolved::new(&schema);
    match resolved.shape(Some(value)) {
        Shape::Scalar(_) => value.clone(),
        Shape::List(list, element) => {
            let Some(items) = value.as_array() else {
                return Value::Null;
            };
            if items.is_empty() || list == ListType::Atomic {
                return Value::Null;
            }
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let pe = match item_element(&list, &element, item, i) {
                    Ok(pe) => pe,
                    Err(_) => {
                        out.push(item.clone());
                        continue;
                    }
                };
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) if !sub.is_empty() => out.push(remove_items(item, sub, element)),
                    _ => out.push(item.clone()),
                }
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Array(out)
            }
        }
        Shape::Map(map) => {
            let Some(entries) = value.as_object() else {
                return Value::Null;
            };
            if entries.is_empty() || map.atomic {
                return Value::Null;
            }
            let mut out = Map::new();
            for (key, child) in entries {
                let pe = PathElement::Field(key.clone());
                if set.has_member(&pe) {
                    continue;
                }
                let child_schema = map.child(key).unwrap_or_else(Schema::deduced);
                let kept = match set.child(&pe) {
                    Some(sub) if !sub.is_empty() => remove_items(child, sub, child_schema),
                    _ => child.clone(),
                };
                out.insert(key.clone(), kept);
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Object(out)
            }
        }
    }
}

/// Drops `null` entries the schema does not declare nullable, as decoding into Go types (or
/// pruning a custom resource) does before an object is stored.
pub fn drop_nulls(value: &mut Value, schema: Schema) {
    let resolved = Resolved::new(&schema);
    match (resolved.shape(Some(value)), value) {
        (Shape::Map(map), Value::Object(entries)) => {
            entries.retain(|key, child| {
                !child.is_null() || map.field(key).is_some_and(|s| s.nullable())
            });
            for (key, child) in entries.iter_mut() {
                drop_nulls(child, map.child(key).unwrap_or_else(Schema::deduced));
            }
        }
        (Shape::List(_, element), Value::Array(items)) => {
            for item in items {
                drop_nulls(item, element);
            }
        }
        _ => {}
    }
}
