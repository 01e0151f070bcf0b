use http::{HeaderMap, HeaderValue, StatusCode};

use super::{code, code_for, http_equivalent, is_grpc, local_answer, status};
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
    assert_eq!(status(&with("grpc-status", "14")), Some(14));
    assert_eq!(status(&with("grpc-status", " 0 ")), Some(0));
    assert_eq!(status(&with("grpc-status", "fourteen")), None);
    assert_eq!(status(&with("grpc-status", "-1")), None);
    assert_eq!(status(&HeaderMap::new()), None);
}

#[test]
fn unavailable_is_a_gateway_error_and_application_codes_are_the_clients() {
    let verdict = |c| Verdict::from_status(http_equivalent(c));
    assert_eq!(verdict(code::OK), Verdict::Success);
    assert_eq!(verdict(code::UNAVAILABLE), Verdict::GatewayError);
    assert_eq!(verdict(code::DEADLINE_EXCEEDED), Verdict::GatewayError);
    for server in [code::UNKNOWN, code::INTERNAL, code::DATA_LOSS, 17, 999] {
        assert_eq!(verdict(server), Verdict::ServerError, "code {server}");
    }
    for client in [
        code::CANCELLED,
        code::INVALID_ARGUMENT,
        code::NOT_FOUND,
        code::ALREADY_EXISTS,
        code::PERMISSION_DENIED,
        code::RESOURCE_EXHAUSTED,
        code::FAILED_PRECONDITION,
        code::ABORTED,
        code::OUT_OF_RANGE,
        code::UNIMPLEMENTED,
        code::UNAUTHENTICATED,
    ] {
        assert_eq!(verdict(client), Verdict::ClientError, "code {client}");
    }
    assert_eq!(
        http_equivalent(code::UNAVAILABLE),
        503,
        "retried like a 503"
    );
}

#[test]
fn the_sidecars_own_answers_map_to_what_a_grpc_client_acts_on() {
    assert_eq!(code_for(503, "no-healthy-endpoints"), code::UNAVAILABLE);
    assert_eq!(code_for(502, "upstream-connect-failure"), code::UNAVAILABLE);
    assert_eq!(code_for(504, "upstream-timeout"), code::UNAVAILABLE);
    assert_eq!(code_for(504, "deadline-exceeded"), code::DEADLINE_EXCEEDED);
    assert_eq!(code_for(400, "bad-request"), code::INTERNAL);
    assert_eq!(code_for(413, "whatever"), code::UNKNOWN);
}

#[test]
fn a_local_answer_is_trailers_only_with_an_encoded_message() {
    let r = local_answer(503, "no-healthy-endpoints", "no endpoint: 100% ejected ✗");
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
