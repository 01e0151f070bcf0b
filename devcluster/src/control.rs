//! The fixture's own control endpoints under `/_devcluster/` (no real API server has them;
//! they need no token, as the server only listens on 127.0.0.1):
//!
//! - `GET /_devcluster/requests` — the request log as JSON; `DELETE` clears it.
//! - `POST /_devcluster/faults` with one of `{"dropWatches": true}`, `{"expire": true}` (every
//!   older resourceVersion answers 410), `{"fail": {"count": 3, "code": 500, "verb": "list",
//!   "resource": "leases"}}`, `{"pause": 2.5}` (seconds), `{"clear": true}`.
//! - `GET /_devcluster/info` — the current and oldest retained resourceVersion.

use std::time::Duration;

use http::{Method, Response};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::faults::FailRule;
use crate::http::{Body, json_response};
use crate::request::Query;
use crate::status::{ApiError, ApiResult};

pub fn handle(
    cluster: &Cluster,
    method: &Method,
    what: &str,
    _query: &Query,
    body: &[u8],
) -> ApiResult<Response<Body>> {
    match (method, what) {
        (&Method::GET, "requests") => Ok(json_response(200, &json!(cluster.log.entries()))),
        (&Method::DELETE, "requests") => {
            cluster.log.clear();
            Ok(json_response(200, &json!({})))
        }
        (&Method::GET, "info") => {
            let db = cluster.lock();
            Ok(json_response(
                200,
                &json!({"resourceVersion": db.store.current_rv(), "oldestResourceVersion": db.store.oldest_rv()}),
            ))
        }
        (&Method::POST, "faults") => {
            let request: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("faults: {e}")))?;
            apply(cluster, &request)?;
            Ok(json_response(200, &json!({"applied": request})))
        }
        _ => Err(ApiError::path_not_found()),
    }
}

fn apply(cluster: &Cluster, request: &Value) -> ApiResult<()> {
    if request["clear"] == json!(true) {
        cluster.faults.clear();
    }
    if request["dropWatches"] == json!(true) {
        cluster.drop_watches();
    }
    if request["expire"] == json!(true) {
        cluster.lock().store.compact_all();
    }
    if let Some(seconds) = request["pause"].as_f64() {
        cluster
            .faults
            .pause(Duration::from_secs_f64(seconds.clamp(0.0, 600.0)));
    }
    if let Some(rule) = request.get("fail") {
        let rule: FailRule = serde_json::from_value(rule.clone())
            .map_err(|e| ApiError::bad_request(format!("faults.fail: {e}")))?;
        cluster.faults.fail(rule);
    }
    Ok(())
}
