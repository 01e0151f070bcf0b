use http::{HeaderMap, HeaderValue, StatusCode};

use super::{Code, code_for, http_equivalent, is_grpc, local_answer, status};
use crate::local_answer::LocalReason;
use crate::outcome::Verdict;

fn with(name: &'static str, value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(name, HeaderValue::from_str(value).expect("header"));
    h
}

#[test]
fn grpc_requests_are_told_by_their_content_type() {
    for yes in [
        "application/grpc",
        "application/grpc+proto",
        "application/grpc;charset=utf-8",
        "Application/GRPC",
    ] {
        assert!(is_grpc(&with("content-type", yes)), "{yes}");
    }
    for no in [
        "application/grpc-web",
        "application/grpcx",
        "application/json",
        "grpc",
    ] {
        assert!(!is_grpc(&with("content-type", no)), "{no}");
    }
    assert!(!is_grpc(&HeaderMap::new()));
}

#[test]
fn grpc_status_is_read_only_when_well_formed() {
    assert_eq!(status(&with("grpc-status", "14")), Some(Code::Unavailable));
    assert_eq!(status(&with("grpc-status", " 0 ")), Some(Code::Ok));
    // A code no gRPC version defines yet is a well-formed status: Unknown.
    assert_eq!(status(&with("grpc-status", "17")), Some(Code::Unknown));
    assert_eq!(
        status(&with("grpc-status", "4294967295")),
        Some(Code::Unknown)
    );
    assert_eq!(status(&with("grpc-status", "fourteen")), None);
    assert_eq!(status(&with("grpc-status", "-1")), None);
    assert_eq!(status(&HeaderMap::new()), None);
}

#[test]
fn unavailable_is_a_gateway_error_and_application_codes_are_the_clients() {
    let verdict = |c| Verdict::from_status(http_equivalent(c));
    assert_eq!(verdict(Code::Ok), Verdict::Success);
    assert_eq!(verdict(Code::Unavailable), Verdict::GatewayError);
    assert_eq!(verdict(Code::DeadlineExceeded), Verdict::GatewayError);
    for server in [Code::Unknown, Code::Internal, Code::DataLoss] {
        assert_eq!(verdict(server), Verdict::ServerError, "code {server:?}");
    }
    for client in [
        Code::Cancelled,
        Code::InvalidArgument,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Unauthenticated,
    ] {
        assert_eq!(verdict(client), Verdict::ClientError, "code {client:?}");
    }
    assert_eq!(
        http_equivalent(Code::Unavailable),
        503,
        "retried like a 503"
    );
}

#[test]
fn the_sidecars_own_answers_map_to_what_a_grpc_client_acts_on() {
    assert_eq!(
        code_for(503, LocalReason::NoHealthyEndpoints),
        Code::Unavailable
    );
    assert_eq!(
        code_for(502, LocalReason::UpstreamConnectFailure),
        Code::Unavailable
    );
    assert_eq!(
        code_for(504, LocalReason::UpstreamTimeout),
        Code::Unavailable
    );
    assert_eq!(
        code_for(504, LocalReason::DeadlineExceeded),
        Code::DeadlineExceeded
    );
    assert_eq!(code_for(400, LocalReason::BadRequest), Code::Internal);
    assert_eq!(code_for(413, LocalReason::ClientBodyError), Code::Unknown);
}

#[test]
fn a_local_answer_is_trailers_only_with_an_encoded_message() {
    let r = local_answer(
        503,
        LocalReason::NoHealthyEndpoints,
        "no endpoint: 100% ejected ✗",
    );
    assert_eq!(r.status(), StatusCode::OK);
    let h = r.headers();
    assert_eq!(h["content-type"], "application/grpc");
    assert_eq!(h["grpc-status"], "14");
    assert_eq!(h["grpc-message"], "no endpoint: 100%25 ejected %E2%9C%97");
    assert_eq!(h["x-rollcall-reason"], "no-healthy-endpoints");
    assert!(
        http_body::Body::is_end_stream(r.body()),
        "no body: trailers-only"
    );
}
