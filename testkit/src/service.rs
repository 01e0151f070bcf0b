//! The request handler of a test backend: `/healthz` (counted apart from traffic), `/echo`
//! (request headers back as JSON), `/echo-body` (the request body streamed back) and every other
//! path (`backend <port>\n`), each shaped by the backend's current [`Behavior`](crate::Behavior).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde::{Deserialize, Serialize};
use tokio::time::Sleep;

use crate::backend::Shared;
use crate::behavior::Action;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type ResponseBody = BoxBody<Bytes, BoxError>;

/// Header naming the backend (`127.0.0.1:<port>`) on every answer, so tests see who served.
pub const BACKEND_HEADER: &str = "x-backend";

/// What `/echo` answers: the request as the backend received it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Echo {
    /// `127.0.0.1:<port>` of the backend that answered.
    pub backend: String,
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub version: String,
    /// Lower-case header names; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
}

/// How long a deliberately broken response waits after its last bytes before closing, so
/// those bytes reach the client first.
const BREAK_DELAY: Duration = Duration::from_millis(10);

/// Serves one request. Never fails: errors are responses (or deliberate breakage).
pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Infallible> {
    if req.uri().path() == "/healthz" {
        return Ok(health(&shared).await);
    }
    shared.counters.request();
    if let Some(id) = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
    {
        shared.counters.request_id(id);
    }
    let response = match shared.next_action() {
        Action::Hang => std::future::pending().await,
        Action::Respond { status, latency } => {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if status.is_success() {
                route(&shared, req)
            } else {
                text(
                    &shared,
                    status,
                    format!("backend {} failing\n", shared.port()),
                )
            }
        }
        Action::ResetAfterHeaders => broken(&shared, Bytes::new()),
        Action::CloseMidBody => broken(&shared, Bytes::from_static(b"backend partial ")),
    };
    shared.counters.status(response.status().as_u16());
    Ok(response)
}

async fn health(shared: &Shared) -> Response<ResponseBody> {
    shared.counters.health_check();
    if !shared.behavior().answers_health() {
        std::future::pending::<()>().await;
    }
    if shared.healthz() {
        text(shared, StatusCode::OK, "ok\n".into())
    } else {
        text(
            shared,
            StatusCode::SERVICE_UNAVAILABLE,
            "unhealthy\n".into(),
        )
    }
}

fn route(shared: &Shared, req: Request<Incoming>) -> Response<ResponseBody> {
    match req.uri().path() {
        "/echo" => echo(shared, &req),
        "/echo-body" => {
            let body = req.into_body().map_err(|e| Box::new(e) as BoxError).boxed();
            with_backend(shared, Response::new(body))
        }
        _ => text(
            shared,
            StatusCode::OK,
            format!("backend {}\n", shared.port()),
        ),
    }
}

fn echo(shared: &Shared, req: &Request<Incoming>) -> Response<ResponseBody> {
    let mut headers = BTreeMap::<String, String>::new();
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    let echo = Echo {
        backend: shared.addr().to_string(),
        method: req.method().to_string(),
        uri: req
            .uri()
            .path_and_query()
            .map_or_else(|| "/".into(), ToString::to_string),
        version: format!("{:?}", req.version()),
        headers,
    };
    match serde_json::to_vec(&echo) {
        Ok(json) => {
            let mut response = full(shared, StatusCode::OK, json.into());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => text(shared, StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn text(shared: &Shared, status: StatusCode, body: String) -> Response<ResponseBody> {
    full(shared, status, body.into())
}

fn full(shared: &Shared, status: StatusCode, body: Bytes) -> Response<ResponseBody> {
    let body = Full::new(body).map_err(|never| match never {}).boxed();
    let mut response = with_backend(shared, Response::new(body));
    *response.status_mut() = status;
    response
}

fn with_backend(shared: &Shared, mut response: Response<ResponseBody>) -> Response<ResponseBody> {
    response
        .headers_mut()
        .insert(BACKEND_HEADER, shared.addr_header().clone());
    response
}

/// A 200 whose body announces 64 bytes, sends `sent` of them, then fails, which makes hyper
/// close the connection (HTTP/1.1) or reset the stream (HTTP/2).
fn broken(shared: &Shared, sent: Bytes) -> Response<ResponseBody> {
    let body = BrokenBody {
        chunk: (!sent.is_empty()).then_some(sent),
        delay: Box::pin(tokio::time::sleep(BREAK_DELAY)),
        announced: 64,
    };
    with_backend(shared, Response::new(body.boxed()))
}

struct BrokenBody {
    chunk: Option<Bytes>,
    delay: Pin<Box<Sleep>>,
    announced: u64,
}

impl Body for BrokenBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(chunk) = this.chunk.take() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        ready!(this.delay.as_mut().poll(cx));
        Poll::Ready(Some(Err(
            "rollcall-testkit: response broken on purpose".into()
        )))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.announced)
    }
}
