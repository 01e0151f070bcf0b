//! A try's record is settled exactly once, with the outcome its ending calls for, whichever way
//! the try ends: a property test over generated endings, with the response body driven through
//! the real `TrackedBody` on a paused clock. What is observed is what the rest of the sidecar
//! sees: `rollcall_attempts_total`, the health machine's window (through the pool's owner), and
//! the balancer's in-flight count.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper_util::rt::TokioIo;
use proptest::prelude::*;
use tokio::time::Instant;
use tokio_stream::StreamExt;

use super::TryRecord;
use crate::grpc_status::{Code, http_equivalent};
use crate::metrics::{ATTEMPT_OUTCOMES, Metrics};
use crate::outcome::{Outcome, Verdict};
use crate::pool::{Endpoint, Pool};
use crate::proxy::client_body::Progress;
use crate::proxy::response_body::{Answered, TrackedBody};
use crate::upstream::Release;

const POOL: &str = "shop/web";
const BODY_IDLE: Duration = Duration::from_secs(5);

/// How the try's wait ended.
#[derive(Clone, Copy, Debug)]
enum Head {
    /// The client left while the try waited.
    None,
    /// A failure with no answer.
    Failed(Outcome),
    /// An answer's head; `grpc_trailers`: a gRPC 200 judged by its trailers.
    Answered { status: u16, grpc_trailers: bool },
}

/// One step of the endpoint's response body.
#[derive(Clone, Debug)]
enum Step {
    Data,
    /// The trailers, with this `grpc-status` (none: trailers without one).
    Trailers(Option<i32>),
    /// The body breaks off.
    Error,
    /// The body sends nothing from here on (cut after the idle timeout).
    Silent,
}

/// How the try ends after its head.
#[derive(Clone, Debug)]
enum After {
    /// Settled where it stands (retried, or answered by the sidecar).
    Settled,
    /// Dropped as it is (the client left).
    Dropped,
    /// The answer goes to the client: its body's steps, how many frames the client reads
    /// before it leaves (`None`: to the end), and whether the client's own body broke first.
    Body {
        steps: Vec<Step>,
        reads: Option<usize>,
        client_fault: bool,
    },
}

fn head() -> impl Strategy<Value = Head> {
    prop_oneof![
        Just(Head::None),
        prop::sample::select(vec![
            Outcome::ConnectFailed,
            Outcome::Reset,
            Outcome::TimedOut,
            Outcome::DeadlineCut,
            Outcome::ClientBodyFailed,
            Outcome::DeadPooledConnection,
        ])
        .prop_map(Head::Failed),
        (
            prop::sample::select(vec![200u16, 204, 404, 500, 503]),
            any::<bool>()
        )
            .prop_map(|(status, grpc)| Head::Answered {
                status,
                grpc_trailers: grpc && status == 200,
            }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Data),
        1 => prop::option::of(prop::sample::select(vec![0, 2, 4, 5, 13, 14])).prop_map(Step::Trailers),
        1 => Just(Step::Error),
        1 => Just(Step::Silent),
    ]
}

fn after() -> impl Strategy<Value = After> {
    prop_oneof![
        Just(After::Settled),
        Just(After::Dropped),
        (
            prop::collection::vec(step(), 0..6),
            prop::option::of(0usize..6),
            any::<bool>()
        )
            .prop_map(|(steps, reads, client_fault)| After::Body {
                steps,
                reads,
                client_fault
            }),
    ]
}

