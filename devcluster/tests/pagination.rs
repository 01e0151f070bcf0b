//! Lists in pages (`limit`/`continue`) and lists of the past (`resourceVersionMatch=Exact`),
//! as etcd3 serves them: every page is consistent with the first one's version whatever
//! changes in between, `remainingItemCount` when nothing is filtered, key order across
//! namespaces, a compacted continue token is `410 Expired` with an inconsistent token to
//! finish with, and a version from the future is `504`.

mod common;

use common::*;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn seed(fx: &Fixture, count: usize) -> Vec<Value> {
    let mut created = Vec::new();
    for i in 0..count {
        created.push(
            fx.post(CMS, &configmap(&format!("cm-{i:02}"), json!({"v": "1"})))
                .await
                .expect(201),
        );
    }
    created
}

#[tokio::test]
async fn pages_stay_consistent_with_the_first_page_while_objects_change() {
    let fx = start().await;
    let created = seed(&fx, 10).await;
    let first = fx.get(&format!("{CMS}?limit=4")).await.expect(200);
    let version = first["metadata"]["resourceVersion"].clone();
    assert_eq!(names(&first), ["cm-00", "cm-01", "cm-02", "cm-03"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 6);
    // Between pages: delete one not yet served, change one, add one.
    fx.delete(&format!("{CMS}/cm-07"), None).await.expect(200);
    fx.patch(
        &format!("{CMS}/cm-05"),
        "application/merge-patch+json",
        &json!({"data": {"v": "2"}}),
    )
    .await
    .expect(200);
    fx.post(CMS, &configmap("cm-99", json!({})))
        .await
        .expect(201);
    let mut pages = vec![first];
    while let Some(token) = pages
        .last()
        .and_then(|p| p["metadata"]["continue"].as_str())
    {
        let page = fx
            .get(&format!("{CMS}?limit=4&continue={token}"))
            .await
            .expect(200);
        assert_eq!(page["metadata"]["resourceVersion"], version);
        pages.push(page);
    }
    assert_eq!(pages.len(), 3);
    let last = &pages[2]["metadata"];
    assert!(
        last.get("continue").is_none() && last.get("remainingItemCount").is_none(),
        "{last}"
    );
    assert_eq!(pages[1]["metadata"]["remainingItemCount"], 2);
    let served: Vec<(String, Value)> = pages
        .iter()
        .flat_map(|p| p["items"].as_array().cloned().unwrap_or_default())
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap().to_string(),
                i["metadata"]["resourceVersion"].clone(),
            )
        })
        .collect();
    let expected: Vec<(String, Value)> = created
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap().to_string(),
                c["metadata"]["resourceVersion"].clone(),
            )
        })
        .collect();
    assert_eq!(
        served, expected,
        "the pages show the state as of the first page"
    );
}

#[tokio::test]
async fn a_filtered_list_has_no_remaining_item_count() {
    let fx = start().await;
    for i in 0..5 {
        let mut cm = configmap(&format!("cm-{i}"), json!({}));
        cm["metadata"]["labels"] = json!({"app": "web"});
        fx.post(CMS, &cm).await.expect(201);
    }
    for query in [
        "labelSelector=app%3Dweb",
        "fieldSelector=metadata.namespace%3Ddefault",
    ] {
        let page = fx.get(&format!("{CMS}?limit=2&{query}")).await.expect(200);
        assert_eq!(names(&page).len(), 2, "{query}");
        assert!(page["metadata"]["continue"].is_string(), "{query}");
        assert!(
            page["metadata"].get("remainingItemCount").is_none(),
            "{query}"
        );
    }
}

