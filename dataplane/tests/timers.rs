//! Every timer fair: the request's clocks start once the client has sent it all, a deadline the
//! client chose never counts against an endpoint, bodies that stall are ended by an idle timeout,
//! retries wait a jittered back-off, a retry is not started when the deadline cannot hold it, and
//! the endpoint of a retry is told what is left of the client's deadline.

mod support;

use std::time::Duration;

use http::{Method, StatusCode};
use rollcall_dataplane::health::machine::State;
use rollcall_dataplane::pool::{PoolView, Tuning};
use rollcall_testkit::client::Conn;
use rollcall_testkit::{Behavior, TestBackend};
use support::backends::{NotReading, Recorder, StallingBody};
use support::raw::{self, Piece};
use support::{Harness, config};

/// No probes and no passive ejection unless a test turns one on.
const QUIET: &str = "healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 0, consecutive5xx: 0, errorRate: {threshold: 0%}}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_trickled_past_the_per_try_timeout_succeeds_and_charges_nothing() {
    // The endpoint answers only once it has the whole body, as most servers do.
    let backend = Recorder::spawn("reader", 200, Duration::ZERO).await;
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 1}, retries: {perTryTimeout: 300ms}, timeouts: {request: 600ms}}";
    let h = Harness::start(&config(&[backend.addr()], policy)).await;
    let mut pieces = vec![Piece::now(raw::chunked_head("/upload"))];
    // A second of upload: longer than the per-try timeout and the whole request timeout.
    for _ in 0..5 {
        pieces.push(Piece::after(
            Duration::from_millis(200),
            raw::chunk(b"0123456789"),
        ));
    }
    pieces.push(Piece::now(raw::LAST_CHUNK));
    let reply = raw::exchange(h.listen("web").await, pieces)
        .await
        .unwrap()
        .expect("an answer");
    assert_eq!(reply.status, 200, "{reply:?} {}", reply.text());
    assert_eq!(reply.text(), "reader says 200\n");
    let ep = h.endpoint("web", backend.addr()).await.unwrap();
    assert_eq!(ep.health.state, State::Healthy, "{ep:#?}");
    assert_eq!(ep.health.consecutive_gateway_errors, 0);
    assert_eq!(ep.health.last_error, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_chosen_deadline_never_counts_against_an_endpoint() {
    let backend = TestBackend::spawn(Behavior::BlackHole).await.unwrap();
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 2}}";
    let h = Harness::start(&config(&[backend.addr()], policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..3 {
        let req = conn
            .request(Method::GET, "/")
            .header("grpc-timeout", "200m")
            .body(Default::default())
            .unwrap();
        let reply = conn.send(req).await.unwrap();
        assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(reply.headers["x-rollcall-reason"], "deadline-exceeded");
    }
    let ep = h.endpoint("web", backend.addr()).await.unwrap();
    assert_ne!(ep.health.state, State::Ejected, "{ep:#?}");
    assert_eq!(ep.health.consecutive_gateway_errors, 0, "{ep:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_response_body_is_ended_by_the_idle_timeout() {
    let backend = StallingBody::spawn().await;
    let tuning = Tuning {
        response_body_idle: Duration::from_millis(300),
        ..Tuning::default()
    };
    let h = Harness::start_with(
        &config(&[backend.addr()], "{healthCheck: {type: None}}"),
        tuning,
    )
    .await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(5), conn.get("/"))
        .await
        .expect("the stalled body was ended by the idle timeout");
    assert!(reply.is_err(), "the body broke off: {reply:?}");
    h.wait_idle("web").await;
    let ep = h.endpoint("web", backend.addr()).await.unwrap();
    assert_eq!(ep.health.consecutive_gateway_errors, 1, "{ep:#?}");
    support::within(async {
        while backend.open_connections() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_wait_a_jittered_back_off() {
    let a = Recorder::spawn("a", 503, Duration::ZERO).await;
    let b = Recorder::spawn("b", 503, Duration::ZERO).await;
    let policy = format!("{{{QUIET}, loadBalancer: {{algorithm: RoundRobin}}}}");
    let h = Harness::start(&config(&[a.addr(), b.addr()], &policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..5 {
        assert_eq!(
            conn.get("/").await.unwrap().status,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
    let mut arrivals: Vec<_> = a.arrivals().into_iter().chain(b.arrivals()).collect();
    arrivals.sort_by_key(|r| r.at);
    assert_eq!(arrivals.len(), 10, "every request was tried twice");
    for pair in arrivals.chunks(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_micros(12_500),
            "the retry came {gap:?} after the first try; the back-off is at least 12.5 ms"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_is_not_started_when_the_deadline_cannot_hold_it() {
    let a = TestBackend::spawn(Behavior::BlackHole).await.unwrap();
    let b = TestBackend::spawn(Behavior::BlackHole).await.unwrap();
    let policy =
        format!("{{{QUIET}, retries: {{perTryTimeout: 400ms}}, timeouts: {{request: 600ms}}}}");
    let h = Harness::start(&config(&[a.addr(), b.addr()], &policy)).await;
    let reply = rollcall_testkit::client::get(h.listen("web").await, "/")
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(reply.headers["x-rollcall-reason"], "upstream-timeout");
    assert_eq!(
        a.requests() + b.requests(),
        1,
        "200 ms were left after a 400 ms try: no second try"
    );
}

/// `grpc-timeout` as a duration.
fn grpc_timeout(value: &str) -> Duration {
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().unwrap();
    match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        other => panic!("unit {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_carries_what_is_left_of_the_clients_grpc_timeout() {
    let slow_fail = Recorder::spawn("slow", 503, Duration::from_millis(300)).await;
    let good = Recorder::spawn("good", 200, Duration::ZERO).await;
    let policy = format!("{{{QUIET}, loadBalancer: {{algorithm: RoundRobin}}}}");
    let h = Harness::start(&config(&[slow_fail.addr(), good.addr()], &policy)).await;
    let mut conn = Conn::http1(h.listen("web").await).await.unwrap();
    for _ in 0..4 {
        let req = conn
            .request(Method::GET, "/")
            .header("grpc-timeout", "2S")
            .body(Default::default())
            .unwrap();
        assert_eq!(conn.send(req).await.unwrap().status, StatusCode::OK);
    }
    let seen: Vec<Duration> = good
        .arrivals()
        .iter()
        .map(|r| grpc_timeout(r.headers["grpc-timeout"].to_str().unwrap()))
        .collect();
    assert!(
        seen.iter().all(|t| *t <= Duration::from_secs(2)),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|t| *t <= Duration::from_millis(1_750)),
        "after a 300 ms try, the retry must carry at most 1.7 s: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_request_body_is_answered_408_and_charges_nothing() {
    let backend = Recorder::spawn("reader", 200, Duration::ZERO).await;
    let tuning = Tuning {
        request_body_idle: Duration::from_millis(300),
        ..Tuning::default()
    };
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 1}}";
    let h = Harness::start_with(&config(&[backend.addr()], policy), tuning).await;
    // Half a body, then nothing: the client hangs on to the connection and never finishes.
    let listen = h.listen("web").await;
    let client = tokio::spawn(raw::exchange(
        listen,
        vec![
            Piece::now(raw::chunked_head("/upload")),
            Piece::now(raw::chunk(b"half")),
            Piece::after(Duration::from_secs(3600), raw::LAST_CHUNK),
        ],
    ));
    let ep = h
        .wait_for("web", "the stalled upload to end", |v| {
            v.endpoints.iter().all(|e| e.in_flight == 0)
                && h.metrics()
                    .contains(r#"rollcall_requests_total{outcome="client_error",pool="web"} 1"#)
        })
        .await;
    client.abort();
    let ep = &ep.endpoints[0];
    assert_eq!(ep.health.state, State::Unknown, "{ep:#?}");
    assert_eq!(ep.health.consecutive_gateway_errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_stops_taking_an_upload_is_timed_out_and_charged() {
    // The upload's clocks wait for the client to finish it; when the endpoint is what holds
    // it up, the request-body idle timeout applies to the endpoint instead.
    let backend = NotReading::spawn().await;
    let tuning = Tuning {
        request_body_idle: Duration::from_millis(300),
        ..Tuning::default()
    };
    let policy = "{healthCheck: {type: None}, outlierDetection: {consecutiveGatewayErrors: 5}}";
    let h = Harness::start_with(&config(&[backend.addr()], policy), tuning).await;
    let mut pieces = vec![Piece::now(raw::chunked_head("/upload"))];
    let block = vec![b'x'; 64 * 1024];
    for _ in 0..256 {
        pieces.push(Piece::now(raw::chunk(&block)));
    }
    let client = tokio::spawn(raw::exchange(h.listen("web").await, pieces));
    let view = h
        .wait_for("web", "the stuck upload to be ended", |v: &PoolView| {
            v.endpoints
                .iter()
                .all(|e| e.in_flight == 0 && e.health.consecutive_gateway_errors == 1)
        })
        .await;
    assert!(
        view.endpoints[0]
            .health
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("took none of the request body"),
        "{view:#?}"
    );
    client.abort();
}
