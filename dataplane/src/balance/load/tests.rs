//! Tests of `EndpointLoad` and `InFlight`: the guard on every path, the averages over time.

use std::future::{Future, pending};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn load_at(t0: Instant) -> Arc<EndpointLoad> {
    Arc::new(EndpointLoad::new(t0))
}

#[test]
fn in_flight_is_released_when_dropped_without_finish() {
    let load = load_at(Instant::now());
    let a = load.start();
    let b = load.start();
    assert_eq!(load.outstanding(), 2);
    drop(a);
    assert_eq!(load.outstanding(), 1);
    drop(b);
    assert_eq!(load.outstanding(), 0);
}

#[test]
fn in_flight_is_released_on_finish_whatever_the_outcome() {
    let t0 = Instant::now();
    let load = load_at(t0);
    for outcome in [
        Verdict::Success,
        Verdict::GatewayError,
        Verdict::NotTheEndpoint,
    ] {
        let guard = load.start();
        assert_eq!(load.outstanding(), 1);
        guard.finish(outcome, ms(5), t0);
        assert_eq!(load.outstanding(), 0);
    }
}

#[test]
fn in_flight_is_released_when_the_request_panics() {
    let load = load_at(Instant::now());
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _guard = load.start();
        panic!("handler blew up mid-request");
    }));
    assert!(result.is_err());
    assert_eq!(load.outstanding(), 0);
}

#[test]
fn in_flight_is_released_when_the_request_future_is_cancelled() {
    let load = load_at(Instant::now());
    let request = {
        let load = Arc::clone(&load);
        async move {
            let _guard = load.start();
            pending::<()>().await;
        }
    };
    {
        let mut request = pin!(request);
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(request.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(load.outstanding(), 1);
        // The client goes away: the future is dropped while it waits.
    }
    assert_eq!(load.outstanding(), 0);
}

#[test]
fn a_new_endpoint_has_no_latency_and_no_errors() {
    let t0 = Instant::now();
    let load = load_at(t0);
    assert_eq!(load.latency(t0), None);
    assert_eq!(load.error_rate(t0), 0.0);
    assert_eq!(load.weight(), 1);
}

#[test]
fn zero_weight_counts_as_one() {
    let t0 = Instant::now();
    assert_eq!(EndpointLoad::with_weight(0, t0).weight(), 1);
    let load = EndpointLoad::with_weight(3, t0);
    load.set_weight(0);
    assert_eq!(load.weight(), 1);
}

#[test]
fn latency_jumps_to_a_higher_sample_at_once() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(20), t0);
    load.start().finish(Verdict::Success, ms(300), t0 + ms(1));
    assert_eq!(load.latency(t0 + ms(1)), Some(ms(300)));
}

#[test]
fn latency_decays_toward_a_lower_sample_over_the_time_constant() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(300), t0);
    // One time constant later, a 100 ms sample pulls the estimate 1 - 1/e of the way down.
    let t1 = t0 + LATENCY_TIME_CONSTANT;
    load.start().finish(Verdict::Success, ms(100), t1);
    let got = load
        .latency(t1)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    let want = 0.3 * (-1.0f64).exp() + 0.1 * (1.0 - (-1.0f64).exp());
    assert!((got - want).abs() < 1e-4, "got {got}, want {want}");
    // A sample right after the previous one moves it by the least weight a sample has.
    load.start().finish(Verdict::Success, ms(100), t1 + ms(10));
    let later = load.latency(t1 + ms(10)).map(|d| d.as_secs_f64());
    let want = want * (1.0 - MIN_SAMPLE_WEIGHT) + 0.1 * MIN_SAMPLE_WEIGHT;
    assert!(later.is_some_and(|l| (l - want).abs() < 1e-3), "{later:?}");
}

#[test]
fn a_few_fast_samples_in_a_row_bring_a_slow_estimate_down_however_close_together() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(100), t0);
    for n in 1..=12 {
        load.start().finish(Verdict::Success, ms(1), t0 + ms(n));
    }
    let latency = load.latency(t0 + ms(12)).unwrap_or_default();
    assert!(latency < ms(5), "latency {latency:?}");
}

