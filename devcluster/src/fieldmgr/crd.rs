//! The schema the API server serves for a custom resource: the CRD version's structural
//! `openAPIV3Schema` plus the `apiVersion`, `kind` and `metadata` every object has.

use serde_json::{Map, Value};

/// A CRD version's `openAPIV3Schema` with the properties the API server adds for every custom
/// resource: `apiVersion`, `kind` and `metadata`. Use it with the built-in definitions
/// (`Schema::new(Some(defs), &node)`) so `metadata` is the real `ObjectMeta`; without them,
/// `metadata` falls back to a small inline schema with ObjectMeta's list and map types.
pub fn custom_resource_schema(open_api_v3_schema: &Value, with_definitions: bool) -> Value {
    let mut node = open_api_v3_schema.clone();
    let meta = if with_definitions {
        serde_json::json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"})
    } else {
        serde_json::json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["uid"], "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }
        })
    };
    if let Some(map) = node.as_object_mut() {
        map.entry("type")
            .or_insert_with(|| Value::String("object".into()));
        let properties = map
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert("apiVersion".into(), serde_json::json!({"type": "string"}));
            properties.insert("kind".into(), serde_json::json!({"type": "string"}));
            properties.insert("metadata".into(), meta);
        }
    }
    node
}
