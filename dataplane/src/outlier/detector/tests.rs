use std::time::Duration;

use tokio::time::Instant;

use super::{Detector, Limits, Trip};
use crate::outcome::Verdict;
use crate::outlier::ErrorRateWindow;

const SEC: Duration = Duration::from_secs(1);

fn limits() -> Limits {
    Limits {
        consecutive_gateway_errors: 3,
        consecutive_5xx: 5,
        error_rate_threshold: 0.2,
        error_rate_window: Duration::from_secs(10),
        error_rate_min_requests: 20,
    }
}

fn only_rate() -> Limits {
    Limits {
        consecutive_gateway_errors: 0,
        consecutive_5xx: 0,
        ..limits()
    }
}

/// One endpoint alone in its pool: the pool's window holds exactly its requests.
#[derive(Default)]
struct Solo {
    detector: Detector,
    pool: ErrorRateWindow,
}

impl Solo {
    fn record(&mut self, verdict: Verdict, limits: &Limits, now: Instant) -> Option<Trip> {
        self.detector
            .record(verdict, limits, &mut self.pool, true, now)
    }
}

impl std::ops::Deref for Solo {
    type Target = Detector;
    fn deref(&self) -> &Detector {
        &self.detector
    }
}

impl std::ops::DerefMut for Solo {
    fn deref_mut(&mut self) -> &mut Detector {
        &mut self.detector
    }
}

/// One verdict for `d`, one of several endpoints counted in `pool`.
fn record(
    d: &mut Detector,
    pool: &mut ErrorRateWindow,
    verdict: Verdict,
    limits: &Limits,
    now: Instant,
) -> Option<Trip> {
    d.record(verdict, limits, pool, false, now)
}

#[test]
fn statuses_are_classified_like_envoy() {
    assert_eq!(Verdict::from_status(200), Verdict::Success);
    assert_eq!(Verdict::from_status(304), Verdict::Success);
    assert_eq!(Verdict::from_status(404), Verdict::ClientError);
    assert_eq!(Verdict::from_status(429), Verdict::ClientError);
    assert_eq!(Verdict::from_status(500), Verdict::ServerError);
    assert_eq!(Verdict::from_status(501), Verdict::ServerError);
    for s in [502, 503, 504] {
        assert_eq!(Verdict::from_status(s), Verdict::GatewayError);
    }
    assert!(Verdict::GatewayError.is_failure() && Verdict::ServerError.is_failure());
    assert!(Verdict::ConnectionFailure.is_failure());
    assert!(!Verdict::ClientError.is_failure() && !Verdict::Success.is_failure());
}

#[test]
fn gateway_errors_trip_on_the_request_that_reaches_the_limit() {
    let t = Instant::now();
    let mut d = Solo::default();
    assert_eq!(d.record(Verdict::GatewayError, &limits(), t), None);
    assert_eq!(d.record(Verdict::GatewayError, &limits(), t), None);
    assert_eq!(
        d.record(Verdict::GatewayError, &limits(), t),
        Some(Trip::ConsecutiveGatewayErrors)
    );
}

#[test]
fn a_plain_5xx_breaks_a_gateway_streak_but_extends_the_5xx_streak() {
    let t = Instant::now();
    let mut d = Solo::default();
    d.record(Verdict::GatewayError, &limits(), t);
    d.record(Verdict::GatewayError, &limits(), t);
    assert_eq!(d.record(Verdict::ServerError, &limits(), t), None);
    assert_eq!(d.consecutive_gateway_errors(), 0);
    assert_eq!(d.consecutive_5xx(), 3);
    d.record(Verdict::GatewayError, &limits(), t);
    assert_eq!(
        d.record(Verdict::ServerError, &limits(), t),
        Some(Trip::Consecutive5xx)
    );
}

#[test]
fn client_errors_neither_count_nor_reset() {
    let t = Instant::now();
    let mut d = Solo::default();
    for _ in 0..4 {
        d.record(Verdict::ServerError, &limits(), t);
        assert_eq!(d.record(Verdict::ClientError, &limits(), t), None);
    }
    assert_eq!(d.consecutive_5xx(), 4);
    assert_eq!(d.window_counts(limits().error_rate_window, t).requests, 4);
    assert_eq!(
        d.record(Verdict::ServerError, &limits(), t),
        Some(Trip::Consecutive5xx)
    );
}

#[test]
fn a_thousand_client_errors_never_trip() {
    let t = Instant::now();
    let mut d = Solo::default();
    for i in 0..1000u64 {
        let at = t + Duration::from_millis(i);
        assert_eq!(d.record(Verdict::ClientError, &limits(), at), None);
    }
}

