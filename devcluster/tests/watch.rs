//! resourceVersion and watch semantics, as a kube-apiserver's watch cache serves them:
//! monotonic versions, watches from a version, synthetic ADDED events, `410 Expired`,
//! `sendInitialEvents` and its end bookmark, the options a watch may combine, periodic
//! bookmarks, `timeoutSeconds`, and the fault switch that ends every watch (selectors are
//! in `selectors.rs`).

mod common;

use std::time::Duration;

use common::*;
use rollcall_devcluster::Settings;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn every_write_gets_a_higher_resource_version() {
    let fx = start().await;
    let mut seen = vec![fx.current_rv().await];
    let a = fx
        .post(CMS, &configmap("a", json!({"v": "1"})))
        .await
        .expect(201);
    seen.push(rv_of(&a));
    let mut changed = a.clone();
    changed["data"]["v"] = json!("2");
    seen.push(rv_of(
        &fx.put(&format!("{CMS}/a"), &changed).await.expect(200),
    ));
    let b = fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    seen.push(rv_of(&b));
    fx.delete(&format!("{CMS}/a"), None).await.expect(200);
    let list = fx.get(CMS).await.expect(200);
    let list_rv: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    seen.push(list_rv);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "not increasing: {seen:?}"
    );
    // The deletion itself took a version: the list is newer than the last object.
    assert!(list_rv > rv_of(&b));
}

#[tokio::test]
async fn a_watch_from_a_version_gets_exactly_the_later_changes_in_order() {
    let fx = start().await;
    let a = fx
        .post(CMS, &configmap("a", json!({"v": "1"})))
        .await
        .expect(201);
    let from = rv_of(&a);
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    fx.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"data": {"v": "2"}}),
    )
    .await
    .expect(200);
    fx.delete(&format!("{CMS}/b"), None).await.expect(200);
    let mut watch = fx.watch(CMS, &format!("resourceVersion={from}")).await;
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(watch.next().await.expect("an event"));
    }
    let names: Vec<String> = events.iter().map(summary).collect();
    assert_eq!(names, ["ADDED b", "MODIFIED a", "DELETED b"]);
    let versions: Vec<u64> = events.iter().map(|e| rv_of(&e["object"])).collect();
    assert!(
        versions[0] > from && versions.windows(2).all(|w| w[0] < w[1]),
        "{versions:?}"
    );
    assert_eq!(events[1]["object"]["data"]["v"], "2");
    // Nothing else was pending: the next event is the next write.
    fx.post(CMS, &configmap("c", json!({}))).await.expect(201);
    assert_eq!(summary(&watch.next().await.unwrap()), "ADDED c");
}

#[tokio::test]
async fn a_watch_without_a_version_starts_with_added_for_every_existing_object() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    let mut existing = vec!["ADDED a".to_string(), "ADDED b".to_string()];
    for (query, name) in [("", "c"), ("resourceVersion=0", "d")] {
        let mut watch = fx.watch(CMS, query).await;
        let mut first = Vec::new();
        for _ in 0..existing.len() {
            first.push(summary(&watch.next().await.unwrap()));
        }
        assert_eq!(first, existing, "{query:?}");
        fx.post(CMS, &configmap(name, json!({}))).await.expect(201);
        assert_eq!(
            summary(&watch.next().await.unwrap()),
            format!("ADDED {name}")
        );
        existing.push(format!("ADDED {name}"));
    }
}

#[tokio::test]
async fn a_compacted_version_gets_410_expired_and_a_relist_recovers() {
    let fx = start().await;
    let old = rv_of(&fx.post(CMS, &configmap("a", json!({}))).await.expect(201));
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    fx.fault(json!({"expire": true})).await;
    let mut watch = fx.watch(CMS, &format!("resourceVersion={old}")).await;
    let events = watch.until_closed().await;
    assert_eq!(events.len(), 1, "{events:?}");
    let status = &events[0]["object"];
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(
        (status["code"].as_u64(), status["reason"].as_str()),
        (Some(410), Some("Expired"))
    );
    let oldest = fx.get("/_devcluster/info").await.expect(200)["oldestResourceVersion"].clone();
    assert_eq!(
        status["message"],
        format!("too old resource version: {old} ({oldest})")
    );
    // What a reflector does next: list, then watch from the list's version.
    let list = fx.get(CMS).await.expect(200);
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = fx.watch(CMS, &format!("resourceVersion={rv}")).await;
    fx.post(CMS, &configmap("c", json!({}))).await.expect(201);
    assert_eq!(summary(&watch.next().await.unwrap()), "ADDED c");
}

