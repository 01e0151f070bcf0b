//! The planner, table by table: what each kind of try ending leads to, with the clock, the
//! budget and what is left of the pool injected.

use std::net::SocketAddr;
use std::time::Duration;

use rollcall_api::policy::Retries;
use tokio::time::Instant;

use super::*;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 80))
}

fn local(status: u16, reason: LocalReason) -> Next {
    Next::Answer(Answer::Local(LocalAnswer { status, reason }))
}

fn retry(after: Duration, reason: RetryReason, keep_answer: bool) -> Next {
    Next::Retry {
        after,
        reason,
        keep_answer,
    }
}

/// One row: a request, the tries before (each retried), then the try under test.
struct Case {
    name: &'static str,
    idempotent: bool,
    /// The client's `grpc-timeout`.
    client: Option<Duration>,
    request_timeout: Duration,
    per_try: Duration,
    before: &'static [Outcome],
    outcome: Outcome,
    /// How long the try under test took.
    took: Duration,
    untried_left: bool,
    budget_left: bool,
    expect: Next,
}

const DEFAULT: Case = Case {
    name: "",
    idempotent: true,
    client: None,
    request_timeout: Duration::from_secs(12),
    per_try: Duration::from_secs(4),
    before: &[],
    outcome: Outcome::Answered(200),
    took: Duration::from_millis(5),
    untried_left: true,
    budget_left: true,
    expect: Next::Answer(Answer::ThisTry),
};

/// Run a case; jitter is 0.5, so the first back-off is 18.75 ms.
fn run(case: &Case) -> Next {
    let t0 = Instant::now();
    let rules = RetryRules::from_policy(&Retries {
        attempts: 3,
        ..Retries::default()
    });
    let budget = RetryBudget::new(100, 100, t0);
    let empty = RetryBudget::new(0, 0, t0);
    let mut clock = Clock::new(t0, case.client, case.request_timeout, case.per_try);
    clock.complete(t0);
    let mut plan = Plan::new(clock, case.idempotent);
    let mut at = t0;
    for (i, outcome) in case.before.iter().enumerate() {
        let report = TryReport {
            endpoint: addr(i as u8 + 1),
            outcome: *outcome,
            started: at,
            ended: at + MS,
            body_replayable: true,
            unprocessed: false,
        };
        let cx = Context {
            rules: &rules,
            budget: &budget,
            untried_left: true,
            jitter: 0.5,
        };
        assert!(
            matches!(plan.after_try(report, cx), Next::Retry { .. }),
            "{}: try {i} before was retried",
            case.name
        );
        at += 2 * MS;
    }
    let report = TryReport {
        endpoint: addr(9),
        outcome: case.outcome,
        started: at,
        ended: at + case.took,
        body_replayable: true,
        unprocessed: false,
    };
    let cx = Context {
        rules: &rules,
        budget: if case.budget_left { &budget } else { &empty },
        untried_left: case.untried_left,
        jitter: 0.5,
    };
    plan.after_try(report, cx)
}

