//! Watches with the API server's semantics: from a resourceVersion (every change after it, or
//! an `ERROR` event with `410 Expired` once it is compacted), from now with a synthetic `ADDED`
//! per existing object (unset or `0`), `sendInitialEvents` (options checked by
//! [`ListOptions`]) with the `initial-events-end` bookmark when bookmarks are allowed,
//! periodic bookmarks when allowed, `timeoutSeconds`, and selectors applied to both
//! sides of a change (an object that stops matching is `DELETED` for the watcher). Events are
//! JSON lines on a chunked response, rendered as the client asked (objects or Tables).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::catalog::ResourceType;
use crate::convert::to_view;
use crate::handlers::options::ListOptions;
use crate::handlers::read::Selection;
use crate::handlers::{Call, Rendering};
use crate::http::Body;
use crate::status::{ApiError, ApiResult};
use crate::store::{Change, ChangeKind};

/// Longest a watch lasts when the client sets no `timeoutSeconds` (the API server picks
/// between 30 and 60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Watcher {
    t: Arc<ResourceType>,
    selection: Selection,
    namespace: Option<String>,
    rendering: Rendering,
    call_table: Box<dyn Fn(&Value) -> Value + Send + Sync>,
    tx: mpsc::Sender<Bytes>,
}

// === impl Watcher ===

impl Watcher {
    fn selects(&self, stored: &Value) -> bool {
        let in_namespace = self.namespace.as_deref().is_none_or(|ns| {
            stored
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                == Some(ns)
        });
        in_namespace && self.selection.matches(stored)
    }

    async fn send(&self, kind: &str, object: Value) -> bool {
        let object = match self.rendering {
            Rendering::Table if kind != "BOOKMARK" && kind != "ERROR" => (self.call_table)(&object),
            Rendering::Metadata if kind != "ERROR" => crate::handlers::metadata_only(&object),
            _ => object,
        };
        let mut line = json!({"type": kind, "object": object}).to_string();
        line.push('\n');
        self.tx.send(Bytes::from(line)).await.is_ok()
    }

    /// The event a watcher sees for a change, if any.
    fn event(&self, change: &Change) -> Option<(&'static str, Value)> {
        if change.key.storage != self.t.storage {
            return None;
        }
        let now = self.selects(&change.object);
        let before = change.previous.as_deref().is_some_and(|p| self.selects(p));
        let kind = match (change.kind, before, now) {
            (ChangeKind::Deleted, true, _) => "DELETED",
            (ChangeKind::Deleted, false, _) => return None,
            (_, false, true) => "ADDED",
            (_, true, true) => "MODIFIED",
            (_, true, false) => {
                // Stopped matching: gone for this watcher, stamped with the change's version.
                let mut last = change.previous.as_deref().cloned().unwrap_or_default();
                last["metadata"]["resourceVersion"] = json!(change.rv.to_string());
                return Some(("DELETED", to_view(&self.t, &last)));
            }
            (_, false, false) => return None,
        };
        Some((kind, to_view(&self.t, &change.object)))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Value {
        let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"kind": self.t.kind, "apiVersion": self.t.api_version(), "metadata": metadata})
    }
}

enum Start {
    /// Synthetic ADDED events for what exists now.
    Objects(Vec<Arc<Value>>),
    /// Changes after the requested version.
    Changes(Vec<Arc<Change>>),
    /// The requested version is compacted.
    Expired(String),
}

