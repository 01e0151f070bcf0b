//! Pruning cases, checked against apiextensions-apiserver
//! `pkg/apiserver/schema/pruning/algorithm.go` (paths as `UnknownFieldPathOptions` records
//! them), `schema/objectmeta/coerce.go` and `schema/defaulting/prunenulls.go`.

use serde_json::{Value, json};

use super::prune;

fn pruned(schema: &Value, mut object: Value) -> (Value, Vec<String>) {
    let unknown = prune(schema, &mut object);
    (object, unknown)
}

#[test]
fn unknown_fields_are_removed_and_listed_sorted() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "keep": {"type": "string"},
        "list": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "integer"}}}},
        "nested": {"type": "object", "properties": {"apiVersion": {"type": "string"}}},
    }}}});
    let object = json!({
        "apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "junk": 1},
        "zzz": 1,
        "spec": {"keep": "k", "drop": 1, "list": [{"name": "a", "x": 1}, {"y": 2}],
                 "map": {"k": {"v": 1, "w": 2}}, "nested": {"apiVersion": "x", "kind": "not meta here"}},
    });
    let (object, unknown) = pruned(&schema, object);
    assert_eq!(
        unknown,
        [
            "metadata.junk",
            "spec.drop",
            "spec.list[0].x",
            "spec.list[1].y",
            "spec.map.k.w",
            "spec.nested.kind",
            "zzz"
        ]
    );
    assert_eq!(
        object,
        json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"},
               "spec": {"keep": "k", "list": [{"name": "a"}, {}], "map": {"k": {"v": 1}}, "nested": {"apiVersion": "x"}}})
    );
}

#[test]
fn preserve_unknown_fields_keeps_unknown_but_prunes_known() {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}},
    }}});
    let (object, unknown) = pruned(
        &schema,
        json!({"spec": {"free": {"any": [1]}, "known": {"a": "x", "b": "y"}}}),
    );
    assert_eq!(unknown, ["spec.known.b"]);
    assert_eq!(
        object,
        json!({"spec": {"free": {"any": [1]}, "known": {"a": "x"}}})
    );
}

#[test]
fn embedded_resources_keep_their_type_and_metadata() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "properties": {"spec": {"type": "object", "properties": {"image": {"type": "string"}}}}},
        "templates": {"type": "object", "additionalProperties": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}},
    }}}});
    let object = json!({"spec": {
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1}, "spec": {"image": "i", "extra": 1}, "status": {}},
        "templates": {"one": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": "b"}, "nope": true}, "anything": 1}},
    }});
    let (object, unknown) = pruned(&schema, object);
    assert_eq!(
        unknown,
        [
            "spec.template.spec.extra",
            "spec.template.status",
            "spec.template.metadata.bogus",
            "spec.templates[one].metadata.nope"
        ]
    );
    assert_eq!(
        object["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"image": "i"}})
    );
    assert_eq!(object["spec"]["templates"]["one"]["anything"], 1);
}

#[test]
fn schemaless_members_lose_their_content() {
    // `additionalProperties: true` has no schema: pruning empties objects below it.
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "additionalProperties": true}}});
    let (object, unknown) = pruned(&schema, json!({"spec": {"a": {"b": 1}, "c": 2}}));
    assert_eq!(unknown, ["spec.a.b"]);
    assert_eq!(object, json!({"spec": {"a": {}, "c": 2}}));
}

#[test]
fn non_nullable_nulls_without_default_are_dropped_silently() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "plain": {"type": "string"},
        "nullable": {"type": "string", "nullable": true},
        "defaulted": {"type": "string", "default": "d"},
        "map": {"type": "object", "additionalProperties": {"type": "string"}},
    }}}});
    let (object, unknown) = pruned(
        &schema,
        json!({"spec": {"plain": null, "nullable": null, "defaulted": null, "map": {"k": null}}}),
    );
    assert!(unknown.is_empty());
    assert_eq!(
        object,
        json!({"spec": {"nullable": null, "defaulted": null, "map": {}}})
    );
}
