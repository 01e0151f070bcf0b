//! Correlation of a new object with the old one on update, as apiserver
//! `pkg/cel/common/equality.go` (`CorrelatedObject`) and `maplist.go` pair them: members of
//! objects by key, items of `x-kubernetes-list-type: map` lists by their keys, nothing else.
//! Errors inside a correlated value that did not change are ratcheted (dropped), and CEL
//! transition rules see `oldSelf` only where a correlated old value exists.

use serde_json::Value;

use super::schema::Schema;

#[derive(Clone, Copy, Debug)]
pub struct Correlation<'a> {
    pub new: &'a Value,
    pub old: &'a Value,
    schema: Option<Schema<'a>>,
}

impl<'a> Correlation<'a> {
    pub fn new(new: &'a Value, old: &'a Value, schema: Option<Schema<'a>>) -> Self {
        Self { new, old, schema }
    }

    /// The correlated member `field` of two objects (`CorrelatedObject.Key`).
    pub fn key(&self, field: &str) -> Option<Correlation<'a>> {
        let schema = self.schema?;
        let new = self.new.as_object()?.get(field)?;
        let old = self.old.as_object()?.get(field)?;
        let member_schema = schema.member(field)?;
        Some(Correlation::new(new, old, Some(member_schema)))
    }

    /// The old item correlated with new item `index` (`CorrelatedObject.Index`): only lists
    /// of `x-kubernetes-list-type: map` correlate, by their map keys.
    pub fn index(&self, index: usize) -> Option<Correlation<'a>> {
        let schema = self.schema?;
        let new_items = self.new.as_array()?;
        let old_items = self.old.as_array()?;
        let item = new_items.get(index)?;
        let old = map_list_lookup(schema, old_items, item)?;
        Some(Correlation::new(item, old, Some(schema.items()?)))
    }

    fn is_map_list(&self) -> bool {
        self.schema.is_some_and(|s| is_keyed_map_list(s))
    }

    /// `CorrelatedObject.CachedDeepEqual`: whether the value is unchanged.
    pub fn deep_equal(&self) -> bool {
        match (self.new, self.old) {
            (Value::Null, Value::Null) => true,
            (Value::Null, _) | (_, Value::Null) => false,
            (Value::Array(new), Value::Array(old)) => {
                if new.len() != old.len() {
                    return false;
                }
                for index in 0..new.len() {
                    match self.index(index) {
                        None if self.is_map_list() => return false,
                        None => return new == old,
                        Some(child) if !child.deep_equal() => return false,
                        Some(_) => {}
                    }
                }
                true
            }
            (Value::Object(new), Value::Object(old)) => {
                new.len() == old.len()
                    && new
                        .keys()
                        .all(|key| self.key(key).is_some_and(|child| child.deep_equal()))
            }
            (Value::Array(_), _)
            | (_, Value::Array(_))
            | (Value::Object(_), _)
            | (_, Value::Object(_)) => false,
            (new, old) => new == old,
        }
    }
}

fn is_keyed_map_list(schema: Schema) -> bool {
    schema.type_name() == "array"
        && schema.list_type() == Some("map")
        && !schema.list_map_keys().is_empty()
}

/// The composite key of a map-list item: every key field present and a scalar.
fn map_list_key<'v>(schema: Schema, item: &'v Value) -> Option<Vec<&'v Value>> {
    let object = item.as_object()?;
    schema
        .list_map_keys()
        .into_iter()
        .map(|key| {
            object
                .get(key)
                .filter(|v| matches!(v, Value::Bool(_) | Value::Number(_) | Value::String(_)))
        })
        .collect()
}

/// `MapList.Get`: the first old item with the same keys as `item`.
pub fn map_list_lookup<'a>(
    schema: Schema,
    old_items: &'a [Value],
    item: &Value,
) -> Option<&'a Value> {
    if !is_keyed_map_list(schema) {
        return None;
    }
    let key = map_list_key(schema, item)?;
    old_items
        .iter()
        .find(|old| map_list_key(schema, old).is_some_and(|k| k == key))
}