pub fn watch(call: &Call, t: &Arc<ResourceType>) -> ApiResult<Response<Body>> {
    let selection = Selection::from_call(call, t)?;
    let options = ListOptions::parse(&call.query, true)?;
    let rv = Some(options.resource_version.as_str()).filter(|v| !v.is_empty() && *v != "0");
    let send_initial = options.send_initial_events == Some(true);
    let bookmarks = options.allow_bookmarks;
    let timeout = call
        .query
        .number("timeoutSeconds")?
        .filter(|s| *s > 0)
        .map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s as u64));
    let namespace = t
        .namespaced
        .then(|| call.namespace().to_string())
        .filter(|ns| !ns.is_empty());
    let cluster = call.cluster.clone();
    let (start, start_rv, feed) = {
        let db = cluster.lock();
        let feed = cluster.subscribe();
        let current = db.store.current_rv();
        let start = match rv.map(str::parse::<u64>) {
            Some(Err(_)) => {
                return Err(ApiError::bad_request(format!(
                    "invalid resource version: {}",
                    rv.unwrap_or("")
                )));
            }
            Some(Ok(from)) if !send_initial => match db.store.changes_since(&t.storage, from) {
                Ok(changes) => Start::Changes(changes),
                Err(e) => Start::Expired(format!(
                    "too old resource version: {} ({})",
                    e.requested, e.oldest
                )),
            },
            // `sendInitialEvents=false` from "now" or "any": only what happens from here on.
            None if options.send_initial_events == Some(false) => Start::Changes(Vec::new()),
            _ => Start::Objects(
                db.store
                    .list(&t.storage, namespace.as_deref(), None)
                    .unwrap_or_default(),
            ),
        };
        (start, current, feed)
    };
    let (tx, rx) = mpsc::channel::<Bytes>(1024);
    let table_call = TableRenderer::new(call, t);
    let watcher = Watcher {
        t: t.clone(),
        selection,
        namespace,
        rendering: call.rendering(),
        call_table: Box::new(move |o| table_call.render(o)),
        tx,
    };
    let epoch = cluster.watch_epoch();
    let interval = cluster.settings.bookmark_interval;
    tokio::spawn(run(
        cluster,
        watcher,
        start,
        start_rv,
        feed,
        epoch,
        timeout,
        bookmarks,
        send_initial,
        interval,
    ));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(Frame::data(b)), rx))
    });
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(response)
}

/// Tables for watch events, with the same options as the request; as upstream's
/// `watchEmbeddedEncoder` does, only the first event carries the column definitions.
struct TableRenderer {
    t: Arc<ResourceType>,
    include: crate::table::IncludeObject,
    no_headers: bool,
    headers_sent: std::sync::atomic::AtomicBool,
}

impl TableRenderer {
    fn new(call: &Call, t: &Arc<ResourceType>) -> Self {
        Self {
            t: t.clone(),
            include: crate::table::IncludeObject::parse(call.query.get("includeObject")),
            no_headers: call.query.flag("noHeaders"),
            headers_sent: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn render(&self, object: &Value) -> Value {
        let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
        let sent = self
            .headers_sent
            .swap(true, std::sync::atomic::Ordering::Relaxed);
        crate::table::table(
            &self.t,
            &[object],
            meta,
            self.include,
            self.no_headers || sent,
        )
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    cluster: Arc<crate::cluster::Cluster>,
    watcher: Watcher,
    start: Start,
    start_rv: u64,
    mut feed: broadcast::Receiver<Arc<Change>>,
    mut epoch: tokio::sync::watch::Receiver<u64>,
    timeout: Duration,
    bookmarks: bool,
    send_initial: bool,
    interval: Duration,
) {
    match start {
        Start::Expired(message) => {
            let status = ApiError::expired(message).to_status();
            watcher.send("ERROR", status).await;
            return;
        }
        Start::Objects(objects) => {
            for object in objects.iter().filter(|o| watcher.selects(o)) {
                if !watcher.send("ADDED", to_view(&watcher.t, object)).await {
                    return;
                }
            }
            if send_initial
                && bookmarks
                && !watcher
                    .send("BOOKMARK", watcher.bookmark(start_rv, true))
                    .await
            {
                return;
            }
        }
        Start::Changes(changes) => {
            for change in changes {
                if let Some((kind, object)) = watcher.event(&change)
                    && !watcher.send(kind, object).await
                {
                    return;
                }
            }
        }
    }
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut ticks = tokio::time::interval(interval);
    ticks.tick().await;
    epoch.borrow_and_update();
    loop {
        tokio::select! {
            received = feed.recv() => match received {
                Ok(change) => {
                    if let Some((kind, object)) = watcher.event(&change)
                        && !watcher.send(kind, object).await
                    {
                        return;
                    }
                }
                // Too slow to keep up, or the server is going away: end the watch, as the
                // API server does; the client resumes from its last version.
                Err(_) => return,
            },
            _ = ticks.tick(), if bookmarks => {
                let rv = {
                    let db = cluster.lock();
                    (feed.is_empty()).then(|| db.store.current_rv())
                };
                if let Some(rv) = rv
                    && !watcher.send("BOOKMARK", watcher.bookmark(rv, false)).await
                {
                    return;
                }
            }
            _ = epoch.changed() => return,
            () = &mut deadline => return,
            () = watcher.tx.closed() => return,
        }
    }
}