#[test]
fn failure_latencies_are_never_averaged() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(200), t0);
    for i in 1..=50 {
        load.start()
            .finish(Verdict::GatewayError, ms(8), t0 + ms(100 * i));
    }
    assert_eq!(load.latency(t0 + ms(5000)), Some(ms(200)));
}

#[test]
fn ignored_outcomes_record_nothing() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::NotTheEndpoint, ms(1), t0);
    assert_eq!(load.latency(t0), None);
    assert_eq!(load.error_rate(t0), 0.0);
}

#[test]
fn error_rate_tracks_the_recent_share_of_failures() {
    let t0 = Instant::now();
    let load = load_at(t0);
    // One failure in five, for many requests: the rate settles near 20%.
    for i in 0..2_000u64 {
        let outcome = if i % 5 == 0 {
            Verdict::GatewayError
        } else {
            Verdict::Success
        };
        load.start().finish(outcome, ms(8), t0 + ms(i));
    }
    let rate = load.error_rate(t0 + ms(2_000));
    assert!((0.15..0.25).contains(&rate), "rate {rate}");
    // Then a long run of successes brings it back down.
    for i in 0..1_000u64 {
        load.start()
            .finish(Verdict::Success, ms(8), t0 + ms(2_000 + i));
    }
    assert!(load.error_rate(t0 + ms(3_000)) < 0.001);
}

#[test]
fn one_failure_among_many_successes_stays_under_one_percent() {
    let t0 = Instant::now();
    let load = load_at(t0);
    for _ in 0..200 {
        load.start().finish(Verdict::Success, ms(8), t0);
    }
    load.start().finish(Verdict::GatewayError, ms(8), t0);
    assert!(load.error_rate(t0) <= 0.01);
}

#[test]
fn estimates_hold_for_one_time_constant_then_relax_so_a_starved_endpoint_is_retried() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(2_000), t0);
    for _ in 0..50 {
        load.start().finish(Verdict::GatewayError, ms(1), t0);
    }
    let rate = load.error_rate(t0);
    assert_eq!(load.latency(t0 + EWMA_DECAY), Some(ms(2_000)));
    assert_eq!(load.error_rate(t0 + EWMA_DECAY), rate);
    let much_later = t0 + EWMA_DECAY * 6;
    let latency = load.latency(much_later).unwrap_or_default();
    assert!(latency < ms(20), "latency {latency:?}");
    assert!(load.error_rate(much_later) < rate / 100.0);
}

#[test]
fn after_a_long_idle_a_lower_sample_replaces_the_stale_estimate() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(2_000), t0);
    let later = t0 + EWMA_DECAY * 10;
    load.start().finish(Verdict::Success, ms(50), later);
    let latency = load.latency(later).unwrap_or_default();
    assert!(latency >= ms(50) && latency < ms(51), "latency {latency:?}");
}

#[test]
fn out_of_order_samples_do_not_move_the_clock_backwards() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(100), t0 + ms(500));
    load.start().finish(Verdict::Success, ms(50), t0 + ms(400));
    // The older sample counts with the least weight, and the stamp stays at 500 ms: the
    // estimate holds until one hold time after it.
    assert_eq!(
        load.latency(t0 + EWMA_DECAY + ms(500)),
        Some(Duration::from_micros(87_500))
    );
}

#[test]
fn concurrent_guards_from_many_threads_balance_out() {
    let t0 = Instant::now();
    let load = load_at(t0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for i in 0..1_000u64 {
                    let guard = load.start();
                    if i % 2 == 0 {
                        guard.finish(Verdict::Success, ms(i % 7), t0 + ms(i));
                    }
                }
            });
        }
    });
    assert_eq!(load.outstanding(), 0);
    assert!(load.latency(t0 + ms(1_000)).is_some());
}

// --- stalls ---

#[test]
fn stall_verdict_at_its_edges() {
    let t = ms(200);
    assert!(
        !is_stalled(3, ms(200), t),
        "exactly the threshold is not beyond it"
    );
    assert!(is_stalled(3, ms(201), t));
    assert!(
        is_stalled(1, Duration::from_secs(60), t),
        "waiting: for as long as it waits"
    );
    // Nothing in flight, last try unanswered: avoided until a trial is due.
    assert!(is_stalled(0, ms(0), t));
    assert!(is_stalled(0, STALL_RETRY - ms(1), t));
    assert!(!is_stalled(0, STALL_RETRY, t), "a trial is due");
}

