//! The demo's live view of the cluster side: the pool's row as `kubectl get bp -w` prints it
//! (the server's own Table, so the same columns), its ejections (address, reason, ejected by N
//! of M sidecars, since) and the Events the controller records. Three watches feed one channel
//! of lines, printed in the order they happen.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DynamicObject, WatchEvent};
use kube::runtime::{WatchStreamExt, watcher};
use rollcall_testkit::system::{NAMESPACE, POOL, pool_resource};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Column widths that fit the demo's pool (kubectl pads with three spaces).
const WIDTHS: [usize; 6] = [7, 10, 10, 10, 8, 6];

/// A table row's cells as text, as kubectl prints them (`<none>` for a missing value).
pub fn cells(row: &Value) -> Vec<String> {
    row["cells"]
        .as_array()
        .map(|cells| {
            cells
                .iter()
                .map(|c| match c {
                    Value::Null => "<none>".to_string(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One padded line of cells.
pub fn format_row(cells: &[String]) -> String {
    cells
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c:<width$}", width = WIDTHS.get(i).copied().unwrap_or(8)))
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end()
        .to_string()
}

/// The header line of a Table.
pub fn header(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .map(|cols| {
            cols.iter()
                .filter(|c| c["priority"].as_i64().unwrap_or(0) == 0)
                .map(|c| c["name"].as_str().unwrap_or("").to_uppercase())
                .collect()
        })
        .unwrap_or_default()
}

/// `ejected 127.0.0.1:41002 (b2): ConsecutiveGatewayErrors, by 2 of 2 sidecars, since 07:31:02Z`.
/// Keyed by address.
pub fn ejection_lines(status: &Value, names: &dyn Fn(&str) -> String) -> BTreeMap<String, String> {
    status["ejections"]
        .as_array()
        .map(|ejections| {
            ejections
                .iter()
                .map(|e| {
                    let address = e["address"].as_str().unwrap_or("?");
                    let since = e["since"].as_str().unwrap_or("?");
                    let clock = since.split('T').nth(1).unwrap_or(since);
                    let line = format!(
                        "ejected {address} ({}): {}, by {} of {} sidecars, since {clock}",
                        names(address),
                        e["reason"].as_str().unwrap_or("?"),
                        e["ejectedBy"],
                        e["of"]
                    );
                    (address.to_string(), line)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Start the three watches; their lines arrive on the returned channel.
pub fn start(
    client: kube::Client,
    names: impl Fn(&str) -> String + Send + Sync + 'static,
) -> (mpsc::UnboundedReceiver<String>, JoinSet<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut tasks = JoinSet::new();
    tasks.spawn(table_rows(client.clone(), tx.clone()));
    tasks.spawn(ejections(client.clone(), tx.clone(), names));
    tasks.spawn(events(client, tx));
    (rx, tasks)
}

/// The pool's row whenever a visible cell other than Age changes, from a watch with
/// server-side printing (what `kubectl get bp -w` asks for).
async fn table_rows(client: kube::Client, tx: mpsc::UnboundedSender<String>) {
    let path = format!(
        "/apis/rollcall.dev/v1alpha1/namespaces/{NAMESPACE}/backendpools?watch=true&fieldSelector=metadata.name%3D{POOL}"
    );
    let mut printed_header = false;
    let mut last: Vec<String> = Vec::new();
    loop {
        let request = http::Request::get(&path)
            .header(
                "accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .body(Vec::new());
        let Ok(request) = request else { return };
        let Ok(stream) = client.request_events::<Value>(request).await else {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            continue;
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            let table = match event {
                WatchEvent::Added(t) | WatchEvent::Modified(t) => t,
                _ => continue,
            };
            if !printed_header {
                let _ = tx.send(format_row(&header(&table)));
                printed_header = true;
            }
            for row in table["rows"].as_array().into_iter().flatten() {
                let row = cells(row);
                // Before the controller's first status every status column is `<none>`: wait
                // for it rather than print a row that says nothing.
                if !has_status(&row) {
                    continue;
                }
                let visible = &row[..row.len().saturating_sub(1)];
                if visible != &last[..last.len().saturating_sub(1)] {
                    let _ = tx.send(format_row(&row));
                    last = row;
                }
            }
        }
    }
}

/// Whether a row (NAME, SERVICE, the status columns, AGE) has any status column filled in.
fn has_status(row: &[String]) -> bool {
    let status = row.get(2..row.len().saturating_sub(1)).unwrap_or_default();
    status.iter().any(|cell| cell != "<none>")
}

/// A line per ejection that starts or ends.
async fn ejections(
    client: kube::Client,
    tx: mpsc::UnboundedSender<String>,
    names: impl Fn(&str) -> String + Send + Sync + 'static,
) {
    let pools: Api<DynamicObject> = Api::namespaced_with(client, NAMESPACE, &pool_resource());
    let config = watcher::Config::default().fields(&format!("metadata.name={POOL}"));
    let mut stream = std::pin::pin!(watcher(pools, config).default_backoff().applied_objects());
    let mut shown: BTreeMap<String, String> = BTreeMap::new();
    while let Some(next) = stream.next().await {
        let Ok(pool) = next else { continue };
        let status = pool.data.get("status").cloned().unwrap_or(Value::Null);
        let now = ejection_lines(&status, &names);
        for (address, line) in &now {
            if !shown.contains_key(address) {
                let _ = tx.send(format!("    {line}"));
            }
        }
        for address in shown.keys().filter(|a| !now.contains_key(*a)) {
            let _ = tx.send(format!(
                "    readmitted {address} ({}): no sidecar ejects it any more",
                names(address)
            ));
        }
        shown = now;
    }
}

/// The Events recorded in the demo namespace, as `kubectl get events` lists them.
async fn events(client: kube::Client, tx: mpsc::UnboundedSender<String>) {
    let events: Api<Event> = Api::namespaced(client, NAMESPACE);
    let mut stream = std::pin::pin!(
        watcher(events, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    let mut seen = BTreeSet::new();
    while let Some(next) = stream.next().await {
        let Ok(event) = next else { continue };
        let count = event.series.as_ref().and_then(|s| s.count).unwrap_or(1);
        let key = (event.metadata.uid.clone().unwrap_or_default(), count);
        if !seen.insert(key) {
            continue;
        }
        let object = &event.involved_object;
        let _ = tx.send(format!(
            "    event {} {} {}/{}: {}",
            event.type_.as_deref().unwrap_or(""),
            event.reason.as_deref().unwrap_or(""),
            object.kind.as_deref().unwrap_or("").to_lowercase(),
            object.name.as_deref().unwrap_or(""),
            event.message.as_deref().unwrap_or("")
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rows_print_like_kubectl() {
        let table = json!({"columnDefinitions": [
            {"name": "Name", "priority": 0}, {"name": "Service", "priority": 0},
            {"name": "Healthy", "priority": 0}, {"name": "Hidden", "priority": 1}],
            "rows": [{"cells": ["web", "web", 3, null]}]});
        assert_eq!(format_row(&header(&table)), "NAME    SERVICE    HEALTHY");
        assert_eq!(cells(&table["rows"][0]), ["web", "web", "3", "<none>"]);
        let strings = |cells: &[&str]| cells.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        assert!(!has_status(&strings(&[
            "web", "web", "<none>", "<none>", "<none>", "1s"
        ])));
        assert!(has_status(&strings(&[
            "web", "web", "3", "0", "False", "1s"
        ])));
        assert!(has_status(&strings(&[
            "web", "web", "<none>", "<none>", "True", "1s"
        ])));
    }

    #[test]
    fn ejections_name_reason_share_and_since() {
        let status = json!({"ejections": [{"address": "127.0.0.1:9", "reason": "ProbeFailures",
            "since": "2026-12-01T07:31:02Z", "ejectedBy": 2, "of": 2}]});
        let lines = ejection_lines(&status, &|_| "b2".to_string());
        assert_eq!(
            lines["127.0.0.1:9"],
            "ejected 127.0.0.1:9 (b2): ProbeFailures, by 2 of 2 sidecars, since 07:31:02Z"
        );
    }
}
