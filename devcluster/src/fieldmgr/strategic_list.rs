//! List handling of strategic merge patch: merging by merge key or as a set of scalars,
//! `$patch` list directives, deletions from primitive lists, and upstream's element-order
//! normalisation (ported with its quirks, since clients see the resulting order).

use serde_json::{Map, Value};

use super::error::go_fmt;
use super::strategic::{
    DIRECTIVE, FieldMeta, Meta, SET_ELEMENT_ORDER, SmpError, SmpResult, go_type, merge_map,
};

/// upstream `mergepatch.ErrBadArgType`.
pub(crate) fn bad_arg_type(expected: &str, actual: &Value) -> SmpError {
    SmpError::Other(format!(
        "expected a {expected}, but received a {}",
        go_type(actual)
    ))
}

fn no_merge_key(map: &Map<String, Value>, key: &str) -> SmpError {
    SmpError::Other(format!(
        "map: {} does not contain declared merge key: {key}",
        go_fmt(&Value::Object(map.clone()))
    ))
}

/// Removes subtrees carrying `$patch` (upstream `removeDirectives`); `None` drops the value.
pub(crate) fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.contains_key(DIRECTIVE) {
                return None;
            }
            let kept = map
                .into_iter()
                .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                .collect();
            Some(Value::Object(kept))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// Merges or replaces a list by the field's strategy (upstream `mergeSliceHandler`).
pub(crate) fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    field: &FieldMeta,
    is_delete_list: bool,
) -> SmpResult<Vec<Value>> {
    if field.strategy == "merge" || is_delete_list {
        merge_slice(original, patch, field.sub, &field.merge_key, is_delete_list)
    } else {
        Ok(patch)
    }
}

/// Whether the lists' elements are objects; errors on mixed or nested lists.
pub(crate) fn slice_element_type(lists: &[&[Value]]) -> SmpResult<bool> {
    let mut first: Option<&'static str> = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let t = go_type(item);
        match first {
            None => {
                if item.is_array() {
                    return Err(SmpError::NoListOfLists);
                }
                first = Some(t);
            }
            Some(prev) if prev != t => {
                let all = Value::Array(lists.iter().map(|l| Value::Array(l.to_vec())).collect());
                return Err(SmpError::Other(format!(
                    "list element types are not identical: {}",
                    go_fmt(&all)
                )));
            }
            _ => {}
        }
    }
    match first {
        Some(t) => Ok(t == "map[string]interface {}"),
        None => Err(SmpError::Other(
            "no elements in any of the given slices".into(),
        )),
    }
}

/// upstream `mergeSlice`.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    meta: Meta,
    merge_key: &str,
    is_delete_list: bool,
) -> SmpResult<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let is_map = slice_element_type(&[&original, &patch])?;
    let (server_order, patch, merged) = if !is_map {
        if is_delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        let mut both = original.clone();
        both.extend(patch.iter().cloned());
        (original, patch, deduplicate_scalars(both))
    } else {
        if merge_key.is_empty() {
            return Err(SmpError::Other(format!(
                "cannot merge lists without merge key for {}",
                meta.name()
            )));
        }
        let (original, patch) = special_elements(original, patch, merge_key)?;
        let merged = merge_by_key(original.clone(), &patch, merge_key, meta)?;
        (original, patch, merged)
    };
    let (in_patch, server_only) = if merge_key.is_empty() {
        partition_primitives(&merged, &patch)
    } else {
        partition_maps(&merged, &patch, merge_key)?
    };
    normalize_element_order(
        in_patch,
        server_only,
        &patch,
        &server_order,
        merge_key,
        is_map,
    )
}

fn as_map(v: &Value) -> SmpResult<&Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| bad_arg_type("map[string]interface {}", v))
}

/// `$patch: delete` and `$patch: replace` elements (upstream `mergeSliceWithSpecialElements`).
fn special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> SmpResult<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::new();
    let mut replace = false;
    for item in patch {
        let map = as_map(&item)?;
        let Some(directive) = map.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let key = map
                    .get(merge_key)
                    .ok_or_else(|| no_merge_key(map, merge_key))?;
                let key = key.clone();
                for (i, v) in original.iter().enumerate() {
                    as_map(v)
                        .map_err(|_| SmpError::Other(format!("value for key {i} is not a map")))?;
                }
                original.retain(|v| v.get(merge_key) != Some(&key));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(SmpError::Other(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            _ => {
                return Err(SmpError::Other(format!(
                    "unknown patch type: {} in map: {}",
                    go_fmt(directive),
                    go_fmt(&item)
                )));
            }
        }
    }
    Ok(if replace {
        (plain, Vec::new())
    } else {
        (original, plain)
    })
}

/// Merges patch elements into the elements with the same merge key, appending new ones.
fn merge_by_key(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    meta: Meta,
) -> SmpResult<Vec<Value>> {
    for item in patch {
        let map = as_map(item)?;
        let key = map
            .get(merge_key)
            .ok_or_else(|| no_merge_key(map, merge_key))?;
        let found = find_by_key(&original, merge_key, key)?;
        match found {
            Some(i) => {
                let current = as_map(&original[i])?.clone();
                original[i] = Value::Object(merge_map(current, map.clone(), meta)?);
            }
            None => original.push(item.clone()),
        }
    }
    Ok(original)
}

