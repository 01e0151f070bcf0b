//! kube-rs's own `watcher` and `reflector` against the fixture: the cache a controller keeps
//! ends up holding exactly what a fresh list shows, whether its watch was dropped (it resumes
//! from its last version) or answered `410 Expired` (it relists), while another client keeps
//! creating, updating and deleting objects. Both initial-list strategies are covered.

mod common;

use std::collections::BTreeMap;

use common::*;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::watch as progress;

const WRITES: u32 = 90;

/// Keep writing: create, update, delete in a rolling window of names.
async fn churn(api: Api<ConfigMap>, done: progress::Sender<u32>) {
    for i in 0..WRITES {
        let name = format!("cm-{}", i % 12);
        let step = match i % 3 {
            0 => {
                let cm: ConfigMap = serde_json::from_value(configmap(&name, json!({"i": "0"})))
                    .expect("a ConfigMap");
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
            1 => api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"i": i.to_string()}})),
                )
                .await
                .map(|_| ()),
            _ if i % 2 == 0 => api
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
            _ => Ok(()),
        };
        // A create of a name still alive, or a patch of one gone, is part of the churn.
        if let Err(kube::Error::Api(status)) = &step {
            assert!(matches!(status.code, 404 | 409), "{status:?}");
        }
        done.send_replace(i + 1);
    }
}

fn snapshot(items: impl IntoIterator<Item = ConfigMap>) -> BTreeMap<String, String> {
    items
        .into_iter()
        .map(|cm| {
            (
                cm.metadata.name.unwrap_or_default(),
                cm.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

/// Run a reflector through the churn, dropping its watch halfway (and with `expire`, making
/// the version it resumes from too old); returns how often the watcher started a list.
async fn run(expire: bool, streaming: bool) -> usize {
    let fx = start().await;
    fx.namespace("churn").await;
    let api: Api<ConfigMap> = Api::namespaced(fx.client.clone(), "churn");
    let config = if streaming {
        watcher::Config::default().streaming_lists()
    } else {
        watcher::Config::default()
    };
    let (store, writer): (Store<ConfigMap>, _) = reflector::store();
    let inits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = inits.clone();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(api.clone(), config).default_backoff(),
    );
    let reader = tokio::spawn(async move {
        futures_util::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Ok(Event::Init) = event {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    tokio::time::timeout(GUARD, store.wait_until_ready())
        .await
        .expect("the store is ready in time")
        .expect("the writer lives");
    let (tx, mut rx) = progress::channel(0);
    let writer = tokio::spawn(churn(api.clone(), tx));
    tokio::time::timeout(GUARD, rx.wait_for(|n| *n >= WRITES / 2))
        .await
        .expect("half the churn in time")
        .expect("the writer lives");
    if expire {
        // Keep the watcher away while the history it would resume from is compacted, so its
        // next watch is certainly from a forgotten version.
        fx.fault(json!({"fail": {"count": 100000, "code": 500, "verb": "watch"}}))
            .await;
        fx.fault(json!({"dropWatches": true})).await;
        fx.post(
            "/api/v1/namespaces/churn/configmaps",
            &configmap("marker", json!({})),
        )
        .await
        .expect(201);
        fx.fault(json!({"expire": true})).await;
        fx.fault(json!({"clear": true})).await;
    } else {
        fx.fault(json!({"dropWatches": true})).await;
    }
    writer.await.expect("the writer finishes");
    let fresh = snapshot(
        api.list(&ListParams::default())
            .await
            .expect("a list")
            .items,
    );
    eventually(|| {
        let cached = snapshot(store.state().iter().map(|cm| (**cm).clone()));
        let fresh = fresh.clone();
        async move { (cached == fresh).then_some(()) }
    })
    .await;
    reader.abort();
    inits.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test]
async fn a_reflector_resumes_a_dropped_watch_without_relisting() {
    for streaming in [false, true] {
        let inits = run(false, streaming).await;
        assert_eq!(inits, 1, "streaming: {streaming}");
    }
}

#[tokio::test]
async fn a_reflector_relists_after_410_expired_and_converges() {
    for streaming in [false, true] {
        let inits = run(true, streaming).await;
        assert!(inits >= 2, "streaming: {streaming}: {inits} initial lists");
    }
}