/// The outcome the try must be settled with, worked out from the ending alone.
fn expected(head: Head, after: &After) -> Outcome {
    let (status, grpc_trailers) = match head {
        Head::None => return Outcome::ClientLeft,
        Head::Failed(outcome) => return outcome,
        Head::Answered {
            status,
            grpc_trailers,
        } => (status, grpc_trailers),
    };
    let standing = if grpc_trailers {
        Outcome::ClientLeft
    } else {
        Outcome::Answered(status)
    };
    let After::Body {
        steps,
        reads,
        client_fault,
    } = after
    else {
        return standing;
    };
    for (read, step) in steps.iter().enumerate() {
        if reads.is_some_and(|limit| read >= limit) {
            return standing;
        }
        match step {
            Step::Data => {}
            Step::Trailers(code) => {
                // Trailers are the last frame a body can send.
                return ended(status, grpc_trailers, code.map(Code::from_i32));
            }
            Step::Error | Step::Silent if *client_fault => return Outcome::ClientBodyFailed,
            Step::Error | Step::Silent => return Outcome::Reset,
        }
    }
    // Only data: the end is one more read.
    if reads.is_some_and(|limit| steps.len() >= limit) {
        return standing;
    }
    ended(status, grpc_trailers, None)
}

fn ended(status: u16, grpc_trailers: bool, grpc_status: Option<Code>) -> Outcome {
    if grpc_trailers {
        Outcome::Answered(http_equivalent(grpc_status.unwrap_or(Code::Unknown)))
    } else {
        Outcome::Answered(status)
    }
}

/// The frames a body plays, up to its trailers (nothing can follow them), an error or its
/// silence; and whether it then falls silent.
fn frames(steps: &[Step]) -> (Vec<Result<Frame<Bytes>, std::io::Error>>, bool) {
    let mut frames = Vec::new();
    for step in steps {
        match step {
            Step::Data => frames.push(Ok(Frame::data(Bytes::from_static(b"chunk")))),
            Step::Trailers(code) => {
                let mut trailers = HeaderMap::new();
                if let Some(code) = code {
                    trailers.insert("grpc-status", HeaderValue::from(*code));
                }
                frames.push(Ok(Frame::trailers(trailers)));
                break;
            }
            Step::Error => {
                frames.push(Err(std::io::Error::other("endpoint reset the stream")));
                break;
            }
            Step::Silent => return (frames, true),
        }
    }
    (frames, false)
}

struct Fixture {
    metrics: Arc<Metrics>,
    pool: Arc<Pool>,
    endpoint: Arc<Endpoint>,
}

impl Fixture {
    async fn new() -> Self {
        let metrics = Arc::new(Metrics::new().expect("metrics"));
        let addr: SocketAddr = "127.0.0.1:9".parse().expect("address");
        let pool = Pool::with_one_endpoint(POOL, addr, Arc::clone(&metrics)).await;
        let Ok(endpoint) = pool.routing().pick(None, &[], Instant::now()) else {
            panic!("the one endpoint is not routable");
        };
        Self {
            metrics,
            pool,
            endpoint,
        }
    }

