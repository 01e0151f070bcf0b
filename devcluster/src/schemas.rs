//! The built-in kinds' OpenAPI schemas (`schemas/kubernetes.json`, generated from the
//! Kubernetes project's published definitions by `schemas/generate.py`), and the one thing the
//! server itself reads from them: which fields of a built-in object are unknown, so
//! `fieldValidation=Strict` refuses them and `Warn` names them, as a real server does.

use std::sync::LazyLock;

use serde_json::{Map, Value};

const DOCUMENT: &str = include_str!("../schemas/kubernetes.json");

/// The parsed definitions, by name (`io.k8s.api.core.v1.Pod`).
pub struct BuiltinSchemas {
    pub kubernetes_version: String,
    pub definitions: Map<String, Value>,
}

static SCHEMAS: LazyLock<BuiltinSchemas> = LazyLock::new(|| {
    let parsed: Value = serde_json::from_str(DOCUMENT).unwrap_or_default();
    BuiltinSchemas {
        kubernetes_version: parsed["kubernetesVersion"]
            .as_str()
            .unwrap_or("v1.35.0")
            .to_string(),
        definitions: parsed["schemas"].as_object().cloned().unwrap_or_default(),
    }
});

pub fn builtin() -> &'static BuiltinSchemas {
    &SCHEMAS
}

const REF_PREFIX: &str = "#/components/schemas/";

// === impl BuiltinSchemas ===

impl BuiltinSchemas {
    /// Follow `$ref` (and a lone `allOf: [{$ref}]`) to the schema it names.
    pub fn resolve<'a>(&'a self, mut node: &'a Value) -> &'a Value {
        for _ in 0..8 {
            let target = node
                .get("$ref")
                .or_else(|| node.pointer("/allOf/0/$ref"))
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(REF_PREFIX))
                .and_then(|name| self.definitions.get(name));
            match target {
                Some(next) => node = next,
                None => break,
            }
        }
        node
    }

    /// Remove fields the definition does not know from `object`; returns their paths
    /// (`spec.foo`, `spec.ports[0].bar`).
    pub fn prune_unknown(&self, definition: &str, object: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        if let Some(schema) = self.definitions.get(definition) {
            self.prune_node(schema, object, "", &mut unknown);
        }
        unknown.sort();
        unknown
    }

    fn prune_node(&self, schema: &Value, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
        let schema = self.resolve(schema);
        if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
            return;
        }
        match value {
            Value::Object(map) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    let keys: Vec<String> = map.keys().cloned().collect();
                    for key in keys {
                        let child = join(path, &key);
                        match properties.get(&key) {
                            Some(sub) => {
                                if let Some(v) = map.get_mut(&key) {
                                    self.prune_node(sub, v, &child, unknown);
                                }
                            }
                            // Every object carries these even where the schema is silent.
                            None if path.is_empty()
                                && matches!(key.as_str(), "apiVersion" | "kind") => {}
                            None => {
                                map.remove(&key);
                                unknown.push(child);
                            }
                        }
                    }
                } else if let Some(values) =
                    schema.get("additionalProperties").filter(|a| a.is_object())
                {
                    for (key, v) in map.iter_mut() {
                        self.prune_node(values, v, &format!("{path}[{key}]"), unknown);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter_mut().enumerate() {
                        self.prune_node(item_schema, item, &format!("{path}[{i}]"), unknown);
                    }
                }
            }
            _ => {}
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_definitions_load() {
        let s = builtin();
        assert!(s.definitions.contains_key("io.k8s.api.apps.v1.Deployment"));
        assert!(s.kubernetes_version.starts_with("v1."));
    }

    #[test]
    fn unknown_fields_of_builtin_objects_are_found_at_any_depth() {
        let mut svc = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "labels": {"app": "web"}, "colour": "blue"},
            "spec": {"ports": [{"port": 80, "prot": "TCP"}], "selector": {"app": "web"}},
            "extra": 1,
        });
        let unknown = builtin().prune_unknown("io.k8s.api.core.v1.Service", &mut svc);
        assert_eq!(unknown, ["extra", "metadata.colour", "spec.ports[0].prot"]);
        assert!(svc.get("extra").is_none());
        assert_eq!(svc["spec"]["selector"]["app"], "web");
    }
}
