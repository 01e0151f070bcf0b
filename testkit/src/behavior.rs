//! What a backend does with each traffic request (everything but `/healthz`). The decision is
//! pure: the n-th request since the behaviour was set maps to one [`Action`], so a test that sends
//! ten requests to a backend failing one in five sees exactly two failures, every run.

use std::time::Duration;

/// How a [`TestBackend`](crate::TestBackend) answers traffic requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// 200 after `latency`, body `backend <port>\n` (or the `/echo` routes).
    Ok { latency: Duration },
    /// `fail` requests out of every `every` get `status`, spread evenly and deterministically
    /// (one in five fails the 5th, 10th, …); the others are answered like `Ok`. Both after
    /// `latency`.
    FailRate {
        fail: u32,
        every: u32,
        status: u16,
        latency: Duration,
    },
    /// Every traffic request gets this status at once.
    Status(u16),
    /// Accepts connections and reads requests, never answers anything, `/healthz` included.
    BlackHole,
    /// Sends `200` headers announcing a body, then closes the connection without sending it.
    ResetAfterHeaders,
    /// Sends `200` headers and part of the announced body, then closes the connection.
    CloseMidBody,
}

/// What to do with one request, decided by [`Behavior::decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Answer with this status after this delay; 2xx statuses get the route's normal body.
    Respond { status: u16, latency: Duration },
    /// Never answer.
    Hang,
    /// Headers, then the connection closes before the body.
    ResetAfterHeaders,
    /// Headers and half a body, then the connection closes.
    CloseMidBody,
}

// === impl Behavior ===

impl Default for Behavior {
    fn default() -> Self {
        Self::ok()
    }
}

impl Behavior {
    /// 200 at once.
    pub const fn ok() -> Self {
        Self::Ok {
            latency: Duration::ZERO,
        }
    }

    /// 200 after `latency`.
    pub const fn slow(latency: Duration) -> Self {
        Self::Ok { latency }
    }

    /// Fails the n-th, 2n-th, … request with `status`, at once.
    pub const fn fail_one_in(every: u32, status: u16) -> Self {
        Self::FailRate {
            fail: 1,
            every,
            status,
            latency: Duration::ZERO,
        }
    }

    /// The action for the request with this zero-based index since the behaviour was set.
    pub fn decide(&self, index: u64) -> Action {
        match *self {
            Self::Ok { latency } => Action::Respond {
                status: 200,
                latency,
            },
            Self::FailRate {
                fail,
                every,
                status,
                latency,
            } => {
                let status = if fails(index, fail, every) {
                    status
                } else {
                    200
                };
                Action::Respond { status, latency }
            }
            Self::Status(status) => Action::Respond {
                status,
                latency: Duration::ZERO,
            },
            Self::BlackHole => Action::Hang,
            Self::ResetAfterHeaders => Action::ResetAfterHeaders,
            Self::CloseMidBody => Action::CloseMidBody,
        }
    }

    /// Whether `/healthz` is answered at all (a black hole answers nothing).
    pub fn answers_health(&self) -> bool {
        !matches!(self, Self::BlackHole)
    }
}

/// Bresenham-style spreading: request `i` (one-based) fails when `⌊i·fail/every⌋` steps up, so
/// every aligned window of `every` requests holds exactly `fail` failures.
fn fails(index: u64, fail: u32, every: u32) -> bool {
    if every == 0 || fail == 0 {
        return false;
    }
    if fail >= every {
        return true;
    }
    let (fail, every) = (u128::from(fail), u128::from(every));
    let i = u128::from(index) + 1;
    i * fail / every > (i - 1) * fail / every
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failures(b: Behavior, n: u64) -> Vec<u64> {
        (0..n)
            .filter(|&i| matches!(b.decide(i), Action::Respond { status, .. } if status != 200))
            .collect()
    }

    #[test]
    fn one_in_five_fails_every_fifth_request() {
        assert_eq!(
            failures(Behavior::fail_one_in(5, 503), 20),
            vec![4, 9, 14, 19]
        );
    }

    #[test]
    fn two_in_five_are_spread_evenly_and_exact_per_window() {
        let b = Behavior::FailRate {
            fail: 2,
            every: 5,
            status: 500,
            latency: Duration::ZERO,
        };
        let f = failures(b, 1000);
        assert_eq!(f.len(), 400);
        for window in 0..200 {
            let in_window = f.iter().filter(|&&i| i / 5 == window).count();
            assert_eq!(in_window, 2, "window {window}");
        }
        assert_eq!(&f[..4], &[2, 4, 7, 9]);
    }

    #[test]
    fn degenerate_ratios_never_or_always_fail() {
        assert!(failures(Behavior::fail_one_in(0, 500), 10).is_empty());
        assert_eq!(failures(Behavior::fail_one_in(1, 500), 10).len(), 10);
    }

    #[test]
    fn black_hole_hangs_and_hides_health() {
        assert_eq!(Behavior::BlackHole.decide(0), Action::Hang);
        assert!(!Behavior::BlackHole.answers_health());
        assert!(Behavior::Status(503).answers_health());
    }
}