fn find_by_key(list: &[Value], merge_key: &str, key: &Value) -> SmpResult<Option<usize>> {
    for (i, v) in list.iter().enumerate() {
        let map = v
            .as_object()
            .ok_or_else(|| SmpError::Other(format!("value for key {i} is not a map")))?;
        if map.get(merge_key) == Some(key) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// upstream's in-place deduplication, which moves the last element into a duplicate's slot.
fn deduplicate_scalars(mut s: Vec<Value>) -> Vec<Value> {
    let mut length = s.len() as isize - 1;
    let mut i: isize = 0;
    while i < length {
        let mut j = i + 1;
        while j <= length {
            if s[i as usize] == s[j as usize] {
                s[j as usize] = s[length as usize].clone();
                s.truncate(length as usize);
                length -= 1;
                j -= 1;
            }
            j += 1;
        }
        i += 1;
    }
    s
}

pub(crate) fn partition_primitives(list: &[Value], by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    list.iter().cloned().partition(|v| by.contains(v))
}

pub(crate) fn partition_maps(
    list: &[Value],
    by: &[Value],
    merge_key: &str,
) -> SmpResult<(Vec<Value>, Vec<Value>)> {
    let (mut in_by, mut rest) = (Vec::new(), Vec::new());
    for v in list {
        let map = as_map(v)?;
        let key = map
            .get(merge_key)
            .ok_or_else(|| no_merge_key(map, merge_key))?;
        if find_by_key(by, merge_key, key)?.is_some() {
            in_by.push(v.clone());
        } else {
            rest.push(v.clone());
        }
    }
    Ok((in_by, rest))
}

/// The position of an item in `order`, by merge key for objects (upstream `index`).
fn index_of(order: &[Value], item: &Value, merge_key: &str, is_map: bool) -> Option<usize> {
    let key = |v: &Value| -> Value {
        if is_map {
            v.get(merge_key).cloned().unwrap_or(Value::Null)
        } else {
            v.clone()
        }
    };
    let wanted = key(item);
    order.iter().position(|v| key(v) == wanted)
}

/// upstream `normalizeElementOrder`: patch items in patch order, server-only items in server
/// order, then the two merged by server position.
pub(crate) fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> SmpResult<Vec<Value>> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, is_map)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, is_map)?;
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(patch.len() + server_only.len());
    while i < server_only.len() || j < patch.len() {
        let take_left = if i >= server_only.len() {
            false
        } else if j >= patch.len() {
            true
        } else {
            let li = index_of(server_order, &server_only[i], merge_key, is_map);
            let ri = index_of(server_order, &patch[j], merge_key, is_map);
            matches!((li, ri), (Some(l), Some(r)) if l < r)
        };
        if take_left {
            out.push(server_only[i].clone());
            i += 1;
        } else {
            out.push(patch[j].clone());
            j += 1;
        }
    }
    Ok(out)
}

/// Sorts like upstream's `sort.SliceStable` with its comparator, which calls any item missing
/// from `order` "less" (an insertion sort reproduces it); `$patch: delete` items go last.
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> SmpResult<Vec<Value>> {
    let (mut to_sort, to_delete) = if is_map {
        for v in to_sort.iter().chain(order) {
            let map = as_map(v)?;
            if !map.contains_key(merge_key) {
                return Err(no_merge_key(map, merge_key));
            }
        }
        split_deletes(to_sort)?
    } else {
        (to_sort, Vec::new())
    };
    let mut keyed: Vec<(Option<usize>, Value)> = to_sort
        .drain(..)
        .map(|v| (index_of(order, &v, merge_key, is_map), v))
        .collect();
    for i in 1..keyed.len() {
        let mut j = i;
        while j > 0 {
            let less = match (keyed[j].0, keyed[j - 1].0) {
                (Some(a), Some(b)) => a < b,
                _ => true,
            };
            if !less {
                break;
            }
            keyed.swap(j, j - 1);
            j -= 1;
        }
    }
    let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
    out.extend(to_delete);
    Ok(out)
}

fn split_deletes(list: Vec<Value>) -> SmpResult<(Vec<Value>, Vec<Value>)> {
    let (mut keep, mut delete) = (Vec::new(), Vec::new());
    for v in list {
        let is_delete = as_map(&v)?.get(DIRECTIVE).and_then(Value::as_str) == Some("delete");
        if is_delete {
            delete.push(v)
        } else {
            keep.push(v)
        }
    }
    Ok((keep, delete))
}

/// Checks that a patch list follows its `$setElementOrder` list (upstream
/// `validatePatchWithSetOrderList`).
pub(crate) fn validate_set_order(
    patch: &[Value],
    order: &[Value],
    merge_key: &str,
) -> SmpResult<()> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let plain = if merge_key.is_empty() {
        patch.to_vec()
    } else {
        split_deletes(patch.to_vec())?.0
    };
    let (mut pi, mut si) = (0, 0);
    while pi < plain.len() && si < order.len() {
        if plain[pi].get(DIRECTIVE).is_some() {
            pi += 1;
            continue;
        }
        let equal = if merge_key.is_empty() {
            plain[pi] == order[si]
        } else {
            let (l, r) = (as_map(&plain[pi])?, as_map(&order[si])?);
            let lk = l.get(merge_key).ok_or_else(|| no_merge_key(l, merge_key))?;
            let rk = r.get(merge_key).ok_or_else(|| no_merge_key(r, merge_key))?;
            lk == rk
        };
        if equal {
            pi += 1;
        }
        si += 1;
    }
    if pi < plain.len() && si >= order.len() {
        return Err(SmpError::Other(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            go_fmt(&Value::Array(patch.to_vec())),
            go_fmt(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}