    /// `rollcall_attempts_total` of the endpoint, by outcome label.
    fn attempts(&self) -> Vec<(&'static str, u64)> {
        let addr = self.endpoint.addr().to_string();
        ATTEMPT_OUTCOMES
            .iter()
            .map(|label| {
                let counter = self
                    .metrics
                    .attempts
                    .with_label_values(&[POOL, &addr, label]);
                (*label, counter.get())
            })
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    /// The health machine's window for the endpoint: (requests, failures), once every verdict
    /// sent so far is in.
    async fn window(&self) -> (u64, u64) {
        let view = self.pool.view().await.expect("pool running");
        let health = &view.endpoints[0].health;
        (health.window_requests, health.window_failures)
    }
}

/// An idle HTTP/1 connection to give back, as an answered try holds one.
async fn release() -> Release {
    let (ours, theirs) = tokio::io::duplex(64);
    let (sender, connection) =
        hyper::client::conn::http1::handshake::<_, crate::upstream::ProxyBody>(TokioIo::new(ours))
            .await
            .expect("in-memory handshake");
    tokio::spawn(connection);
    // Keep the far end open for as long as the test runs.
    std::mem::forget(theirs);
    Release::Http1(sender)
}

/// Play one ending through the record (and the body, when the answer goes to the client).
async fn play(fx: &Fixture, head: Head, after: After) {
    let now = Instant::now();
    let mut record = TryRecord::start(&fx.pool, Arc::clone(&fx.endpoint), now);
    let (status, grpc_trailers) = match head {
        Head::None => return drop(record),
        Head::Failed(outcome) => {
            record.answered(outcome, Instant::now(), false);
            return match after {
                After::Dropped => drop(record),
                _ => record.finish_as_it_stands("failed"),
            };
        }
        Head::Answered {
            status,
            grpc_trailers,
        } => (status, grpc_trailers),
    };
    record.answered(Outcome::Answered(status), Instant::now(), grpc_trailers);
    let (steps, reads, client_fault) = match after {
        After::Settled => return record.finish_as_it_stands(""),
        After::Dropped => return drop(record),
        After::Body {
            steps,
            reads,
            client_fault,
        } => (steps, reads, client_fault),
    };
    let client = Arc::new(Progress::default());
    if client_fault {
        client.failed(false);
    }
    let (frames, silent) = frames(&steps);
    let played = tokio_stream::iter(frames);
    let body = if silent {
        StreamBody::new(played.chain(tokio_stream::pending())).boxed_unsync()
    } else {
        StreamBody::new(played).boxed_unsync()
    };
    let answered = Answered {
        response: Response::new(body),
        release: release().await,
        endpoint: Arc::clone(&fx.endpoint),
        record: Some(record),
        client,
    };
    let mut response = TrackedBody::wrap(answered, BODY_IDLE).into_body();
    let mut read = 0;
    while reads.is_none_or(|limit| read < limit) {
        match response.frame().await {
            Some(Ok(_)) => read += 1,
            Some(Err(_)) | None => break,
        }
    }
    drop(response);
}

fn verdict_counts(outcome: Outcome) -> (u64, u64) {
    match outcome.verdict() {
        Verdict::ClientError | Verdict::NotTheEndpoint => (0, 0),
        Verdict::Success => (1, 0),
        Verdict::ServerError | Verdict::GatewayError | Verdict::ConnectionFailure => (1, 1),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_try_is_settled_once_with_the_outcome_its_ending_calls_for(
        head in head(),
        after in after(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let want = expected(head, &after);
        let (attempts, window, in_flight) = runtime.block_on(async {
            let fx = Fixture::new().await;
            play(&fx, head, after.clone()).await;
            (fx.attempts(), fx.window().await, fx.endpoint.load.outstanding())
        });
        prop_assert_eq!(attempts, vec![(want.attempt_label(), 1)], "want {}", want);
        prop_assert_eq!(window, verdict_counts(want), "want {}", want);
        prop_assert_eq!(in_flight, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_that_breaks_after_a_good_head_is_one_failure_not_a_success_and_a_failure() {
    let fx = Fixture::new().await;
    let after = After::Body {
        steps: vec![Step::Data, Step::Error],
        reads: None,
        client_fault: false,
    };
    let head = Head::Answered {
        status: 200,
        grpc_trailers: false,
    };
    play(&fx, head, after).await;
    assert_eq!(fx.attempts(), vec![("gateway_error", 1)]);
    assert_eq!(fx.window().await, (1, 1));
}

#[tokio::test(start_paused = true)]
async fn the_balancer_learns_the_time_to_the_head_not_how_long_the_body_stayed_open() {
    let fx = Fixture::new().await;
    let mut record = TryRecord::start(&fx.pool, Arc::clone(&fx.endpoint), Instant::now());
    tokio::time::advance(Duration::from_millis(20)).await;
    record.answered(Outcome::Answered(200), Instant::now(), false);
    tokio::time::advance(Duration::from_secs(30)).await;
    record.finish_as_it_stands("");
    let latency = fx.endpoint.load.latency(Instant::now());
    assert_eq!(latency, Some(Duration::from_millis(20)));
}
