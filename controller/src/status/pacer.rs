//! The overall bound on status writes, pure with an injected clock: at most `per_second` writes
//! a second across every pool, after a burst of `burst`, so a fleet-wide incident (every pool
//! changing at once) cannot flood the API server, however many pools there are. The coalescer
//! bounds each pool; this bounds their sum.
//!
//! It is the generic cell rate algorithm (GCRA) with reservations: a pool that finds no slot
//! free is given the next one and keeps it until it comes back, so pools waiting for a write
//! are served in the order they asked and none starves behind the others.

use std::collections::HashMap;
use std::time::Duration;

use rollcall_api::roster::PoolRef;
use tokio::time::Instant;

#[derive(Debug)]
pub struct Pacer {
    /// Between two writes at the sustained rate.
    interval: Duration,
    /// How far ahead of now the schedule may run: the burst.
    tolerance: Duration,
    /// When the schedule's next write is due (the theoretical arrival time).
    next: Option<Instant>,
    /// Slots given to pools that could not write at once.
    reserved: HashMap<PoolRef, Instant>,
}

impl Pacer {
    /// `per_second` writes a second after a burst of `burst`; 0 means unbounded.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let interval = if per_second == 0 {
            Duration::ZERO
        } else {
            Duration::from_secs(1) / per_second
        };
        Self {
            interval,
            tolerance: interval * burst.saturating_sub(1),
            next: None,
            reserved: HashMap::new(),
        }
    }

    /// May `pool` write its status at `now`? `Err(at)`: its slot is at `at`, ask again then.
    pub fn admit(&mut self, pool: &PoolRef, now: Instant) -> Result<(), Instant> {
        if self.interval.is_zero() {
            return Ok(());
        }
        if let Some(&slot) = self.reserved.get(pool) {
            if slot <= now {
                self.reserved.remove(pool);
                return Ok(());
            }
            return Err(slot);
        }
        let next = self.next.map_or(now, |n| n.max(now));
        let earliest = next.checked_sub(self.tolerance).unwrap_or(now);
        self.next = Some(next + self.interval);
        if earliest <= now {
            return Ok(());
        }
        self.reserved.insert(pool.clone(), earliest);
        Err(earliest)
    }

    /// Whether `pool` holds a slot it is waiting for.
    pub fn is_waiting(&self, pool: &PoolRef) -> bool {
        self.reserved.contains_key(pool)
    }

    /// `pool` no longer needs its slot (its status came out unchanged, or it is gone). The
    /// slot stays spent: the schedule does not run backwards.
    pub fn forget(&mut self, pool: &PoolRef) {
        self.reserved.remove(pool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(i: usize) -> PoolRef {
        PoolRef::new("shop", format!("p{i}"))
    }

    #[test]
    fn a_burst_writes_at_once_then_one_write_per_interval() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(10, 3);
        for i in 0..3 {
            assert_eq!(
                pacer.admit(&pool(i), t0),
                Ok(()),
                "pool {i} is in the burst"
            );
        }
        // The fourth gets the slot one interval on, the fifth the one after.
        assert_eq!(
            pacer.admit(&pool(3), t0),
            Err(t0 + Duration::from_millis(100))
        );
        assert_eq!(
            pacer.admit(&pool(4), t0),
            Err(t0 + Duration::from_millis(200))
        );
        // Asking again before its slot changes nothing; at its slot it writes.
        let early = t0 + Duration::from_millis(50);
        assert_eq!(
            pacer.admit(&pool(3), early),
            Err(t0 + Duration::from_millis(100))
        );
        assert_eq!(
            pacer.admit(&pool(3), t0 + Duration::from_millis(100)),
            Ok(())
        );
        // A newcomer queues behind pool 4, not before it.
        assert_eq!(
            pacer.admit(&pool(5), t0 + Duration::from_millis(100)),
            Err(t0 + Duration::from_millis(300))
        );
        assert_eq!(
            pacer.admit(&pool(4), t0 + Duration::from_millis(250)),
            Ok(())
        );
    }

    #[test]
    fn a_sustained_flood_gets_the_rate_and_nobody_starves() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(50, 10);
        // 200 pools all asking at once, each coming back at its slot.
        let mut due: Vec<(Instant, usize)> = (0..200).map(|i| (t0, i)).collect();
        let mut written = Vec::new();
        while let Some(&(at, i)) = due.iter().min() {
            due.retain(|d| *d != (at, i));
            match pacer.admit(&pool(i), at) {
                Ok(()) => written.push((at, i)),
                Err(slot) => {
                    assert!(slot > at);
                    due.push((slot, i));
                }
            }
        }
        assert_eq!(written.len(), 200, "every pool wrote once");
        let last = written.iter().map(|(at, _)| *at).max().unwrap();
        // 10 at once, then 190 at 50 a second: 3.8 s.
        assert_eq!(last - t0, Duration::from_millis(3800));
        // No second in the run holds more than the burst plus the rate.
        for second in 0..4 {
            let from = t0 + Duration::from_secs(second);
            let n = written
                .iter()
                .filter(|(at, _)| *at >= from && *at < from + Duration::from_secs(1))
                .count();
            assert!(n <= 60, "second {second}: {n} writes");
        }
    }

    #[test]
    fn the_burst_comes_back_after_a_quiet_spell_and_zero_is_unbounded() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(10, 2);
        assert!(pacer.admit(&pool(0), t0).is_ok());
        assert!(pacer.admit(&pool(1), t0).is_ok());
        assert!(pacer.admit(&pool(2), t0).is_err());
        pacer.forget(&pool(2));
        let later = t0 + Duration::from_secs(5);
        assert!(pacer.admit(&pool(0), later).is_ok());
        assert!(pacer.admit(&pool(1), later).is_ok());
        let mut free = Pacer::new(0, 0);
        assert!((0..1000).all(|i| free.admit(&pool(i), t0).is_ok()));
    }
}
