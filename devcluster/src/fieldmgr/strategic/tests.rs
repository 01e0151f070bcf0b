//! Strategic merge patches as kubectl 1.32 sends them, applied with the Deployment schema.

use serde_json::{Value, json};

use super::super::testutil::{builtin, deployment};
use super::*;

fn live() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"}, "finalizers": ["a/x", "b/y"]},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"spec": {
                "containers": [
                    {"name": "a", "image": "a:1", "args": ["x", "y"],
                     "env": [{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}],
                     "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                    {"name": "b", "image": "b:1"}
                ],
                "volumes": [{"name": "data", "emptyDir": {}}]
            }}
        }
    })
}

fn smp(patch: Value) -> Result<Value, PatchError> {
    strategic_merge_patch(&live(), patch.to_string().as_bytes(), deployment())
}

fn containers(v: &Value) -> &Value {
    &v["spec"]["template"]["spec"]["containers"]
}

#[test]
fn kubectl_patches() {
    type Check = fn(&Value);
    let cases: Vec<(&str, Value, Check)> = vec![
        (
            "three-way with $setElementOrder reorders and updates",
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                "containers": [{"name": "b", "image": "b:2"}]}}}}),
            |v| {
                assert_eq!(containers(v)[0], json!({"name": "b", "image": "b:2"}));
                assert_eq!(containers(v)[1]["name"], "a");
            },
        ),
        (
            "$patch: delete removes a container",
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "b"}],
                "containers": [{"$patch": "delete", "name": "a"}]}}}}),
            |v| assert_eq!(containers(v), &json!([{"name": "b", "image": "b:1"}])),
        ),
        (
            "$retainKeys on strategy drops rollingUpdate",
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}}),
            |v| assert_eq!(v["spec"]["strategy"], json!({"type": "Recreate"})),
        ),
        (
            "$retainKeys on a volume swaps its source",
            json!({"spec": {"template": {"spec": {"volumes": [
                {"$retainKeys": ["configMap", "name"], "name": "data", "configMap": {"name": "cfg"}}]}}}}),
            |v| {
                assert_eq!(
                    v["spec"]["template"]["spec"]["volumes"],
                    json!([{"name": "data", "configMap": {"name": "cfg"}}])
                )
            },
        ),
        (
            "env merges by name, ports by containerPort, args replace",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a",
                "env": [{"name": "E2", "value": "two"}, {"name": "E3", "value": "3"}],
                "ports": [{"containerPort": 81}], "args": ["z"]}]}}}}),
            |v| {
                let a = &containers(v)[0];
                assert_eq!(
                    a["env"],
                    json!([{"name": "E1", "value": "1"}, {"name": "E2", "value": "two"}, {"name": "E3", "value": "3"}])
                );
                assert_eq!(a["ports"].as_array().map(Vec::len), Some(2));
                assert_eq!(a["args"], json!(["z"]));
                assert_eq!(containers(v)[1]["name"], "b");
            },
        ),
        (
            "null deletes and $deleteFromPrimitiveList",
            json!({"metadata": {"labels": {"tier": null}, "$deleteFromPrimitiveList/finalizers": ["a/x"]},
                   "spec": {"replicas": null}}),
            |v| {
                assert_eq!(v["metadata"]["labels"], json!({"app": "web"}));
                assert_eq!(v["metadata"]["finalizers"], json!(["b/y"]));
                assert!(v["spec"].get("replicas").is_none());
            },
        ),
        (
            "finalizers merge as a set, in upstream's order",
            json!({"metadata": {"finalizers": ["c/z", "a/x"]}}),
            |v| assert_eq!(v["metadata"]["finalizers"], json!(["c/z", "a/x", "b/y"])),
        ),
        (
            "$patch: replace on a map and a list",
            json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}},
                   "spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": "c"}]}}}}),
            |v| {
                assert_eq!(v["metadata"]["labels"], json!({"only": "this"}));
                assert_eq!(containers(v), &json!([{"name": "c", "image": "c"}]));
            },
        ),
        (
            "new subtrees drop nulls and directives",
            json!({"spec": {"paused": true, "minReadySeconds": null,
                "revisionHistoryLimit": 3, "selector": {"matchLabels": {"app": "web", "gone": null}}}}),
            |v| {
                assert_eq!(
                    v["spec"]["selector"],
                    json!({"matchLabels": {"app": "web"}})
                );
                assert_eq!(v["spec"]["paused"], true);
            },
        ),
    ];
    for (name, patch, check) in cases {
        let out = smp(patch).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        check(&out);
    }
}

