use std::time::Duration;

use tokio::time::Instant;

use super::{ErrorRateWindow, WindowCounts};

const WINDOW: Duration = Duration::from_secs(10);
const SEC: Duration = Duration::from_secs(1);

fn record_n(w: &mut ErrorRateWindow, n: u32, failed: bool, now: Instant) {
    for _ in 0..n {
        w.record(failed, WINDOW, now);
    }
}

#[test]
fn counts_requests_and_failures_inside_the_window() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 3, true, t0);
    record_n(&mut w, 7, false, t0 + SEC);
    let c = w.counts(WINDOW, t0 + 2 * SEC);
    assert_eq!(
        c,
        WindowCounts {
            requests: 10,
            failures: 3
        }
    );
    assert!((c.rate() - 0.3).abs() < 1e-9);
}

#[test]
fn old_failures_leave_the_window() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 5, true, t0);
    // Still inside just before the window ends…
    assert_eq!(
        w.counts(WINDOW, t0 + WINDOW - Duration::from_millis(1))
            .failures,
        5
    );
    // …and gone once the window plus one bucket has passed.
    assert_eq!(w.counts(WINDOW, t0 + WINDOW + SEC).failures, 0);
    assert!(!w.exceeds(0.1, 1, WINDOW, t0 + WINDOW + SEC));
}

#[test]
fn window_slides_failures_out_while_newer_successes_stay() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 10, true, t0);
    record_n(&mut w, 10, false, t0 + 6 * SEC);
    let late = t0 + 12 * SEC;
    assert_eq!(
        w.counts(WINDOW, late),
        WindowCounts {
            requests: 10,
            failures: 0
        }
    );
}

#[test]
fn below_min_requests_never_exceeds_even_at_full_failure() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 19, true, t0);
    assert!(!w.exceeds(0.2, 20, WINDOW, t0));
    w.record(true, WINDOW, t0);
    assert!(w.exceeds(0.2, 20, WINDOW, t0));
}

#[test]
fn rate_must_be_strictly_above_threshold() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 2, true, t0);
    record_n(&mut w, 8, false, t0);
    assert!(
        !w.exceeds(0.2, 10, WINDOW, t0),
        "exactly 20% is not above 20%"
    );
    w.record(true, WINDOW, t0);
    assert!(w.exceeds(0.2, 10, WINDOW, t0));
}

#[test]
fn zero_threshold_disables_and_zero_window_records_nothing() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 50, true, t0);
    assert!(!w.exceeds(0.0, 1, WINDOW, t0));
    let mut z = ErrorRateWindow::new();
    z.record(true, Duration::ZERO, t0);
    assert_eq!(z.counts(WINDOW, t0), WindowCounts::default());
    assert!(!z.exceeds(0.5, 0, Duration::ZERO, t0));
}

#[test]
fn zero_min_requests_still_needs_one_request() {
    let t0 = Instant::now();
    let w = ErrorRateWindow::new();
    assert!(!w.exceeds(0.1, 0, WINDOW, t0));
}

#[test]
fn memory_stays_bounded_by_the_bucket_count() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    for ms in 0..100_000u64 {
        w.record(ms % 3 == 0, WINDOW, t0 + Duration::from_millis(ms));
    }
    assert!(w.bucket_count() <= 12, "{} buckets", w.bucket_count());
    let c = w.counts(WINDOW, t0 + Duration::from_millis(99_999));
    assert!(c.requests >= 10_000 && c.requests <= 11_000, "{c:?}");
}

#[test]
fn expire_drops_old_buckets_and_clear_forgets_everything() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 3, true, t0);
    record_n(&mut w, 3, true, t0 + 5 * SEC);
    w.expire(WINDOW, t0 + 12 * SEC);
    assert_eq!(w.bucket_count(), 1);
    w.clear();
    assert_eq!(w.counts(WINDOW, t0 + 12 * SEC), WindowCounts::default());
}

#[test]
fn a_shorter_window_after_reload_applies_immediately() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    record_n(&mut w, 4, true, t0);
    let short = Duration::from_secs(2);
    assert_eq!(w.counts(WINDOW, t0 + 5 * SEC).failures, 4);
    assert_eq!(w.counts(short, t0 + 5 * SEC).failures, 0);
}
