//! A read-only view of one structural-schema node (a CRD's `openAPIV3Schema` or any node
//! below it) as JSON, with the typed accessors the validators, pruner and defaulter share.
//! Malformed keywords read as absent: a bad schema never makes the server panic.

use serde_json::{Map, Value};

/// `additionalProperties` of a node.
#[derive(Clone, Copy, Debug)]
pub enum AdditionalProperties<'a> {
    Absent,
    /// `true` / `false` without a schema.
    Allowed(bool),
    Schema(Schema<'a>),
}

/// One `x-kubernetes-validations` entry.
#[derive(Clone, Debug, Default)]
pub struct Rule {
    pub rule: String,
    pub message: String,
    pub message_expression: String,
    pub reason: String,
    pub field_path: String,
    pub optional_old_self: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct Schema<'a> {
    node: &'a Value,
}

impl<'a> Schema<'a> {
    pub fn new(node: &'a Value) -> Self {
        Self { node }
    }

    fn get(&self, keyword: &str) -> Option<&'a Value> {
        self.node.get(keyword)
    }

    fn flag(&self, keyword: &str) -> bool {
        self.get(keyword).and_then(Value::as_bool).unwrap_or(false)
    }

    fn text(&self, keyword: &str) -> &'a str {
        self.get(keyword).and_then(Value::as_str).unwrap_or("")
    }

    /// `type`, or `""` when absent.
    pub fn type_name(&self) -> &'a str {
        self.text("type")
    }

    pub fn format(&self) -> &'a str {
        self.text("format")
    }

    pub fn pattern(&self) -> Option<&'a str> {
        self.get("pattern").and_then(Value::as_str)
    }

    pub fn nullable(&self) -> bool {
        self.flag("nullable")
    }

    pub fn int_or_string(&self) -> bool {
        self.flag("x-kubernetes-int-or-string")
    }

    pub fn preserve_unknown_fields(&self) -> bool {
        self.flag("x-kubernetes-preserve-unknown-fields")
    }

    pub fn embedded_resource(&self) -> bool {
        self.flag("x-kubernetes-embedded-resource")
    }

    pub fn exclusive_maximum(&self) -> bool {
        self.flag("exclusiveMaximum")
    }

    pub fn exclusive_minimum(&self) -> bool {
        self.flag("exclusiveMinimum")
    }

    pub fn unique_items(&self) -> bool {
        self.flag("uniqueItems")
    }

    /// A numeric keyword (`maximum`, `minimum`, `multipleOf`).
    pub fn number(&self, keyword: &str) -> Option<f64> {
        self.get(keyword).and_then(Value::as_f64)
    }

    /// A count keyword (`maxLength`, `minItems`, `maxProperties`, ...).
    pub fn count(&self, keyword: &str) -> Option<i64> {
        let value = self.get(keyword)?;
        value.as_i64().or_else(|| value.as_f64().map(|f| f as i64))
    }

    pub fn properties(&self) -> Option<&'a Map<String, Value>> {
        self.get("properties").and_then(Value::as_object)
    }

    /// Property names, sorted (upstream iterates a Go map; sorting keeps output stable).
    pub fn property_names(&self) -> Vec<&'a str> {
        let mut names: Vec<&str> = self
            .properties()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        names.sort_unstable();
        names
    }

    pub fn property(&self, name: &str) -> Option<Schema<'a>> {
        self.properties().and_then(|p| p.get(name)).map(Schema::new)
    }

    pub fn items(&self) -> Option<Schema<'a>> {
        self.get("items")
            .filter(|items| items.is_object())
            .map(Schema::new)
    }

    pub fn additional_properties(&self) -> AdditionalProperties<'a> {
        match self.get("additionalProperties") {
            None | Some(Value::Null) => AdditionalProperties::Absent,
            Some(Value::Bool(allowed)) => AdditionalProperties::Allowed(*allowed),
            Some(schema) => AdditionalProperties::Schema(Schema::new(schema)),
        }
    }

    /// The schema of `additionalProperties` when it is one.
    pub fn additional_properties_schema(&self) -> Option<Schema<'a>> {
        match self.additional_properties() {
            AdditionalProperties::Schema(schema) => Some(schema),
            _ => None,
        }
    }

    /// The schema a member `key` of this object is checked against.
    pub fn member(&self, key: &str) -> Option<Schema<'a>> {
        self.property(key)
            .or_else(|| self.additional_properties_schema())
    }

    pub fn required(&self) -> Vec<&'a str> {
        self.strings("required")
    }

    pub fn enum_values(&self) -> Option<&'a Vec<Value>> {
        self.get("enum").and_then(Value::as_array)
    }

    pub fn default_value(&self) -> Option<&'a Value> {
        self.get("default")
    }

    /// `allOf`, `anyOf` or `oneOf`.
    pub fn subschemas(&self, keyword: &str) -> Vec<Schema<'a>> {
        self.get(keyword)
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter(|s| s.is_object())
                    .map(Schema::new)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn not(&self) -> Option<Schema<'a>> {
        self.get("not").filter(|s| s.is_object()).map(Schema::new)
    }

    pub fn list_type(&self) -> Option<&'a str> {
        self.get("x-kubernetes-list-type").and_then(Value::as_str)
    }

    pub fn list_map_keys(&self) -> Vec<&'a str> {
        self.strings("x-kubernetes-list-map-keys")
    }

    pub fn rules(&self) -> Vec<Rule> {
        let Some(list) = self
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        else {
            return Vec::new();
        };
        list.iter()
            .map(|entry| {
                let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or("");
                Rule {
                    rule: text("rule").to_string(),
                    message: text("message").to_string(),
                    message_expression: text("messageExpression").to_string(),
                    reason: text("reason").to_string(),
                    field_path: text("fieldPath").to_string(),
                    optional_old_self: entry
                        .get("optionalOldSelf")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                }
            })
            .collect()
    }

    pub fn has_rules(&self) -> bool {
        self.get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .is_some_and(|rules| !rules.is_empty())
    }

    fn strings(&self, keyword: &str) -> Vec<&'a str> {
        self.get(keyword)
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }
}

/// The keys of an object in sorted order, so results never depend on map iteration order.
pub fn sorted_keys(map: &Map<String, Value>) -> Vec<&String> {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_unstable();
    keys
}