#[test]
fn an_endpoint_that_answers_nothing_while_tries_wait_is_stalled_after_the_floor() {
    let t0 = Instant::now();
    let load = load_at(t0);
    let _try = load.start_try(t0);
    assert!(!load.stalled(t0 + ms(200)));
    assert!(load.stalled(t0 + ms(201)));
}

#[test]
fn an_answer_ends_the_stall_and_the_others_waiting_are_judged_from_it() {
    let t0 = Instant::now();
    let load = load_at(t0);
    let mut first = load.start_try(t0);
    let _second = load.start_try(t0 + ms(50));
    first.answered(Some(true), t0 + ms(150));
    first.finish(Verdict::Success, ms(10), t0 + ms(150));
    // The second try waits since t0 + 50 ms, but the endpoint answered at 150 ms.
    assert!(!load.stalled(t0 + ms(300)));
    assert!(load.stalled(t0 + ms(351)));
}

#[test]
fn a_slow_endpoint_gets_eight_times_its_latency_before_it_counts_as_stalled() {
    let t0 = Instant::now();
    let load = load_at(t0);
    load.start().finish(Verdict::Success, ms(100), t0);
    let _try = load.start_try(t0);
    assert!(!load.stalled(t0 + ms(800)));
    assert!(load.stalled(t0 + ms(801)));
}

#[test]
fn a_try_that_times_out_unanswered_keeps_the_endpoint_avoided_with_one_trial_per_retry_period() {
    let t0 = Instant::now();
    let load = load_at(t0);
    let mut lost = load.start_try(t0);
    let timed_out = t0 + ms(1000);
    lost.answered(Some(false), timed_out);
    drop(lost);
    assert!(
        load.stalled(timed_out),
        "nothing waits, but nothing was answered"
    );
    assert!(load.stalled(timed_out + STALL_RETRY - ms(1)));
    let due = timed_out + STALL_RETRY;
    assert!(!load.stalled(due), "a trial is due");
    // The trial waits: stalled again at once (its silence began long ago).
    let mut trial = load.start_try(due);
    assert!(load.stalled(due + ms(1)));
    // It goes unanswered too: avoided for another retry period, not tried back to back.
    let trial_lost = due + ms(1000);
    trial.answered(Some(false), trial_lost);
    drop(trial);
    assert!(load.stalled(trial_lost + STALL_RETRY - ms(1)));
    // The next trial is answered: all clear.
    let mut next = load.start_try(trial_lost + STALL_RETRY);
    next.answered(Some(true), trial_lost + STALL_RETRY + ms(10));
    assert!(!load.stalled(trial_lost + STALL_RETRY + ms(500)));
}

#[test]
fn a_try_abandoned_before_it_could_stall_says_nothing() {
    let t0 = Instant::now();
    let load = load_at(t0);
    let mut cut = load.start_try(t0);
    cut.answered(None, t0 + ms(50));
    assert!(!load.stalled(t0 + ms(500)));
    // One abandoned after the endpoint had already gone quiet keeps the evidence.
    let mut quiet = load.start_try(t0 + ms(1000));
    quiet.answered(None, t0 + ms(1300));
    assert!(load.stalled(t0 + ms(1300)));
}

#[test]
fn a_dropped_try_releases_its_wait() {
    let t0 = Instant::now();
    let load = load_at(t0);
    let waiting = load.start_try(t0);
    assert_eq!(load.outstanding(), 1);
    drop(waiting);
    assert_eq!(load.outstanding(), 0);
    assert_eq!(load.silence.get(), stall::Silence::NONE);
}

#[test]
fn requests_started_without_a_try_are_never_judged_for_stalls() {
    let t0 = Instant::now();
    let load = load_at(t0);
    let _held = load.start();
    assert!(!load.stalled(t0 + Duration::from_secs(60)));
}