#[test]
fn a_success_resets_both_streaks() {
    let t = Instant::now();
    let mut d = Solo::default();
    d.record(Verdict::GatewayError, &limits(), t);
    d.record(Verdict::GatewayError, &limits(), t);
    d.record(Verdict::Success, &limits(), t);
    assert_eq!(
        (d.consecutive_gateway_errors(), d.consecutive_5xx()),
        (0, 0)
    );
    assert_eq!(d.record(Verdict::GatewayError, &limits(), t), None);
}

#[test]
fn error_rate_trips_only_with_enough_requests_in_the_window() {
    let t = Instant::now();
    let mut d = Solo::default();
    // 1 failure in 5 is exactly 20%: not above. Keep it up to 40 requests.
    for i in 0..40 {
        let o = if i % 5 == 4 {
            Verdict::ServerError
        } else {
            Verdict::Success
        };
        assert_eq!(d.record(o, &only_rate(), t), None, "request {i}");
    }
    // One more failure tips the share above 20%.
    assert_eq!(
        d.record(Verdict::ServerError, &only_rate(), t),
        Some(Trip::ErrorRate)
    );
}

#[test]
fn error_rate_ignores_failures_that_left_the_window() {
    let t = Instant::now();
    let mut d = Solo::default();
    for _ in 0..15 {
        d.record(Verdict::ServerError, &only_rate(), t);
    }
    // Much later: 19 successes and 1 failure are 5%, the old failures no longer count.
    let later = t + 30 * SEC;
    for _ in 0..19 {
        assert_eq!(d.record(Verdict::Success, &only_rate(), later), None);
    }
    assert_eq!(d.record(Verdict::ServerError, &only_rate(), later), None);
}

#[test]
fn reset_forgets_streaks_and_window() {
    let t = Instant::now();
    let mut d = Solo::default();
    for _ in 0..10 {
        d.record(Verdict::ServerError, &only_rate(), t);
    }
    d.reset();
    assert_eq!(d.consecutive_5xx(), 0);
    assert_eq!(
        d.window_counts(only_rate().error_rate_window, t).requests,
        0
    );
    d.expire(only_rate().error_rate_window, t + 60 * SEC);
}

#[test]
fn with_clean_peers_an_endpoint_failing_below_the_threshold_trips_on_its_own_few_requests() {
    let t = Instant::now();
    let l = only_rate();
    let mut pool = ErrorRateWindow::new();
    let (mut bad, mut peer) = (Detector::new(), Detector::new());
    for _ in 0..1000 {
        assert_eq!(record(&mut peer, &mut pool, Verdict::Success, &l, t), None);
    }
    // 3 failures in 15 requests: 20%, not above the threshold, and under minRequests.
    let mut tripped = None;
    for i in 0..15 {
        let v = if i % 5 == 4 {
            Verdict::ServerError
        } else {
            Verdict::Success
        };
        tripped = tripped.or(record(&mut bad, &mut pool, v, &l, t).map(|trip| (i, trip)));
    }
    assert_eq!(tripped, Some((14, Trip::ErrorRate)));
}

#[test]
fn when_every_endpoint_fails_alike_none_trips_on_the_error_rate() {
    let t = Instant::now();
    let l = only_rate();
    let mut pool = ErrorRateWindow::new();
    let mut endpoints = [Detector::new(), Detector::new(), Detector::new()];
    // Each sheds 30%, above the threshold: an overload, not an outlier.
    for i in 0..600 {
        let v = if i % 10 < 3 {
            Verdict::GatewayError
        } else {
            Verdict::Success
        };
        let at = t + Duration::from_millis(i as u64 * 5);
        let d = &mut endpoints[(i / 10) % 3];
        assert_eq!(record(d, &mut pool, v, &l, at), None, "request {i}");
    }
}

#[test]
fn the_pool_window_counts_what_the_detector_counts_and_nothing_else() {
    let t = Instant::now();
    let mut d = Solo::default();
    for v in [
        Verdict::Success,
        Verdict::ServerError,
        Verdict::GatewayError,
        Verdict::ClientError,
        Verdict::NotTheEndpoint,
    ] {
        d.record(v, &limits(), t);
    }
    let window = limits().error_rate_window;
    assert_eq!(d.pool.counts(window, t), d.window_counts(window, t));
    assert_eq!(d.pool.counts(window, t).requests, 3);
}

mod peers;