#[tokio::test]
async fn send_initial_events_ends_with_the_initial_events_end_bookmark() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    let current = fx.current_rv().await;
    let query = "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
    let mut watch = fx.watch(CMS, query).await;
    let events = [watch.next().await.unwrap(), watch.next().await.unwrap()];
    assert_eq!(events.map(|e| summary(&e)), ["ADDED a", "ADDED b"]);
    let bookmark = watch.next().await.unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK");
    let meta = &bookmark["object"]["metadata"];
    assert_eq!(meta["annotations"]["k8s.io/initial-events-end"], "true");
    assert_eq!(meta["resourceVersion"], current.to_string());
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    fx.post(CMS, &configmap("c", json!({}))).await.expect(201);
    assert_eq!(summary(&watch.next_change().await.unwrap()), "ADDED c");
}

#[tokio::test]
async fn send_initial_events_without_bookmarks_streams_the_objects_without_the_end_marker() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    let mut watch = fx
        .watch(
            CMS,
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        )
        .await;
    assert_eq!(summary(&watch.next().await.unwrap()), "ADDED a");
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    assert_eq!(summary(&watch.next().await.unwrap()), "ADDED b");
}

#[tokio::test]
async fn send_initial_events_false_starts_from_now_without_initial_events() {
    let fx = start().await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    let mut watch = fx
        .watch(
            CMS,
            "sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
        )
        .await;
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    assert_eq!(summary(&watch.next().await.unwrap()), "ADDED b");
}

#[tokio::test]
async fn watch_options_are_validated_like_list_options() {
    let fx = start().await;
    let forbidden = |detail: &str| {
        format!(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: {detail}"
        )
    };
    let cases = [
        (
            "watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
            forbidden("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
        ),
        (
            "watch=1&resourceVersionMatch=NotOlderThan",
            forbidden("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"),
        ),
        (
            "resourceVersionMatch=Exact",
            forbidden("resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            forbidden("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""),
        ),
        (
            "sendInitialEvents=true",
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".into(),
        ),
    ];
    for (query, message) in cases {
        let reply = fx.get(&format!("{CMS}?{query}")).await;
        assert_eq!(
            (reply.code, reply.message()),
            (422, message.as_str()),
            "{query}"
        );
        assert_eq!(reply.body["reason"], "Invalid");
        assert_eq!(reply.body["details"]["kind"], "ListOptions");
        assert_eq!(reply.body["details"]["group"], "meta.k8s.io");
    }
}

#[tokio::test]
async fn bookmarks_arrive_periodically_only_when_allowed() {
    let fx = start_with(Settings {
        bookmark_interval: Duration::from_millis(100),
        ..Settings::default()
    })
    .await;
    let current = fx.current_rv().await;
    let mut plain = fx.watch(CMS, &format!("resourceVersion={current}")).await;
    let mut bookmarked = fx
        .watch(
            CMS,
            &format!("resourceVersion={current}&allowWatchBookmarks=true"),
        )
        .await;
    for _ in 0..2 {
        let event = bookmarked.next().await.unwrap();
        assert_eq!(event["type"], "BOOKMARK");
        assert_eq!(
            event["object"]["metadata"]["resourceVersion"],
            current.to_string()
        );
        assert!(event["object"]["metadata"]["annotations"].is_null());
    }
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    // The watch without bookmarks saw none of those ticks.
    assert_eq!(summary(&plain.next().await.unwrap()), "ADDED a");
    let after = bookmarked.next_change().await.unwrap();
    assert_eq!(summary(&after), "ADDED a");
    let next_bookmark = bookmarked.next().await.unwrap();
    assert_eq!(
        next_bookmark["object"]["metadata"]["resourceVersion"],
        after["object"]["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream() {
    let fx = start().await;
    let mut watch = fx.watch(CMS, "timeoutSeconds=1").await;
    let started = tokio::time::Instant::now();
    assert!(watch.until_closed().await.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn drop_watches_ends_every_open_watch() {
    let fx = start().await;
    let mut one = fx.watch(CMS, "").await;
    let mut two = fx
        .watch("/api/v1/namespaces", "allowWatchBookmarks=true")
        .await;
    let mut two_seen = 0;
    // The namespace watch starts with the system namespaces; read them so the stream is live.
    while two_seen < 4 {
        two.next().await.unwrap();
        two_seen += 1;
    }
    fx.fault(json!({"dropWatches": true})).await;
    assert!(one.until_closed().await.is_empty());
    assert!(
        two.until_closed()
            .await
            .iter()
            .all(|e| e["type"] == "BOOKMARK")
    );
    // New watches work again.
    let mut again = fx.watch(CMS, "").await;
    fx.post(CMS, &configmap("a", json!({}))).await.expect(201);
    assert_eq!(summary(&again.next().await.unwrap()), "ADDED a");
}
