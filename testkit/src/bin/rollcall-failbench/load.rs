//! Open-loop client traffic: a fixed number of requests per second, each sent on schedule
//! whatever happened to the previous ones (so a stalled backend cannot slow the load down and
//! hide its own latency), over a pool of keep-alive connections that grows only when every
//! connection is busy. One request in five is a `POST` (which no proxy here retries after it was
//! sent), the rest `GET`s; each carries `x-request-id: post-<n>` or `get-<n>`, so the backends can
//! tell a request that reached them twice. No client retries: what this client sees is what a user would see.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header;
use parking_lot::Mutex;
use rollcall_testkit::client::Conn;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior, timeout};

/// One request as the client saw it.
#[derive(Clone, Debug)]
pub struct Record {
    /// When it was due, from the start of the load.
    pub at: Duration,
    /// From when it was due to its answer (or failure).
    pub latency: Duration,
    /// `None` for a 2xx; otherwise the kind: a status (`503`), `timeout`, `reset/closed`,
    /// `connect error`.
    pub failure: Option<String>,
    /// A `POST` (one in five), not a `GET`.
    pub post: bool,
}

/// Every how many requests one is a `POST`.
const POST_EVERY: u64 = 5;

/// Running load; [`Load::finish`] stops it and hands the records over. Dropping it aborts
/// everything at once.
pub struct Load {
    records: Arc<Mutex<Vec<Record>>>,
    dispatcher: JoinSet<()>,
    stop: Option<oneshot::Sender<()>>,
    pub started: Instant,
}

impl Load {
    /// Sends `GET /` to `target` at `rate` per second, each with `client_timeout` (connect
    /// included).
    pub fn start(target: SocketAddr, rate: u32, client_timeout: Duration) -> Self {
        let records = Arc::new(Mutex::new(Vec::new()));
        let started = Instant::now();
        let (stop, stopped) = oneshot::channel();
        let mut dispatcher = JoinSet::new();
        dispatcher.spawn(dispatch(
            target,
            Pace {
                rate,
                client_timeout,
                started,
            },
            records.clone(),
            stopped,
        ));
        Self {
            records,
            dispatcher,
            stop: Some(stop),
            started,
        }
    }

    /// Stops sending, waits for the requests in flight (each bounded by the client timeout),
    /// and returns every record sorted by due time.
    pub async fn finish(mut self) -> Vec<Record> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        while self.dispatcher.join_next().await.is_some() {}
        let mut records = std::mem::take(&mut *self.records.lock());
        records.sort_by_key(|r| r.at);
        records
    }
}

#[derive(Clone, Copy)]
struct Pace {
    rate: u32,
    client_timeout: Duration,
    started: Instant,
}

async fn dispatch(
    target: SocketAddr,
    pace: Pace,
    records: Arc<Mutex<Vec<Record>>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let Pace {
        rate,
        client_timeout,
        started,
    } = pace;
    let idle: Arc<Mutex<Vec<Conn>>> = Arc::new(Mutex::new(Vec::new()));
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1))));
    // Open loop: a late tick is sent at once (Burst), never skipped.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut requests = JoinSet::new();
    for index in 0u64.. {
        let due = tokio::select! {
            due = ticks.tick() => due,
            _ = &mut stopped => break,
        };
        let post = index % POST_EVERY == POST_EVERY - 1;
        while requests.try_join_next().is_some() {}
        let (idle, records) = (idle.clone(), records.clone());
        requests.spawn(async move {
            let pooled = idle.lock().pop();
            let (failure, conn) = timeout(client_timeout, one_request(target, pooled, post, index))
                .await
                .unwrap_or_else(|_| (Some("timeout".to_owned()), None));
            if let Some(conn) = conn {
                idle.lock().push(conn);
            }
            records.lock().push(Record {
                at: due.duration_since(started),
                latency: due.elapsed(),
                failure,
                post,
            });
        });
    }
    while requests.join_next().await.is_some() {}
}

/// One `GET /` (or `POST /` with a small body) on `pooled` (or a new connection); gives the
/// connection back when it is still good for another request.
async fn one_request(
    target: SocketAddr,
    pooled: Option<Conn>,
    post: bool,
    index: u64,
) -> (Option<String>, Option<Conn>) {
    let mut conn = match pooled {
        Some(conn) if !conn.is_closed() => conn,
        _ => match Conn::http1(target).await {
            Ok(conn) => conn,
            Err(_) => return (Some("connect error".into()), None),
        },
    };
    let (method, id) = if post {
        (http::Method::POST, format!("post-{index}"))
    } else {
        (http::Method::GET, format!("get-{index}"))
    };
    let body = if post {
        &b"order=42&items=3"[..]
    } else {
        &b""[..]
    };
    let request = conn
        .request(method, "/")
        .header("x-request-id", id)
        .body(http_body_util::Full::new(bytes::Bytes::from_static(body)));
    let reply = match request {
        Ok(request) => conn.send(request).await,
        Err(_) => return (Some("bad request".into()), None),
    };
    match reply {
        Ok(reply) => {
            // A connection the server announced it closes is not reused: reusing it would count
            // the client's own mistake as a failure.
            let closing = reply
                .headers
                .get(header::CONNECTION)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            let conn = (!closing).then_some(conn);
            if reply.status.is_success() {
                (None, conn)
            } else {
                (Some(reply.status.as_u16().to_string()), conn)
            }
        }
        Err(_) => (Some("reset/closed".into()), None),
    }
}