#[test]
fn every_kind_of_ending_leads_where_it_should() {
    let first_backoff = Duration::from_micros(18_750);
    let cases = [
        Case {
            name: "a refused connect goes elsewhere, whatever the method",
            idempotent: false,
            outcome: Outcome::ConnectFailed,
            expect: retry(first_backoff, RetryReason::ConnectFailure, false),
            ..DEFAULT
        },
        Case {
            name: "nowhere else to go: the failure is the answer, no budget spent",
            outcome: Outcome::ConnectFailed,
            untried_left: false,
            expect: local(503, LocalReason::UpstreamConnectFailure),
            ..DEFAULT
        },
        Case {
            name: "a retryable 503 is retried and kept",
            outcome: Outcome::Answered(503),
            expect: retry(first_backoff, RetryReason::Status, true),
            ..DEFAULT
        },
        Case {
            name: "a 503 with no untried endpoint left is passed on as it is",
            outcome: Outcome::Answered(503),
            untried_left: false,
            expect: Next::Answer(Answer::ThisTry),
            ..DEFAULT
        },
        Case {
            name: "a 503 when the budget is spent is passed on",
            outcome: Outcome::Answered(503),
            budget_left: false,
            expect: Next::Answer(Answer::ThisTry),
            ..DEFAULT
        },
        Case {
            name: "a 500 is the application's answer",
            outcome: Outcome::Answered(500),
            expect: Next::Answer(Answer::ThisTry),
            ..DEFAULT
        },
        Case {
            name: "a POST's 503 is passed on",
            idempotent: false,
            outcome: Outcome::Answered(503),
            expect: Next::Answer(Answer::ThisTry),
            ..DEFAULT
        },
        Case {
            name: "a reset GET is retried",
            outcome: Outcome::Reset,
            expect: retry(first_backoff, RetryReason::Reset, false),
            ..DEFAULT
        },
        Case {
            name: "a reset POST is not: it may have been processed",
            idempotent: false,
            outcome: Outcome::Reset,
            expect: local(502, LocalReason::UpstreamReset),
            ..DEFAULT
        },
        Case {
            name: "a timed-out try with a whole allowance left is retried",
            outcome: Outcome::TimedOut,
            took: 4 * SEC,
            expect: retry(first_backoff, RetryReason::Timeout, false),
            ..DEFAULT
        },
        Case {
            name: "a timed-out try with less than an allowance left is the answer",
            request_timeout: 600 * MS,
            per_try: 400 * MS,
            outcome: Outcome::TimedOut,
            took: 400 * MS,
            expect: local(504, LocalReason::UpstreamTimeout),
            ..DEFAULT
        },
        Case {
            name: "a fast failure fits in what is left of a short client deadline",
            client: Some(2 * SEC),
            outcome: Outcome::ConnectFailed,
            expect: retry(first_backoff, RetryReason::ConnectFailure, false),
            ..DEFAULT
        },
        Case {
            name: "a slow 503 does not fit in what is left of the client's deadline",
            client: Some(2 * SEC),
            outcome: Outcome::Answered(503),
            took: 1_200 * MS,
            expect: Next::Answer(Answer::ThisTry),
            ..DEFAULT
        },
        Case {
            name: "a deadline that cut the try is the answer",
            outcome: Outcome::DeadlineCut,
            expect: local(504, LocalReason::DeadlineExceeded),
            ..DEFAULT
        },
        Case {
            name: "a client body that broke is a 400",
            outcome: Outcome::ClientBodyFailed,
            expect: local(400, LocalReason::ClientBodyError),
            ..DEFAULT
        },
        Case {
            name: "a client body that stalled is a 408",
            outcome: Outcome::ClientBodyStalled,
            expect: local(408, LocalReason::ClientBodyTimeout),
            ..DEFAULT
        },
        Case {
            name: "a dead pooled connection is retried at once and free",
            idempotent: false,
            outcome: Outcome::DeadPooledConnection,
            untried_left: false,
            budget_left: false,
            expect: retry(Duration::ZERO, RetryReason::DeadPooledConnection, false),
            ..DEFAULT
        },
        Case {
            name: "free retries are bounded",
            before: &[
                Outcome::DeadPooledConnection,
                Outcome::DeadPooledConnection,
                Outcome::DeadPooledConnection,
            ],
            outcome: Outcome::DeadPooledConnection,
            expect: local(502, LocalReason::UpstreamReset),
            ..DEFAULT
        },
        Case {
            name: "after a kept 503, a later failure answers with the 503",
            before: &[Outcome::Answered(503)],
            outcome: Outcome::ConnectFailed,
            untried_left: false,
            expect: Next::Answer(Answer::Kept),
            ..DEFAULT
        },
        Case {
            name: "the second budgeted retry backs off twice as long",
            before: &[Outcome::ConnectFailed],
            outcome: Outcome::Reset,
            expect: retry(Duration::from_micros(37_500), RetryReason::Reset, false),
            ..DEFAULT
        },
        Case {
            name: "attempts bound every retry",
            before: &[Outcome::ConnectFailed, Outcome::Reset],
            outcome: Outcome::Reset,
            expect: local(502, LocalReason::UpstreamReset),
            ..DEFAULT
        },
    ];
    for case in &cases {
        assert_eq!(run(case), case.expect, "{}", case.name);
    }
}

#[test]
fn no_endpoint_answers_with_what_is_known() {
    let t0 = Instant::now();
    let none = LocalAnswer {
        status: 503,
        reason: LocalReason::NoHealthyEndpoints,
    };
    let mut clock = Clock::new(t0, None, 12 * SEC, 4 * SEC);
    clock.complete(t0);
    let plan = Plan::new(clock, true);
    assert_eq!(
        plan.no_endpoint(none),
        Answer::Local(none),
        "nothing tried yet"
    );

    let mut plan = Plan::new(clock, true);
    refused_then_retried(&mut plan, t0);
    assert_eq!(
        plan.no_endpoint(none),
        Answer::Local(LocalAnswer {
            status: 503,
            reason: LocalReason::UpstreamConnectFailure
        }),
        "the retry found nowhere to go: the failure it retried is the answer"
    );
}

