//! JSON Patch and merge patch with the API server's answers.

use serde_json::{Value, json};

use super::*;

fn doc() -> Value {
    json!({"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"replicas": 1, "list": [1, 2, 3]}})
}

#[test]
fn json_patch_operations() {
    let cases: Vec<(Value, Value)> = vec![
        (
            json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
            json!(3),
        ),
        (
            json!([{"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "add", "path": "/spec/replicas", "value": 2}]),
            json!(2),
        ),
        // evanphx v4: replace of a missing object key adds it.
        (
            json!([{"op": "replace", "path": "/spec/paused", "value": true}]),
            json!(1),
        ),
        (json!([{"op": "remove", "path": "/spec/list/-1"}]), json!(1)),
        (
            json!([{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/b"}]),
            json!(1),
        ),
        (
            json!([{"op": "test", "path": "/spec/missing", "value": null}]),
            json!(1),
        ),
    ];
    for (patch, replicas) in cases {
        let out = json_patch(&doc(), patch.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{patch}: {e:?}"));
        assert_eq!(out["spec"]["replicas"], replicas, "{patch}");
    }
    let out = json_patch(&doc(), br#"[{"op":"replace","path":"/spec/paused","value":true},{"op":"remove","path":"/spec/list/-1"}]"#).unwrap();
    assert_eq!(out["spec"]["paused"], true);
    assert_eq!(out["spec"]["list"], json!([1, 2]));
}

#[test]
fn json_patch_errors() {
    let cases: Vec<(&[u8], u16, &str)> = vec![
        (b"nope", 400, "invalid JSON patch"),
        (
            br#"{"op":"add"}"#,
            400,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        (
            br#"["add"]"#,
            400,
            "json: cannot unmarshal string into Go value of type jsonpatch.Operation",
        ),
        (
            br#"[{"op":"test","path":"/spec/replicas","value":2}]"#,
            422,
            "the server rejected our request due to an error in our request",
        ),
        (
            br#"[{"op":"remove","path":"/spec/nothing"}]"#,
            422,
            "the server rejected our request due to an error in our request",
        ),
        (
            br#"[{"op":"add","path":"/no/such/parent","value":1}]"#,
            422,
            "the server rejected our request due to an error in our request",
        ),
        (
            br#"[{"op":"frobnicate","path":"/x"}]"#,
            422,
            "the server rejected our request due to an error in our request",
        ),
        (br#"[{"op":"replace","path":"","value":[1]}]"#, 422, ""),
    ];
    for (patch, code, message) in cases {
        let err = json_patch(&doc(), patch).unwrap_err();
        assert_eq!(
            err.status_code(),
            code,
            "{}",
            String::from_utf8_lossy(patch)
        );
        if !message.is_empty() {
            assert_eq!(err.to_string(), message);
        }
        assert_eq!(err.to_status()["code"], code);
    }
    let many = format!(
        "[{}]",
        vec![r#"{"op":"test","path":"/spec/replicas","value":1}"#; 10_001].join(",")
    );
    let err = json_patch(&doc(), many.as_bytes()).unwrap_err();
    assert_eq!(err.status_code(), 413);
    assert_eq!(
        err.to_string(),
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    match json_patch(
        &doc(),
        br#"[{"op":"test","path":"/spec/replicas","value":2}]"#,
    )
    .unwrap_err()
    {
        PatchError::Unprocessable { detail } => assert!(
            detail.starts_with("test operation does not apply"),
            "{detail}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn merge_patch_cases() {
    let out = merge_patch(
        &doc(),
        br#"{"metadata":{"labels":{"a":null,"b":"2"}},"spec":{"list":[{"k":null,"v":1}]}}"#,
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
    assert_eq!(out["spec"]["list"], json!([{"v": 1}]));
    let cases: Vec<(&[u8], u16, &str)> = vec![
        (b"{", 400, "invalid JSON patch"),
        (b"null", 400, "Invalid JSON Patch"),
        (b"5", 400, "Invalid JSON Patch"),
    ];
    for (patch, code, message) in cases {
        let err = merge_patch(&doc(), patch).unwrap_err();
        assert_eq!(
            (err.status_code(), err.to_string().as_str()),
            (code, message)
        );
    }
    let err = merge_patch(&doc(), b"[1]").unwrap_err();
    assert_eq!((err.status_code(), err.reason()), (422, "Invalid"));
}
