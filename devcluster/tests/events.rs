//! Events: one store seen through two APIs, as on a cluster. An `events.k8s.io/v1` Event as
//! kube-rs's `Recorder` writes it (a create, then a merge patch of `series` when it recurs)
//! is listed through core `v1` with the field selector `kubectl describe` uses, and watched
//! through both APIs, each in its own field names.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{Value, json};

const CORE: &str = "/api/v1/namespaces/shop/events";
const NEW: &str = "/apis/events.k8s.io/v1/namespaces/shop/events";

async fn fixture() -> (Fixture, ObjectReference) {
    let fx = start().await;
    fx.install_crd().await;
    fx.namespace("shop").await;
    let created = fx
        .create_pool(
            "shop",
            "web",
            json!({"service": {"name": "web", "port": 80}}),
        )
        .await;
    fx.create_pool(
        "shop",
        "api",
        json!({"service": {"name": "api", "port": 80}}),
    )
    .await;
    let reference = ObjectReference {
        api_version: Some("rollcall.dev/v1alpha1".into()),
        kind: Some("BackendPool".into()),
        name: Some("web".into()),
        namespace: Some("shop".into()),
        uid: created["metadata"]["uid"].as_str().map(String::from),
        ..Default::default()
    };
    (fx, reference)
}

fn recorder(fx: &Fixture) -> Recorder {
    Recorder::new(
        fx.client.clone(),
        Reporter {
            controller: "rollcall-controller".into(),
            instance: Some("rollcall-0".into()),
        },
    )
}

fn ejected() -> Event {
    Event {
        type_: EventType::Warning,
        reason: "EndpointEjected".into(),
        note: Some("10.0.0.1:80 ejected by 2 of 2 sidecars".into()),
        action: "Eject".into(),
        secondary: None,
    }
}

/// The selector `kubectl describe` sends (`corev1.Events(ns).Search`).
fn describe_selector(reference: &ObjectReference) -> String {
    format!(
        "involvedObject.name%3D{},involvedObject.namespace%3Dshop,involvedObject.kind%3DBackendPool,involvedObject.uid%3D{}",
        reference.name.as_deref().unwrap(),
        reference.uid.as_deref().unwrap()
    )
}

#[tokio::test]
async fn a_recorded_event_is_listed_through_core_v1_as_kubectl_describe_asks() {
    let (fx, reference) = fixture().await;
    let recorder = recorder(&fx);
    recorder
        .publish(&ejected(), &reference)
        .await
        .expect("the event is created");
    recorder
        .publish(&ejected(), &reference)
        .await
        .expect("the series is patched");
    // An event about another object is not selected.
    let api = ObjectReference {
        name: Some("api".into()),
        uid: Some("another-uid".into()),
        ..reference.clone()
    };
    recorder
        .publish(&ejected(), &api)
        .await
        .expect("another event");
    let listed = fx
        .get(&format!(
            "{CORE}?fieldSelector={}",
            describe_selector(&reference)
        ))
        .await
        .expect(200);
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed:#}");
    let event = &items[0];
    assert_eq!(
        (event["apiVersion"].as_str(), event["kind"].as_str()),
        (Some("v1"), Some("Event"))
    );
    assert_eq!(event["involvedObject"]["name"], "web");
    assert_eq!(
        event["involvedObject"]["uid"],
        reference.uid.clone().unwrap()
    );
    assert_eq!(event["message"], "10.0.0.1:80 ejected by 2 of 2 sidecars");
    assert_eq!(
        (event["reason"].as_str(), event["type"].as_str()),
        (Some("EndpointEjected"), Some("Warning"))
    );
    assert_eq!(event["reportingComponent"], "rollcall-controller");
    assert_eq!(event["reportingInstance"], "rollcall-0");
    assert_eq!(event["series"]["count"], 2);
    assert!(event.get("note").is_none() && event.get("regarding").is_none());
    // The same object through events.k8s.io, with that API's names.
    let name = event["metadata"]["name"].as_str().unwrap();
    let newer = fx.get(&format!("{NEW}/{name}")).await.expect(200);
    assert_eq!(newer["regarding"]["name"], "web");
    assert_eq!(newer["note"], event["message"]);
    assert_eq!(newer["reportingController"], "rollcall-controller");
    assert_eq!(
        newer["metadata"]["resourceVersion"],
        event["metadata"]["resourceVersion"]
    );
    // And the events.k8s.io field selector names its own fields.
    let by_regarding = fx
        .get(&format!(
            "{NEW}?fieldSelector=regarding.name%3Dweb,reportingController%3Drollcall-controller"
        ))
        .await
        .expect(200);
    assert_eq!(by_regarding["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn events_are_watched_through_both_apis() {
    let (fx, reference) = fixture().await;
    let from = fx.current_rv().await;
    let mut core = fx.watch(CORE, &format!("resourceVersion={from}")).await;
    let mut newer = fx.watch(NEW, &format!("resourceVersion={from}")).await;
    let recorder = recorder(&fx);
    recorder
        .publish(&ejected(), &reference)
        .await
        .expect("created");
    let (a, b) = (core.next().await.unwrap(), newer.next().await.unwrap());
    assert_eq!(
        (a["type"].as_str(), b["type"].as_str()),
        (Some("ADDED"), Some("ADDED"))
    );
    assert_eq!(a["object"]["message"], b["object"]["note"]);
    assert_eq!(a["object"]["involvedObject"], b["object"]["regarding"]);
    assert_eq!(b["object"]["apiVersion"], "events.k8s.io/v1");
    recorder
        .publish(&ejected(), &reference)
        .await
        .expect("patched");
    let (a, b) = (core.next().await.unwrap(), newer.next().await.unwrap());
    assert_eq!(
        (a["type"].as_str(), b["type"].as_str()),
        (Some("MODIFIED"), Some("MODIFIED"))
    );
    assert_eq!(
        (
            a["object"]["series"]["count"].clone(),
            b["object"]["series"]["count"].clone()
        ),
        (json!(2), json!(2))
    );
}

#[tokio::test]
async fn a_core_event_reads_back_through_events_k8s_io() {
    let (fx, _) = fixture().await;
    let core_event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.legacy"},
        "involvedObject": {"kind": "BackendPool", "name": "web", "namespace": "shop"},
        "reason": "Legacy", "message": "old style", "type": "Normal", "count": 3,
        "source": {"component": "old-controller"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z"});
    fx.post(CORE, &core_event).await.expect(201);
    let newer: Value = fx.get(&format!("{NEW}/web.legacy")).await.expect(200);
    assert_eq!(newer["note"], "old style");
    assert_eq!(newer["deprecatedCount"], 3);
    assert_eq!(newer["deprecatedSource"]["component"], "old-controller");
    assert_eq!(newer["deprecatedFirstTimestamp"], "2026-01-01T00:00:00Z");
    assert!(newer.get("message").is_none() && newer.get("count").is_none());
}
