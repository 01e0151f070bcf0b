//! Streaks judged against the peers: answers relative, connection-level failures absolute.

use super::*;

/// An endpoint among peers whose `requests` (every `1 / share`-th one failing) are already in
/// the pool's window.
struct Among {
    detector: Detector,
    pool: ErrorRateWindow,
    now: Instant,
}

impl Among {
    fn peers(requests: u32, failing_every: u32) -> Self {
        let now = Instant::now();
        let (mut peer, mut pool) = (Detector::new(), ErrorRateWindow::new());
        for i in 0..requests {
            let v = if failing_every > 0 && i % failing_every == 0 {
                Verdict::GatewayError
            } else {
                Verdict::Success
            };
            // The peer's own trips are not what these tests look at.
            peer.record(v, &limits(), &mut pool, false, now);
            peer.reset();
        }
        Self {
            detector: Detector::new(),
            pool,
            now,
        }
    }

    fn record(&mut self, v: Verdict, l: &Limits) -> Option<Trip> {
        self.detector.record(v, l, &mut self.pool, false, self.now)
    }

    /// How many `v` in a row until something trips (`None` within 1 000).
    fn run_until_trip(&mut self, v: Verdict, l: &Limits) -> Option<(u32, Trip)> {
        (1..=1_000).find_map(|i| self.record(v, l).map(|t| (i, t)))
    }
}

fn streaks_only() -> Limits {
    Limits {
        error_rate_threshold: 0.0,
        ..limits()
    }
}

#[test]
fn among_clean_busy_peers_three_503s_trip_as_before() {
    let mut e = Among::peers(1_300, 0);
    assert_eq!(
        e.run_until_trip(Verdict::GatewayError, &streaks_only()),
        Some((3, Trip::ConsecutiveGatewayErrors))
    );
    let mut e = Among::peers(1_300, 0);
    assert_eq!(
        e.run_until_trip(Verdict::ServerError, &streaks_only()),
        Some((5, Trip::Consecutive5xx))
    );
}

#[test]
fn among_peers_shedding_a_fifth_a_run_of_503s_must_be_one_they_would_not_show() {
    let mut e = Among::peers(2_000, 5);
    assert_eq!(
        e.run_until_trip(Verdict::GatewayError, &streaks_only()),
        Some((10, Trip::ConsecutiveGatewayErrors))
    );
    // Plain 500s: the 5xx rule asks the same of its own limit.
    let mut e = Among::peers(2_000, 5);
    assert_eq!(
        e.run_until_trip(Verdict::ServerError, &streaks_only()),
        Some((10, Trip::Consecutive5xx))
    );
}

#[test]
fn connection_failures_trip_at_the_limit_however_the_peers_fare() {
    for failing_every in [0, 5, 2, 1] {
        let mut e = Among::peers(2_000, failing_every);
        assert_eq!(
            e.run_until_trip(Verdict::ConnectionFailure, &streaks_only()),
            Some((3, Trip::ConsecutiveGatewayErrors)),
            "peers failing every {failing_every}"
        );
    }
    // With the gateway rule off, the 5xx rule takes connection failures absolutely too.
    let l = Limits {
        consecutive_gateway_errors: 0,
        ..streaks_only()
    };
    let mut e = Among::peers(2_000, 2);
    assert_eq!(
        e.run_until_trip(Verdict::ConnectionFailure, &l),
        Some((5, Trip::Consecutive5xx))
    );
}

#[test]
fn a_streak_of_answers_and_connection_failures_is_judged_on_the_last_connection_failures() {
    let l = streaks_only();
    let mut e = Among::peers(2_000, 5);
    // 503, refused, refused: three gateway errors, but two of them connection-level only.
    assert_eq!(e.record(Verdict::GatewayError, &l), None);
    assert_eq!(e.record(Verdict::ConnectionFailure, &l), None);
    assert_eq!(e.record(Verdict::ConnectionFailure, &l), None);
    assert_eq!(e.detector.consecutive_gateway_errors(), 3);
    // The third refusal in a row is absolute.
    assert_eq!(
        e.record(Verdict::ConnectionFailure, &l),
        Some(Trip::ConsecutiveGatewayErrors)
    );
    // An answer in between starts the connection streak over.
    let mut e = Among::peers(2_000, 5);
    for v in [
        Verdict::ConnectionFailure,
        Verdict::ConnectionFailure,
        Verdict::GatewayError,
    ] {
        assert_eq!(e.record(v, &l), None, "{v:?}");
    }
    assert_eq!(e.record(Verdict::ConnectionFailure, &l), None);
    assert_eq!(e.record(Verdict::ConnectionFailure, &l), None);
    assert_eq!(
        e.record(Verdict::ConnectionFailure, &l),
        Some(Trip::ConsecutiveGatewayErrors)
    );
}

#[test]
fn peers_with_hardly_any_requests_ask_for_a_longer_run_than_the_limit() {
    // 8 peer requests, all fine: too few to say the peers are fine.
    let mut e = Among::peers(8, 0);
    assert_eq!(
        e.run_until_trip(Verdict::GatewayError, &streaks_only()),
        Some((15, Trip::ConsecutiveGatewayErrors))
    );
    // None at all: the worst assumed, half of the peers' requests failing.
    let mut e = Among::peers(0, 0);
    assert_eq!(
        e.run_until_trip(Verdict::GatewayError, &streaks_only()),
        Some((24, Trip::ConsecutiveGatewayErrors))
    );
}

#[test]
fn alone_the_limit_decides_whatever_the_window_holds() {
    let mut d = Solo::default();
    for _ in 0..100 {
        d.record(Verdict::Success, &streaks_only(), Instant::now());
    }
    let t = Instant::now();
    assert_eq!(d.record(Verdict::GatewayError, &streaks_only(), t), None);
    assert_eq!(d.record(Verdict::GatewayError, &streaks_only(), t), None);
    assert_eq!(
        d.record(Verdict::GatewayError, &streaks_only(), t),
        Some(Trip::ConsecutiveGatewayErrors)
    );
}
