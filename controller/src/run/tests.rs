//! The wiring over kube's mock API service: the controller lists pools, slices and Services,
//! reports ready once they synced, publishes the roster and writes the status.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{Method, Request, Response};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::client::Body;
use rollcall_api::roster::{PoolRef, PoolState};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tower_test::mock;

use super::*;
use crate::fixtures::{self, READY};
use crate::metrics::Metrics;

fn list(kind: &str, items: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "1"},
        "items": items,
    }))
    .unwrap()
}

#[tokio::test]
async fn syncs_then_serves_the_roster_and_writes_status() {
    let (svc, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(svc, "default");
    let pool = fixtures::pool("web", "web", IntOrString::String("http".into()));
    let service = fixtures::service("web", &[("http", 80)]);
    let slice = fixtures::slice(
        "web-1",
        "web",
        "IPv4",
        ("http", 8080),
        &[("10.0.0.1", READY), ("10.0.0.2", READY)],
    );
    let (patched_tx, patched_rx) = oneshot::channel::<Value>();
    let api = tokio::spawn(async move {
        let mut watches = Vec::new(); // held open, never answered: the watch just idles
        let mut patched = Some(patched_tx);
        while let Some((req, send)) = handle.next_request().await {
            let uri = req.uri().to_string();
            let body = if uri.contains("watch=true") {
                watches.push(send);
                continue;
            } else if req.method() == Method::PATCH {
                let bytes = req.into_body().collect_bytes().await.unwrap();
                let sent: Value = serde_json::from_slice(&bytes).unwrap();
                if let Some(tx) = patched.take() {
                    let _ = tx.send(sent.clone());
                }
                let mut answer = serde_json::to_value(&pool).unwrap();
                answer["status"] = sent["status"].clone();
                serde_json::to_vec(&answer).unwrap()
            } else if uri.starts_with("/apis/rollcall.dev/v1alpha1/backendpools?") {
                list(
                    "BackendPoolList",
                    vec![serde_json::to_value(&pool).unwrap()],
                )
            } else if uri.starts_with("/apis/discovery.k8s.io/v1/endpointslices?") {
                assert!(
                    uri.contains("labelSelector=kubernetes.io%2Fservice-name"),
                    "{uri}"
                );
                list(
                    "EndpointSliceList",
                    vec![serde_json::to_value(&slice).unwrap()],
                )
            } else if uri.starts_with("/api/v1/services?") {
                list("ServiceList", vec![serde_json::to_value(&service).unwrap()])
            } else {
                panic!("unexpected call {} {uri}", req.method());
            };
            send.send_response(Response::builder().body(Body::from(body)).unwrap());
        }
    });

    let state = State::open(Metrics::new().unwrap());
    let ready = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let running = tokio::spawn(run(
        client,
        state.clone(),
        Settings::default(),
        ready.clone(),
        async {
            let _ = stop_rx.await;
        },
    ));

    let patched = tokio::time::timeout(Duration::from_secs(10), patched_rx)
        .await
        .expect("no status write within 10s")
        .unwrap();
    assert_eq!(patched["status"]["endpoints"]["total"], 2);
    assert_eq!(patched["status"]["conditions"][0]["status"], "True");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !ready.load(Ordering::Acquire) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready after the caches synced"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let current = state.hub.current(&PoolRef::new("shop", "web")).unwrap();
    let PoolState::Roster(roster) = &current.update.state else {
        panic!("no roster: {:?}", current.update.state)
    };
    assert_eq!(roster.endpoints.len(), 2);

    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("run did not stop on shutdown")
        .unwrap();
    api.abort();
}