#[test]
fn malformed_patches_answer_like_upstream() {
    let cases: Vec<(&[u8], u16, &str)> = vec![
        (b"{not json", 400, "invalid JSON patch"),
        (
            b"[1]",
            400,
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            br#"{"spec":{"strategy":{"$retainKeys":"type"}}}"#,
            400,
            "invalid patch format of retainKeys",
        ),
        (
            br#"{"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{}}}}"#,
            400,
            "invalid patch format of retainKeys",
        ),
        (
            br#"{"metadata":{"$deleteFromPrimitiveListfinalizers":["a/x"]}}"#,
            400,
            "invalid patch format of primitive list",
        ),
        (
            br#"{"spec":{"template":{"spec":{"$setElementOrderxcontainers":[]}}}}"#,
            400,
            "invalid patch format of setElementOrder list",
        ),
        (
            br#"{"metadata":{"finalizers":[["a"]]}}"#,
            500,
            "list element types are not identical: [[a/x b/y] [[a]]]",
        ),
        (
            br#"{"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}"#,
            500,
            "map: map[image:x] does not contain declared merge key: name",
        ),
        (
            br#"{"metadata":{"labels":{"$patch":"merge"}}}"#,
            500,
            "unknown patch type: merge in map: map[$patch:merge]",
        ),
        (
            br#"{"spec":{"template":{"spec":{"containers":[{"name":"a","$patch":"merge"}]}}}}"#,
            500,
            "merging lists cannot yet be specified in the patch",
        ),
        (
            br#"{"spec":{"strategy":{"bogus":{"a":1}},"template":{"spec":{"nodeName":"n"}}}}"#,
            200,
            "",
        ),
    ];
    for (patch, code, message) in cases {
        match strategic_merge_patch(&live(), patch, deployment()) {
            Ok(_) => assert_eq!(code, 200, "{}", String::from_utf8_lossy(patch)),
            Err(e) => assert_eq!(
                (e.status_code(), e.to_string().as_str()),
                (code, message),
                "{}",
                String::from_utf8_lossy(patch)
            ),
        }
    }
    let mut empty_list = live();
    empty_list["metadata"]["finalizers"] = json!([]);
    let err = strategic_merge_patch(
        &empty_list,
        br#"{"metadata":{"finalizers":[["a"]]}}"#,
        deployment(),
    )
    .unwrap_err();
    assert_eq!((err.status_code(), err.reason()), (422, "Invalid"));
    let mut with_map = live();
    with_map["spec"]["bogus"] = json!({"a": 1});
    let err = strategic_merge_patch(&with_map, br#"{"spec":{"bogus":{"b":2}}}"#, deployment())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to find api field in struct DeploymentSpec for the json field \"bogus\""
    );
}

#[test]
fn service_ports_and_pod_lists() {
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}, {"port": 443, "protocol": "TCP"}]}});
    let patch = br#"{"spec":{"$setElementOrder/ports":[{"port":443},{"port":80}],"ports":[{"port":80,"targetPort":9090}]}}"#;
    let out = strategic_merge_patch(&svc, patch, builtin("io.k8s.api.core.v1.Service")).unwrap();
    assert_eq!(
        out["spec"]["ports"],
        json!([{"port": 443, "protocol": "TCP"}, {"port": 80, "protocol": "TCP", "targetPort": 9090}])
    );
    assert_eq!(
        PatchError::unsupported_patch_type(super::super::CUSTOM_RESOURCE_PATCH_TYPES).to_string(),
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
}
