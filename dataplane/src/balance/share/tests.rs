//! Tests of the share window: counting and sliding.

use super::*;

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 8080))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn counts_picks_per_endpoint_and_in_total() {
    let t0 = Instant::now();
    let share = ShareTracker::new(t0);
    let a = PickWindow::default();
    let b = PickWindow::default();
    let tick = share.tick(t0);
    for _ in 0..3 {
        share.record(&a, tick);
    }
    share.record(&b, tick);
    assert_eq!(share.recent_picks(&a, t0), 3);
    assert_eq!(share.recent_picks(&b, t0), 1);
    assert_eq!(share.recent_picks(&PickWindow::default(), t0), 0);
    assert_eq!(share.recent_total(t0), 4);
}

#[test]
fn picks_older_than_the_window_are_forgotten() {
    let t0 = Instant::now();
    let share = ShareTracker::with_window(ms(2_000), t0);
    let a = PickWindow::default();
    share.record(&a, share.tick(t0));
    share.record(&a, share.tick(t0 + ms(1_000)));
    assert_eq!(share.recent_total(t0 + ms(1_900)), 2);
    // The window slides in 500 ms steps: the first pick leaves it first.
    assert_eq!(share.recent_total(t0 + ms(2_000)), 1);
    assert_eq!(share.recent_picks(&a, t0 + ms(2_000)), 1);
    assert_eq!(share.recent_total(t0 + ms(3_000)), 0);
}

#[test]
fn a_bucket_reused_by_a_later_tick_starts_from_zero() {
    let t0 = Instant::now();
    let share = ShareTracker::with_window(ms(2_000), t0);
    let a = PickWindow::default();
    for _ in 0..10 {
        share.record(&a, share.tick(t0));
    }
    // Same bucket slot, one full window later.
    let later = t0 + ms(2_000);
    share.record(&a, share.tick(later));
    assert_eq!(share.recent_picks(&a, later), 1);
}

#[test]
fn a_pick_stamped_slightly_in_the_past_is_still_counted() {
    let t0 = Instant::now();
    let share = ShareTracker::with_window(ms(2_000), t0);
    let a = PickWindow::default();
    share.record(&a, share.tick(t0 + ms(2_100)));
    share.record(&a, share.tick(t0 + ms(100)));
    assert_eq!(share.recent_picks(&a, t0 + ms(2_100)), 2);
}

#[test]
fn concurrent_picks_are_all_counted() {
    let t0 = Instant::now();
    let share = ShareTracker::new(t0);
    let a = PickWindow::default();
    let tick = share.tick(t0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5_000 {
                    share.record(&a, tick);
                }
            });
        }
    });
    assert_eq!(share.recent_total(t0), 20_000);
    assert_eq!(share.recent_picks(&a, t0), 20_000);
}

#[test]
fn the_ring_is_reused_while_endpoints_and_weights_stay_the_same() {
    let share = ShareTracker::new(Instant::now());
    let first = share.ring(vec![(addr(1), 1.0), (addr(2), 1.0)]);
    let same = share.ring(vec![(addr(1), 1.0), (addr(2), 1.0)]);
    let ramped = share.ring(vec![(addr(1), 1.0), (addr(2), 0.5)]);
    assert!(Arc::ptr_eq(&first, &same));
    assert!(!Arc::ptr_eq(&first, &ramped));
}
