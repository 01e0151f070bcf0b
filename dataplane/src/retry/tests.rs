use super::*;
use crate::outcome::Outcome;

fn rules() -> RetryRules {
    RetryRules::from_policy(&Retries {
        idempotency_key_header: Some("Idempotency-Key".into()),
        ..Retries::default()
    })
}

fn facts(idempotent: bool) -> RequestFacts {
    RequestFacts {
        idempotent,
        body_replayable: true,
        tries: 1,
    }
}

#[test]
fn what_the_client_caused_is_never_retried() {
    for outcome in [
        Outcome::ClientBodyFailed,
        Outcome::ClientBodyStalled,
        Outcome::DeadlineCut,
    ] {
        assert_eq!(
            rules().decide(outcome, facts(true)),
            Decision::Stop(StopReason::ClientFault),
            "{outcome}"
        );
    }
}

#[test]
fn an_answer_below_500_is_not_a_failure() {
    for status in [200, 302, 404, 429] {
        assert_eq!(
            rules().decide(Outcome::Answered(status), facts(true)),
            Decision::Stop(StopReason::Answered)
        );
    }
}

#[test]
fn never_connected_request_goes_elsewhere_whatever_its_method() {
    assert_eq!(
        rules().decide(Outcome::ConnectFailed, facts(false)),
        Decision::Retry
    );
}

#[test]
fn dead_pooled_connection_is_retried_free_for_any_method() {
    let f = RequestFacts {
        tries: 9,
        ..facts(false)
    };
    assert_eq!(
        rules().decide(Outcome::DeadPooledConnection, f),
        Decision::RetryFree
    );
}

#[test]
fn post_is_not_retried_after_bytes_were_written() {
    assert_eq!(
        rules().decide(Outcome::Reset, facts(false)),
        Decision::Stop(StopReason::NotIdempotent)
    );
    assert_eq!(
        rules().decide(Outcome::Answered(503), facts(false)),
        Decision::Stop(StopReason::NotIdempotent)
    );
}

#[test]
fn get_is_retried_after_reset_only_with_a_replayable_body() {
    assert_eq!(rules().decide(Outcome::Reset, facts(true)), Decision::Retry);
    let streaming = RequestFacts {
        body_replayable: false,
        ..facts(true)
    };
    assert_eq!(
        rules().decide(Outcome::Reset, streaming),
        Decision::Stop(StopReason::BodyNotReplayable)
    );
}

#[test]
fn status_500_is_the_applications_verdict_and_not_retried_by_default() {
    assert_eq!(
        rules().decide(Outcome::Answered(500), facts(true)),
        Decision::Stop(StopReason::NotRetryable)
    );
    for s in [502, 503, 504] {
        assert_eq!(
            rules().decide(Outcome::Answered(s), facts(true)),
            Decision::Retry,
            "{s}"
        );
    }
    let all = RetryRules::from_policy(&Retries {
        retry_on: vec!["5xx".into()],
        ..Retries::default()
    });
    assert_eq!(
        all.decide(Outcome::Answered(500), facts(true)),
        Decision::Retry
    );
    assert_eq!(
        all.decide(Outcome::ConnectFailed, facts(true)),
        Decision::Stop(StopReason::NotRetryable),
        "connect-failure was left out of retryOn"
    );
}

#[test]
fn attempts_bound_every_retry() {
    let f = RequestFacts {
        tries: 2,
        ..facts(true)
    };
    assert_eq!(
        rules().decide(Outcome::ConnectFailed, f),
        Decision::Stop(StopReason::AttemptsExhausted)
    );
    assert_eq!(
        rules().decide(Outcome::Answered(503), f),
        Decision::Stop(StopReason::AttemptsExhausted)
    );
}

#[test]
fn idempotency_key_header_makes_post_retryable() {
    let r = rules();
    let mut headers = http::HeaderMap::new();
    assert!(!r.idempotent(&Method::POST, &headers));
    headers.insert("idempotency-key", "abc".parse().unwrap());
    assert!(r.idempotent(&Method::POST, &headers));
    assert!(r.idempotent(&Method::PUT, &http::HeaderMap::new()));
    assert!(!r.idempotent(&Method::PATCH, &http::HeaderMap::new()));
}

#[test]
fn timeouts_protocol_errors_and_our_own_closes_follow_the_reset_rule() {
    for outcome in [
        Outcome::TimedOut,
        Outcome::ProtocolError,
        Outcome::ClosedLocally,
    ] {
        assert_eq!(
            rules().decide(outcome, facts(true)),
            Decision::Retry,
            "{outcome}"
        );
        assert_eq!(
            rules().decide(outcome, facts(false)),
            Decision::Stop(StopReason::NotIdempotent),
            "{outcome}"
        );
    }
}