#[test]
fn the_clocks_start_when_the_request_is_complete_and_tell_a_cut_from_a_timeout() {
    let t0 = Instant::now();
    // A streamed upload: nothing runs out while it is still coming in.
    let mut clock = Clock::new(t0, None, 12 * SEC, 4 * SEC);
    assert_eq!(clock.window(t0).ends(), None);
    assert_eq!(clock.deadline(), None);
    clock.complete(t0 + 10 * SEC);
    assert_eq!(
        clock.window(t0).ends(),
        Some((t0 + 14 * SEC, true)),
        "the allowance starts at completion"
    );
    assert_eq!(clock.deadline(), Some(t0 + 22 * SEC));

    // The client's deadline counts from its headers and cuts, not times out.
    let mut clock = Clock::new(t0, Some(SEC), 12 * SEC, 4 * SEC);
    assert_eq!(clock.window(t0).ends(), Some((t0 + SEC, false)));
    clock.complete(t0);
    assert_eq!(clock.window(t0).ends(), Some((t0 + SEC, false)));

    // A request timeout shorter than the per-try timeout is the allowance itself.
    let mut clock = Clock::new(t0, None, 2 * SEC, 4 * SEC);
    clock.complete(t0);
    assert_eq!(clock.window(t0).ends(), Some((t0 + 2 * SEC, true)));
    // A retry late in the request is cut by what is left.
    assert_eq!(clock.window(t0 + SEC).ends(), Some((t0 + 2 * SEC, false)));
}

#[test]
fn a_deadline_already_passed_stops_before_a_try() {
    let t0 = Instant::now();
    let mut clock = Clock::new(t0, Some(100 * MS), 12 * SEC, 4 * SEC);
    clock.complete(t0);
    let plan = Plan::new(clock, true);
    assert_eq!(plan.may_start(t0), Ok(()));
    assert_eq!(
        plan.may_start(t0 + 100 * MS),
        Err(Answer::Local(LocalAnswer {
            status: 504,
            reason: LocalReason::DeadlineExceeded
        }))
    );
}

#[test]
fn a_post_the_endpoint_said_it_did_not_process_is_retried_like_an_idempotent_one() {
    let t0 = Instant::now();
    let rules = RetryRules::from_policy(&Retries::default());
    let budget = RetryBudget::new(100, 100, t0);
    let context = || Context {
        rules: &rules,
        budget: &budget,
        untried_left: true,
        jitter: 0.5,
    };
    let report = |unprocessed| TryReport {
        endpoint: "10.0.0.1:80".parse().expect("addr"),
        outcome: Outcome::Answered(503),
        started: t0,
        ended: t0,
        body_replayable: true,
        unprocessed,
    };
    let clock = || {
        let mut clock = Clock::new(t0, None, Duration::from_secs(12), Duration::from_secs(4));
        clock.complete(t0);
        clock
    };
    let mut post = Plan::new(clock(), false);
    assert!(matches!(
        post.after_try(report(false), context()),
        Next::Answer(_)
    ));
    let mut refused = Plan::new(clock(), false);
    assert!(matches!(
        refused.after_try(report(true), context()),
        Next::Retry { .. }
    ));
}

#[test]
fn a_try_that_cannot_be_repeated_is_counted_and_leaves_its_own_answer() {
    // An upgrade: connect failures before it were retried; the handshake, once sent, is the
    // last try whatever it got, and is counted among the endpoints tried.
    let t0 = Instant::now();
    let mut clock = Clock::new(t0, None, Duration::from_secs(12), Duration::from_secs(4));
    clock.complete(t0);
    let cases = [
        (Outcome::Answered(101), Answer::ThisTry),
        (Outcome::Answered(503), Answer::ThisTry),
        (
            Outcome::Reset,
            Answer::Local(LocalAnswer {
                status: 502,
                reason: LocalReason::UpstreamReset,
            }),
        ),
        (
            Outcome::TimedOut,
            Answer::Local(LocalAnswer {
                status: 504,
                reason: LocalReason::UpstreamTimeout,
            }),
        ),
        (Outcome::DeadlineCut, Answer::Local(DEADLINE_EXCEEDED)),
    ];
    for (outcome, expected) in cases {
        let mut plan = Plan::new(clock, true);
        refused_then_retried(&mut plan, t0);
        assert_eq!(plan.last_try(addr(2), outcome), expected, "{outcome:?}");
        assert_eq!(plan.tried(), &[addr(1), addr(2)], "{outcome:?}");
    }
}

/// `plan`'s first try, on 10.0.0.1, could not connect at `t0`, and the default rules retry it.
fn refused_then_retried(plan: &mut Plan, t0: Instant) {
    let rules = RetryRules::from_policy(&Retries::default());
    let budget = RetryBudget::new(100, 100, t0);
    let report = TryReport {
        endpoint: addr(1),
        outcome: Outcome::ConnectFailed,
        started: t0,
        ended: t0 + MS,
        body_replayable: true,
        unprocessed: false,
    };
    let cx = Context {
        rules: &rules,
        budget: &budget,
        untried_left: true,
        jitter: 0.0,
    };
    assert!(matches!(plan.after_try(report, cx), Next::Retry { .. }));
}