#[tokio::test]
async fn pages_across_namespaces_follow_key_order_and_miss_nothing() {
    let fx = start().await;
    // `a-b/...` sorts before `a/...` in etcd's key order ('-' < '/').
    for ns in ["a", "a-b", "b"] {
        fx.namespace(ns).await;
        for name in ["x", "y"] {
            let path = format!("/api/v1/namespaces/{ns}/configmaps");
            fx.post(&path, &configmap(name, json!({})))
                .await
                .expect(201);
        }
    }
    let all = fx.get("/api/v1/configmaps").await.expect(200);
    let keys = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                format!(
                    "{}/{}",
                    i["metadata"]["namespace"].as_str().unwrap(),
                    i["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(keys(&all), ["a-b/x", "a-b/y", "a/x", "a/y", "b/x", "b/y"]);
    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let query = token
            .as_deref()
            .map(|t| format!("&continue={t}"))
            .unwrap_or_default();
        let page = fx
            .get(&format!("/api/v1/configmaps?limit=1{query}"))
            .await
            .expect(200);
        paged.extend(keys(&page));
        match page["metadata"]["continue"].as_str() {
            Some(next) => token = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, keys(&all));
}

#[tokio::test]
async fn an_expired_continue_token_is_410_with_a_token_that_finishes_the_list() {
    let fx = start().await;
    seed(&fx, 5).await;
    let first = fx.get(&format!("{CMS}?limit=2")).await.expect(200);
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    fx.post(CMS, &configmap("cm-99", json!({})))
        .await
        .expect(201);
    fx.fault(json!({"expire": true})).await;
    let reply = fx.get(&format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (410, Some("Expired"))
    );
    assert_eq!(
        reply.message(),
        "The provided continue parameter is too old to display a consistent list result. You can \
         start a new list without the continue parameter, or use the continue token in this \
         response to retrieve the remainder of the results. Continuing with the provided token \
         results in an inconsistent list - objects that were created, modified, or deleted \
         between the time the first chunk was returned and now may show up in the list."
    );
    // The inconsistent token finishes the list at the newest state (cm-99 included).
    let inconsistent = reply.body["metadata"]["continue"]
        .as_str()
        .expect("a token")
        .to_string();
    let mut rest = Vec::new();
    let mut next = Some(inconsistent);
    while let Some(token) = next {
        let page = fx
            .get(&format!("{CMS}?limit=2&continue={token}"))
            .await
            .expect(200);
        rest.extend(names(&page));
        next = page["metadata"]["continue"].as_str().map(String::from);
    }
    assert_eq!(rest, ["cm-02", "cm-03", "cm-04", "cm-99"]);
    // And a new list from the start works as always.
    assert_eq!(names(&fx.get(CMS).await.expect(200)).len(), 6);
}

#[tokio::test]
async fn resource_version_match_exact_lists_the_past_state() {
    let fx = start().await;
    let a = fx
        .post(CMS, &configmap("a", json!({"v": "1"})))
        .await
        .expect(201);
    let then = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    fx.post(CMS, &configmap("b", json!({}))).await.expect(201);
    fx.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"data": {"v": "2"}}),
    )
    .await
    .expect(200);
    let past = fx
        .get(&format!(
            "{CMS}?resourceVersion={then}&resourceVersionMatch=Exact"
        ))
        .await
        .expect(200);
    assert_eq!(names(&past), ["a"]);
    assert_eq!(past["items"][0]["data"]["v"], "1");
    assert_eq!(past["metadata"]["resourceVersion"], then);
    // NotOlderThan (the default match) serves the newest state.
    let now = fx
        .get(&format!("{CMS}?resourceVersion={then}"))
        .await
        .expect(200);
    assert_eq!(names(&now), ["a", "b"]);
    assert_eq!(now["items"][0]["data"]["v"], "2");
    // Once compacted, the past is gone.
    fx.fault(json!({"expire": true})).await;
    let gone = fx
        .get(&format!(
            "{CMS}?resourceVersion={then}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(
        (gone.code, gone.body["reason"].as_str()),
        (410, Some("Expired"))
    );
    assert!(
        gone.message()
            .starts_with(&format!("too old resource version: {then} (")),
        "{}",
        gone.message()
    );
}

#[tokio::test]
async fn a_version_from_the_future_is_too_large() {
    let fx = start().await;
    let future = fx.current_rv().await + 1000;
    let reply = fx.get(&format!("{CMS}?resourceVersion={future}")).await;
    assert_eq!(
        (reply.code, reply.body["reason"].as_str()),
        (504, Some("Timeout"))
    );
    assert!(
        reply
            .message()
            .starts_with(&format!("Too large resource version: {future}, current: "))
    );
    assert_eq!(
        reply.body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(reply.body["details"]["retryAfterSeconds"], 1);
    assert_eq!(
        reply
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
}
