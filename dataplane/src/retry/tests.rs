use super::*;

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
        client_gone: false,
        tries: 1,
    }
}

#[test]
fn client_gone_is_never_retried() {
    let f = RequestFacts {
        client_gone: true,
        ..facts(true)
    };
    for failure in [
        Failure::ConnectFailed,
        Failure::DeadPooledConnection,
        Failure::Reset,
        Failure::Status(503),
    ] {
        assert_eq!(
            rules().decide(failure, f),
            Decision::Stop(StopReason::ClientGone)
        );
    }
}

#[test]
fn never_connected_request_goes_elsewhere_whatever_its_method() {
    assert_eq!(
        rules().decide(Failure::ConnectFailed, facts(false)),
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
        rules().decide(Failure::DeadPooledConnection, f),
        Decision::RetryFree
    );
}

#[test]
fn post_is_not_retried_after_bytes_were_written() {
    assert_eq!(
        rules().decide(Failure::Reset, facts(false)),
        Decision::Stop(StopReason::NotIdempotent)
    );
    assert_eq!(
        rules().decide(Failure::Status(503), facts(false)),
        Decision::Stop(StopReason::NotIdempotent)
    );
}

#[test]
fn get_is_retried_after_reset_only_with_a_replayable_body() {
    assert_eq!(rules().decide(Failure::Reset, facts(true)), Decision::Retry);
    let streaming = RequestFacts {
        body_replayable: false,
        ..facts(true)
    };
    assert_eq!(
        rules().decide(Failure::Reset, streaming),
        Decision::Stop(StopReason::BodyNotReplayable)
    );
}

#[test]
fn status_500_is_the_applications_verdict_and_not_retried_by_default() {
    assert_eq!(
        rules().decide(Failure::Status(500), facts(true)),
        Decision::Stop(StopReason::NotRetryable)
    );
    for s in [502, 503, 504] {
        assert_eq!(
            rules().decide(Failure::Status(s), facts(true)),
            Decision::Retry,
            "{s}"
        );
    }
    let all = RetryRules::from_policy(&Retries {
        retry_on: vec!["5xx".into()],
        ..Retries::default()
    });
    assert_eq!(
        all.decide(Failure::Status(500), facts(true)),
        Decision::Retry
    );
    assert_eq!(
        all.decide(Failure::ConnectFailed, facts(true)),
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
        rules().decide(Failure::ConnectFailed, f),
        Decision::Stop(StopReason::AttemptsExhausted)
    );
    assert_eq!(
        rules().decide(Failure::Status(503), f),
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
