//! gRPC through the sidecar against h2c backends that answer like gRPC servers: the call's
//! `grpc-status`, not the HTTP 200 around it, decides retries and outlier detection, and the
//! sidecar's own answers reach a gRPC client as gRPC statuses.

mod support;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use rollcall_dataplane::health::machine::{Reason, State};
use rollcall_dataplane::pool::PoolView;
use rollcall_testkit::client::{Conn, Reply};
use support::backends::{GrpcAnswer, GrpcBackend};
use support::{Harness, config};

const UNAVAILABLE: u32 = 14;
const INVALID_ARGUMENT: u32 = 3;

/// One unary call on `conn`: a 2-byte message.
async fn call(conn: &mut Conn) -> Reply {
    let req = conn
        .request(Method::POST, "/shop.Checkout/Pay")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1])))
        .expect("request");
    conn.send(req).await.expect("call")
}

/// The call's `grpc-status`: from the headers (trailers-only) or the trailers.
fn grpc_status(reply: &Reply) -> Option<u32> {
    let from = |h: &http::HeaderMap| h.get("grpc-status")?.to_str().ok()?.parse().ok();
    from(&reply.headers).or_else(|| reply.trailers.as_ref().and_then(from))
}

fn grpc_pool(addrs: &[std::net::SocketAddr], outlier: &str) -> String {
    config(
        addrs,
        &format!("{{protocol: GRPC, healthCheck: {{type: None}}, outlierDetection: {outlier}}}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_call_is_retried_on_another_endpoint_and_counts_against_the_first() {
    let down = GrpcBackend::spawn(GrpcAnswer::TrailersOnly(UNAVAILABLE)).await;
    let up = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    let h = Harness::start(&grpc_pool(
        &[down.addr(), up.addr()],
        // The error rate is off: it may judge `down` first, and this is about the streak.
        "{consecutiveGatewayErrors: 3, maxEjectionPercent: 50, errorRate: {threshold: 0%}}",
    ))
    .await;
    let mut conn = Conn::h2c(h.listen("web").await).await.expect("h2c");
    // In a pool this fresh the peer's share is not known yet, so the run of UNAVAILABLE
    // answers asked for is longer than the limit until `up` has answered enough
    // (`outlier::streak`); every call succeeds meanwhile, retried on `up`.
    let state = |view: PoolView| {
        view.endpoints
            .into_iter()
            .find(|e| e.health.address == down.addr())
            .map(|e| e.health.state)
    };
    for _ in 0..200 {
        if state(h.pool("web").await) == Some(State::Ejected) {
            break;
        }
        let reply = call(&mut conn).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(grpc_status(&reply), Some(0), "{reply:?}");
    }
    let ejected = h.wait_for_state("web", down.addr(), State::Ejected).await;
    assert_eq!(ejected.health.reason, Reason::ConsecutiveGatewayErrors);
    assert!(down.calls() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_error_is_the_callers_answer_never_retried_nor_held_against_the_endpoint() {
    let picky = GrpcBackend::spawn(GrpcAnswer::TrailersOnly(INVALID_ARGUMENT)).await;
    let other = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    let h = Harness::start(&grpc_pool(
        &[picky.addr(), other.addr()],
        "{consecutiveGatewayErrors: 1, consecutive5xx: 1, errorRate: {threshold: 1%, minRequests: 1}}",
    ))
    .await;
    let mut conn = Conn::h2c(h.listen("web").await).await.expect("h2c");
    let mut refused = 0;
    for _ in 0..60 {
        let reply = call(&mut conn).await;
        match grpc_status(&reply) {
            Some(INVALID_ARGUMENT) => refused += 1,
            status => assert_eq!(status, Some(0), "{reply:?}"),
        }
    }
    assert_eq!(
        picky.calls() + other.calls(),
        60,
        "one try per call: an application error is not retried"
    );
    assert_eq!(refused, picky.calls());
    let view = h.endpoint("web", picky.addr()).await.expect("endpoint");
    assert_ne!(view.health.state, State::Ejected, "{:?}", view.health);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_in_the_trailers_is_judged_when_they_arrive() {
    let failing = GrpcBackend::spawn(GrpcAnswer::Trailers(UNAVAILABLE)).await;
    let fine = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    let h = Harness::start(&grpc_pool(
        &[failing.addr(), fine.addr()],
        // The error rate is off: it may judge `failing` first (a CI run saw it), and this is
        // about the streak judged at the trailers.
        "{consecutiveGatewayErrors: 3, errorRate: {threshold: 0%}}",
    ))
    .await;
    let mut conn = Conn::h2c(h.listen("web").await).await.expect("h2c");
    // Each call's answer has already streamed to the client when its status arrives: the
    // client sees it, and the endpoint is charged for it. An answered UNAVAILABLE is judged
    // against the peer, and in a pool this fresh the peer's share is not known yet, so the
    // run asked for is longer than the limit until the fine endpoint has answered enough
    // (`outlier::streak`: 24 at most).
    let mut unavailable = 0;
    let ejected = loop {
        let view = h.pool("web").await;
        let failing_view = view
            .endpoints
            .into_iter()
            .find(|e| e.health.address == failing.addr())
            .expect("endpoint present");
        if failing_view.health.state == State::Ejected {
            break failing_view;
        }
        assert!(
            failing.calls() <= 24,
            "not ejected after {} calls",
            failing.calls()
        );
        let reply = call(&mut conn).await;
        if grpc_status(&reply) == Some(UNAVAILABLE) {
            unavailable += 1;
        }
    };
    assert!(unavailable >= 3);
    assert_eq!(ejected.health.reason, Reason::ConsecutiveGatewayErrors);
    // The other one's successes, judged at their trailers too, make it healthy.
    let reply = call(&mut conn).await;
    assert_eq!(grpc_status(&reply), Some(0));
    h.wait_for_state("web", fine.addr(), State::Healthy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecars_own_answers_are_grpc_statuses() {
    // Nothing listens: every try fails to connect.
    let nothing = support::free_port();
    let h = Harness::start(&grpc_pool(&[nothing], "{}")).await;
    let mut conn = Conn::h2c(h.listen("web").await).await.expect("h2c");
    let reply = call(&mut conn).await;
    assert_eq!(reply.status, StatusCode::OK, "gRPC errors ride on HTTP 200");
    assert_eq!(reply.headers["content-type"], "application/grpc");
    assert_eq!(grpc_status(&reply), Some(UNAVAILABLE));
    let message = reply.headers["grpc-message"].to_str().expect("ascii");
    assert!(message.contains("connect"), "{message}");
    assert!(reply.body.is_empty(), "trailers-only");
    assert!(reply.headers.contains_key("x-rollcall-reason"));
}

const GRPC_PROBES: &str = "{type: GRPC, interval: 100ms, timeout: 100ms, jitter: 0%, healthyThreshold: 2, unhealthyThreshold: 3}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_probes_admit_serving_endpoints_and_eject_one_that_stops_serving() {
    let a = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    let b = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    let h = Harness::start(&config(
        &[a.addr(), b.addr()],
        &format!("{{protocol: GRPC, healthCheck: {GRPC_PROBES}}}"),
    ))
    .await;
    h.wait_for_state("web", a.addr(), State::Healthy).await;
    h.wait_for_state("web", b.addr(), State::Healthy).await;
    a.set_serving(Some(false));
    let ejected = h.wait_for_state("web", a.addr(), State::Ejected).await;
    assert_eq!(ejected.health.reason, Reason::ProbeFailures);
    let error = ejected.health.last_error.unwrap_or_default();
    assert!(error.contains("not serving"), "{error}");
    a.set_serving(Some(true));
    h.wait_for_state("web", a.addr(), State::Probation).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_health_service_is_told_apart() {
    let a = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    let b = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    a.set_serving(None);
    let h = Harness::start(&config(
        &[a.addr(), b.addr()],
        &format!("{{protocol: GRPC, healthCheck: {GRPC_PROBES}}}"),
    ))
    .await;
    let ejected = h.wait_for_state("web", a.addr(), State::Ejected).await;
    let error = ejected.health.last_error.unwrap_or_default();
    assert!(error.contains("UNIMPLEMENTED"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_probes_speak_http2_to_an_http2_pool() {
    // These backends speak only HTTP/2 (prior knowledge): an HTTP/1.1 probe would fail.
    let a = GrpcBackend::spawn(GrpcAnswer::Trailers(0)).await;
    let h = Harness::start(&config(
        &[a.addr()],
        "{protocol: HTTP2, healthCheck: {type: HTTP, path: /healthz, interval: 100ms, timeout: 100ms}}",
    ))
    .await;
    let healthy = h.wait_for_state("web", a.addr(), State::Healthy).await;
    assert_eq!(healthy.health.reason, Reason::ProbeSucceeded);
}
