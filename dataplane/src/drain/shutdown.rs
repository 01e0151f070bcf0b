//! The sidecar's exit plan on SIGTERM, pure: given when the signal came (and whether a second
//! one asked to hurry), which phase the sidecar is in and until when.
//!
//! Decisions where the issue is silent: the grace period starts when accepting stops, so the
//! whole exit takes at most `pre_stop + grace` (keep it below the pod's
//! `terminationGracePeriodSeconds`, 30 s by default: the defaults are 5 s + 20 s); a second
//! SIGTERM or Ctrl-C ends the pre-stop window early but never cuts the grace.

use std::time::Duration;

use tokio::time::Instant;

/// How the sidecar leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownPlan {
    /// Not ready but still serving, so endpoint removal reaches every client first.
    pub pre_stop: Duration,
    /// After accepting stops: how long requests in flight get to finish.
    pub grace: Duration,
}

/// Where an exit stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not ready, serving as usual, until `stop_accepting`.
    PreStop { stop_accepting: Instant },
    /// Not accepting; in-flight requests finish until `cut`.
    Draining { cut: Instant },
    /// Whatever is left is closed.
    Done,
}

impl Default for ShutdownPlan {
    fn default() -> Self {
        Self {
            pre_stop: Duration::from_secs(5),
            grace: Duration::from_secs(20),
        }
    }
}

impl ShutdownPlan {
    /// When accepting stops, for a signal at `signalled`, hurried at `hurried` (a second signal).
    pub fn stop_accepting(&self, signalled: Instant, hurried: Option<Instant>) -> Instant {
        let planned = signalled + self.pre_stop;
        hurried.map_or(planned, |h| h.max(signalled).min(planned))
    }

    /// The phase at `now`.
    pub fn phase(&self, signalled: Instant, hurried: Option<Instant>, now: Instant) -> Phase {
        let stop_accepting = self.stop_accepting(signalled, hurried);
        let cut = stop_accepting + self.grace;
        if now < stop_accepting {
            Phase::PreStop { stop_accepting }
        } else if now < cut {
            Phase::Draining { cut }
        } else {
            Phase::Done
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: ShutdownPlan = ShutdownPlan {
        pre_stop: Duration::from_secs(5),
        grace: Duration::from_secs(20),
    };
    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn serve_through_the_window_then_drain_for_the_grace_then_done() {
        let t0 = Instant::now();
        let stop = t0 + 5 * SEC;
        let cut = stop + 20 * SEC;
        let cases = [
            (
                t0,
                Phase::PreStop {
                    stop_accepting: stop,
                },
            ),
            (
                t0 + 4 * SEC,
                Phase::PreStop {
                    stop_accepting: stop,
                },
            ),
            (stop, Phase::Draining { cut }),
            (cut - SEC, Phase::Draining { cut }),
            (cut, Phase::Done),
        ];
        for (now, phase) in cases {
            assert_eq!(PLAN.phase(t0, None, now), phase, "at +{:?}", now - t0);
        }
    }

    #[test]
    fn a_second_signal_ends_the_window_but_not_the_grace() {
        let t0 = Instant::now();
        let hurried = t0 + 2 * SEC;
        assert_eq!(PLAN.stop_accepting(t0, Some(hurried)), hurried);
        assert_eq!(
            PLAN.phase(t0, Some(hurried), hurried),
            Phase::Draining {
                cut: hurried + 20 * SEC
            }
        );
        // A second signal after the window changes nothing.
        assert_eq!(PLAN.stop_accepting(t0, Some(t0 + 9 * SEC)), t0 + 5 * SEC);
    }
}
