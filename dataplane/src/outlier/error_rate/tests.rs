use std::time::Duration;

use tokio::time::Instant;

use super::{ErrorRateWindow, RecentOutcomes, WindowCounts};

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
    assert_eq!(w.counts(WINDOW, t0 + WINDOW + SEC).requests, 0);
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
fn zero_window_records_nothing() {
    let t0 = Instant::now();
    let mut z = ErrorRateWindow::new();
    z.record(true, Duration::ZERO, t0);
    assert_eq!(z.counts(WINDOW, t0), WindowCounts::default());
    assert_eq!(z.counts(Duration::ZERO, t0), WindowCounts::default());
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
fn a_window_that_empties_lets_go_of_its_storage_and_counts_again_from_scratch() {
    let t0 = Instant::now();
    let mut w = ErrorRateWindow::new();
    assert!(!w.holds_storage(), "nothing made before the first request");
    record_n(&mut w, 4, true, t0);
    assert!(w.holds_storage());
    w.expire(WINDOW, t0 + 20 * SEC);
    assert!(!w.holds_storage(), "every bucket left the window");
    record_n(&mut w, 2, false, t0 + 21 * SEC);
    assert_eq!(
        w.counts(WINDOW, t0 + 21 * SEC),
        WindowCounts {
            requests: 2,
            failures: 0
        }
    );
    w.clear();
    assert!(!w.holds_storage());
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

#[test]
fn recent_outcomes_count_the_last_n_whatever_their_age() {
    let mut r = RecentOutcomes::default();
    assert_eq!(r.counts(20), WindowCounts::default());
    for i in 0..100 {
        r.push(i % 10 == 0);
    }
    // The last 20 of 100 hold two failures (requests 80 and 90).
    assert_eq!(
        r.counts(20),
        WindowCounts {
            requests: 20,
            failures: 2
        }
    );
    assert_eq!(r.counts(64).requests, 64);
    assert_eq!(r.counts(1000).requests, 64, "at most 64 are remembered");
    r.push(true);
    assert_eq!(r.counts(1).failures, 1);
    r.clear();
    assert_eq!(r.counts(64), WindowCounts::default());
    r.push(false);
    assert_eq!(r.counts(20).requests, 1);
}
