//! Server-side printing, as `kubectl get` asks for it (`Accept: application/json;as=Table;
//! v=v1;g=meta.k8s.io`): the BackendPool CRD's printer columns with typed cells (integers as
//! numbers, missing values as null, the Panic condition found by a JSONPath filter, Age as a
//! human duration), rows carrying PartialObjectMetadata or the object (`includeObject`), watch
//! events as one-row Tables whose column definitions come only once, and the built-in
//! printer of Events.

mod common;

use common::*;
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn column_names(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .expect("column definitions")
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn is_age(cell: &Value) -> bool {
    cell.as_str().is_some_and(|s| {
        regex::Regex::new(r"^[0-9]+(s|m[0-9]*s?)$")
            .unwrap()
            .is_match(s)
    })
}

async fn pools() -> Fixture {
    let fx = start().await;
    fx.install_crd().await;
    fx.namespace("shop").await;
    fx.create_pool(
        "shop",
        "api",
        json!({"service": {"name": "api", "port": "http"}}),
    )
    .await;
    fx.create_pool(
        "shop",
        "web",
        json!({"service": {"name": "web", "port": 80}}),
    )
    .await;
    let status = json!({"status": {
        "endpoints": {"total": 4, "healthy": 3, "ejected": 1, "probation": 0, "draining": 0},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Panic", "status": "False", "reason": "P", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    fx.patch(
        &format!("{}/web/status", pools_path("shop")),
        "application/merge-patch+json",
        &status,
    )
    .await
    .expect(200);
    fx
}

#[tokio::test]
async fn a_pool_table_has_the_crds_printer_columns_and_typed_cells() {
    let fx = pools().await;
    let table = fx.get_as(&pools_path("shop"), TABLE).await.expect(200);
    assert_eq!(
        (table["kind"].as_str(), table["apiVersion"].as_str()),
        (Some("Table"), Some("meta.k8s.io/v1"))
    );
    assert_eq!(
        column_names(&table),
        ["Name", "Service", "Healthy", "Ejected", "Panic", "Age"]
    );
    let types: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["string", "string", "integer", "integer", "string", "date"]
    );
    assert_eq!(table["columnDefinitions"][0]["format"], "name");
    assert_eq!(
        table["columnDefinitions"][2]["description"],
        "Custom resource definition column (in JSONPath format): .status.endpoints.healthy"
    );
    let rows = table["rows"].as_array().unwrap();
    let cells: Vec<Vec<Value>> = rows
        .iter()
        .map(|r| r["cells"].as_array().unwrap()[..5].to_vec())
        .collect();
    assert_eq!(
        cells,
        [
            vec![
                json!("api"),
                json!("api"),
                Value::Null,
                Value::Null,
                Value::Null
            ],
            vec![
                json!("web"),
                json!("web"),
                json!(3),
                json!(1),
                json!("False")
            ],
        ]
    );
    assert!(rows.iter().all(|r| is_age(&r["cells"][5])), "{rows:?}");
    let meta_row = &rows[1]["object"];
    assert_eq!(
        (meta_row["kind"].as_str(), meta_row["apiVersion"].as_str()),
        (Some("PartialObjectMetadata"), Some("meta.k8s.io/v1"))
    );
    assert_eq!(meta_row["metadata"]["name"], "web");
    assert!(meta_row.get("spec").is_none());
    assert!(table["metadata"]["resourceVersion"].is_string());
}

#[tokio::test]
async fn include_object_chooses_what_each_row_carries() {
    let fx = pools().await;
    let one = format!("{}/web", pools_path("shop"));
    let cases = [
        ("", "PartialObjectMetadata"),
        ("?includeObject=Metadata", "PartialObjectMetadata"),
        ("?includeObject=Object", "BackendPool"),
    ];
    for (query, kind) in cases {
        let table = fx.get_as(&format!("{one}{query}"), TABLE).await.expect(200);
        assert_eq!(table["rows"].as_array().unwrap().len(), 1);
        assert_eq!(table["rows"][0]["object"]["kind"], kind, "{query}");
    }
    let full = fx
        .get_as(&format!("{one}?includeObject=Object"), TABLE)
        .await
        .expect(200);
    assert_eq!(full["rows"][0]["object"]["spec"]["service"]["port"], 80);
    let bare = fx
        .get_as(&format!("{one}?includeObject=None"), TABLE)
        .await
        .expect(200);
    assert!(bare["rows"][0].get("object").is_none_or(Value::is_null));
    let metadata = fx
        .get_as(
            &pools_path("shop"),
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        )
        .await
        .expect(200);
    assert_eq!(metadata["kind"], "PartialObjectMetadataList");
    assert_eq!(metadata["items"][0]["kind"], "PartialObjectMetadata");
}

#[tokio::test]
async fn a_table_watch_sends_column_definitions_only_once() {
    let fx = pools().await;
    let mut watch = fx.watch_as(&pools_path("shop"), "", Some(TABLE)).await;
    let first = watch.next().await.unwrap();
    assert_eq!(
        (first["type"].as_str(), first["object"]["kind"].as_str()),
        (Some("ADDED"), Some("Table"))
    );
    assert_eq!(column_names(&first["object"]).len(), 6);
    assert_eq!(first["object"]["rows"][0]["cells"][0], "api");
    let second = watch.next().await.unwrap();
    assert_eq!(second["object"]["rows"][0]["cells"][0], "web");
    assert!(
        second["object"]
            .get("columnDefinitions")
            .is_none_or(Value::is_null),
        "{second}"
    );
    fx.create_pool(
        "shop",
        "new",
        json!({"service": {"name": "new", "port": 80}}),
    )
    .await;
    let third = watch.next().await.unwrap();
    assert_eq!(
        (
            third["type"].as_str(),
            third["object"]["rows"][0]["cells"][0].as_str()
        ),
        (Some("ADDED"), Some("new"))
    );
}

#[tokio::test]
async fn events_print_with_the_built_in_event_columns() {
    let fx = start().await;
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.1", "namespace": "default"},
        "regarding": {"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool", "name": "web", "namespace": "default"},
        "reason": "EndpointEjected", "note": "10.0.0.1:80 ejected by 2 of 2 sidecars", "type": "Warning",
        "action": "Eject", "reportingController": "rollcall.dev/controller", "reportingInstance": "rollcall-0",
        "eventTime": meta_now(),
        "series": {"count": 4, "lastObservedTime": meta_now()}});
    fx.post("/apis/events.k8s.io/v1/namespaces/default/events", &event)
        .await
        .expect(201);
    for path in [
        "/api/v1/namespaces/default/events",
        "/apis/events.k8s.io/v1/namespaces/default/events",
    ] {
        let table = fx.get_as(path, TABLE).await.expect(200);
        assert_eq!(
            column_names(&table),
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ],
            "{path}"
        );
        let priorities: Vec<i64> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["priority"].as_i64().unwrap())
            .collect();
        assert_eq!(priorities, [0, 0, 0, 0, 1, 1, 0, 1, 1, 1]);
        let cells = table["rows"][0]["cells"].as_array().unwrap();
        assert!(is_age(&cells[0]) && is_age(&cells[7]), "{cells:?}");
        assert_eq!(
            cells[1..7].to_vec(),
            [
                json!("Warning"),
                json!("EndpointEjected"),
                json!("backendpool/web"),
                json!(""),
                json!("rollcall.dev/controller, rollcall-0"),
                json!("10.0.0.1:80 ejected by 2 of 2 sidecars")
            ],
            "{path}"
        );
        assert_eq!(
            (cells[8].clone(), cells[9].clone()),
            (json!(4), json!("web.1"))
        );
    }
}

/// Now as a `MicroTime`.
fn meta_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    let seconds = k8s_openapi::jiff::Timestamp::from_second(now.as_secs() as i64).expect("a time");
    format!(
        "{}.{:06}Z",
        seconds.to_string().trim_end_matches('Z'),
        now.subsec_micros()
    )
}
