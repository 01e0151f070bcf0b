//! The failure scenarios: what each does to backend 2 (or to every backend), how it is shaped,
//! how long it runs, and what a run of one reports (`Outcome`). Running one is `run.rs`.

use std::time::Duration;

use rollcall_testkit::{Behavior, TestBackend};

use crate::config::{Balance, Shape};
use crate::load::Record;

/// What happens to backend 2 (or, for `HealthzAllFail`, to every backend's health check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    Killed,
    BlackHoled,
    Failing503,
    Failing500,
    Rare500,
    HealthzAllFail,
    /// Backend 2 fails one request in five with a fast 500.
    Fifth500,
    /// Every backend sheds one request in five with a fast 503: an overload, not an outlier.
    AllShed503,
    /// Backend 2 refuses connections for [`RECOVER_AFTER`], then comes back.
    Refused5s,
    /// `BlackHoled` with round-robin balancing: nothing steers away from a slow endpoint by
    /// itself.
    BlackHoledRoundRobin,
    /// Four backends, the others answering in [`SLOW_PEERS`]; backend 2 answers at once and
    /// one request in five with a 500: least-request favours the fast one, its error-rate
    /// penalty starves it of the requests an error-rate detector needs.
    Fifth500FastOfFour,
    /// Backend 2 turns slow ([`SLOW_B2`] per answer) and keeps answering: its share of the
    /// traffic should fall, as under a least-connections balancer, without it failing anything.
    Slow,
    /// `Slow` for [`RECOVER_AFTER`], then fast again: its share should come back.
    SlowRecovers,
    /// Every backend answers in [`MILD_PEERS`]; backend 2 turns [`MILD_B2`] slow (2.5×): at
    /// 200 requests/s in-flight counts seldom differ, so least request sees little of it.
    MildSlow,
    /// `MildSlow` for [`RECOVER_AFTER`], then as fast as the others again.
    MildSlowRecovers,
    /// Backend 2 is killed and revived in turn, [`FLAP_HALF_PERIOD`] down, the same up, until
    /// the run ends: a flapping backend should cost no client anything, and its ups should not
    /// pull traffic into its next down.
    Flapping,
}

/// How long backend 2 stays down, then up, in turn, in [`Scenario::Flapping`].
pub const FLAP_HALF_PERIOD: Duration = Duration::from_secs(1);

/// Backend 2's answer time in [`Scenario::Slow`] and [`Scenario::SlowRecovers`] (the others
/// answer at once).
pub const SLOW_B2: Duration = Duration::from_millis(100);

/// Every backend's answer time in [`Scenario::MildSlow`] and [`Scenario::MildSlowRecovers`],
/// and backend 2's while it is slow.
pub const MILD_PEERS: Duration = Duration::from_millis(10);
pub const MILD_B2: Duration = Duration::from_millis(25);

/// The backends' answer time in [`Scenario::Fifth500FastOfFour`] (backend 2's: none).
pub const SLOW_PEERS: Duration = Duration::from_millis(50);

/// The most backends a scenario uses.
pub const MAX_BACKENDS: usize = 4;

pub const ALL: [Scenario; 16] = [
    Scenario::Killed,
    Scenario::BlackHoled,
    Scenario::Failing503,
    Scenario::Failing500,
    Scenario::Rare500,
    Scenario::HealthzAllFail,
    Scenario::Fifth500,
    Scenario::AllShed503,
    Scenario::Refused5s,
    Scenario::BlackHoledRoundRobin,
    Scenario::Fifth500FastOfFour,
    Scenario::Slow,
    Scenario::SlowRecovers,
    Scenario::MildSlow,
    Scenario::MildSlowRecovers,
    Scenario::Flapping,
];

/// How long the failure lasts in the scenarios that recover ([`Scenario::Refused5s`]: backend 2
/// refuses connections; [`Scenario::SlowRecovers`], [`Scenario::MildSlowRecovers`]: it is slow).
pub const RECOVER_AFTER: Duration = Duration::from_secs(5);

/// How long a recovering scenario is watched after backend 2 is back, at least.
const WATCH_RECOVERY: Duration = Duration::from_secs(7);

/// Timing and load, the same for every run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub rate: u32,
    pub duration: Duration,
    pub inject_at: Duration,
    pub client_timeout: Duration,
    /// Between "the proxy answers" and the start of the load, so probes see every backend.
    pub settle: Duration,
}

/// What one run measured.
pub struct Outcome {
    pub records: Vec<Record>,
    /// When the failure was injected, from the start of the load.
    pub injected: Duration,
    /// Traffic requests backend 2 received after the injection.
    pub b2_after: u64,
    /// The last time backend 2's request counter moved, after the injection.
    pub b2_last: Option<Duration>,
    /// When the proxy first said backend 2 was down, after the injection.
    pub marked_down: Option<Duration>,
    /// Whether the proxy can say so at all.
    pub has_view: bool,
    /// Traffic requests all backends received after the injection (tries, retries included).
    pub backends_after: u64,
    /// For [`Scenario::Refused5s`]: from backend 2's return to the first traffic request it got.
    pub back_after: Option<Duration>,
    /// Backend 2's part of the traffic requests all backends received, second by second after
    /// the injection (`None` for a second in which none arrived anywhere).
    pub b2_share: Vec<Option<f64>>,
    /// How long the load ran.
    pub duration: Duration,
    /// POSTs and GETs that reached the backends more than once (a retry of a request that had
    /// already arrived somewhere): for a POST, an order placed twice.
    pub duplicate_posts: u64,
    pub duplicate_gets: u64,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Self::Killed => "killed",
            Self::BlackHoled => "black-holed",
            Self::Failing503 => "failing-503",
            Self::Failing500 => "failing-500",
            Self::Rare500 => "rare-500",
            Self::HealthzAllFail => "healthz-all-fail",
            Self::Fifth500 => "fifth-500",
            Self::AllShed503 => "all-shed-503",
            Self::Refused5s => "refused-5s",
            Self::BlackHoledRoundRobin => "black-holed-rr",
            Self::Fifth500FastOfFour => "fifth-500-fast-of-4",
            Self::Slow => "slow",
            Self::SlowRecovers => "slow-recovers",
            Self::MildSlow => "mild-slow",
            Self::MildSlowRecovers => "mild-slow-recovers",
            Self::Flapping => "flapping",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Killed => {
                "backend 2 killed: listener closed, open connections aborted, connects refused"
            }
            Self::BlackHoled => {
                "backend 2 black-holed: accepts and reads, never answers (/healthz included)"
            }
            Self::Failing503 => {
                "backend 2 fails every 2nd request with 503 at once; /healthz stays 200"
            }
            Self::Failing500 => {
                "backend 2 fails every 2nd request with 500 at once; /healthz stays 200"
            }
            Self::Rare500 => {
                "backend 2 fails 1 request in 100 with 500 (noise); /healthz stays 200"
            }
            Self::HealthzAllFail => {
                "/healthz answers 503 on all 3 backends; traffic still succeeds everywhere"
            }
            Self::Fifth500 => "backend 2 fails 1 request in 5 with 500 at once; /healthz stays 200",
            Self::AllShed503 => {
                "every backend sheds 1 request in 5 with 503 at once (overload, no outlier)"
            }
            Self::Refused5s => "backend 2 refuses connections for 5 s, then is back",
            Self::BlackHoledRoundRobin => {
                "backend 2 black-holed (accepts, never answers), every proxy round robin"
            }
            Self::Fifth500FastOfFour => {
                "4 backends, 3 answer in 50 ms; backend 2 answers at once and fails 1 in 5 with 500 (500s retried)"
            }
            Self::Slow => {
                "backend 2 answers every request 100 ms late, the others at once; /healthz stays fast"
            }
            Self::SlowRecovers => "backend 2 answers 100 ms late for 5 s, then at once again",
            Self::MildSlow => "every backend answers in 10 ms; backend 2 turns to 25 ms (2.5x)",
            Self::MildSlowRecovers => {
                "every backend answers in 10 ms; backend 2 in 25 ms for 5 s, then 10 ms again"
            }
            Self::Flapping => "backend 2 killed and revived in turn, 1 s down, 1 s up, to the end",
        }
    }

    /// How many backends the proxies get.
    pub fn backends(self) -> usize {
        match self {
            Self::Fifth500FastOfFour => 4,
            _ => 3,
        }
    }

    /// What the proxies are set up to do differently here: round robin for the black hole
    /// that nothing steers away from; retries of a 500 where a fast backend fails with them
    /// (without, every 500 reaches the client until the ejection, in all three).
    pub fn shape(self) -> Shape {
        match self {
            Self::BlackHoledRoundRobin => Shape {
                balance: Balance::RoundRobin,
                ..Shape::default()
            },
            Self::Fifth500FastOfFour => Shape {
                retry_500: true,
                ..Shape::default()
            },
            _ => Shape::default(),
        }
    }

    /// How the backends behave before the failure (a healthy pool of this shape).
    pub(crate) fn baseline(self, backends: &[TestBackend]) {
        match self {
            Self::Fifth500FastOfFour => {
                for (i, b) in backends.iter().enumerate() {
                    if i != 1 {
                        b.set_behavior(Behavior::slow(SLOW_PEERS));
                    }
                }
            }
            Self::MildSlow | Self::MildSlowRecovers => {
                for b in backends {
                    b.set_behavior(Behavior::slow(MILD_PEERS));
                }
            }
            _ => {}
        }
    }

    /// Whether backend 2 can count what reaches it (a killed backend sees nothing; one that
    /// comes back counts from its return).
    pub fn b2_counts(self) -> bool {
        self != Self::Killed
    }

    /// Keep a flapping backend 2 in the state this moment of the run calls for, `since` the
    /// injection (down first); every other scenario leaves it alone.
    pub(crate) async fn flap(
        self,
        backends: &[TestBackend],
        since: Duration,
    ) -> anyhow::Result<()> {
        if self != Self::Flapping {
            return Ok(());
        }
        let b2 = &backends[1];
        let half_periods = since.as_millis() / FLAP_HALF_PERIOD.as_millis();
        let up = half_periods % 2 == 1;
        match (up, b2.is_alive()) {
            (true, false) => b2.revive().await?,
            (false, true) => b2.kill().await,
            _ => {}
        }
        Ok(())
    }

    /// Whether the failure is undone mid-run.
    pub fn recovers(self) -> bool {
        matches!(
            self,
            Self::Refused5s | Self::SlowRecovers | Self::MildSlowRecovers
        )
    }

    /// Whether the table shows backend 2's share of the traffic, second by second: where the
    /// question is how much traffic a slow endpoint keeps, not what failed.
    pub fn shows_share(self) -> bool {
        matches!(
            self,
            Self::Slow | Self::SlowRecovers | Self::MildSlow | Self::MildSlowRecovers
        )
    }

    /// How long the load runs: longer than planned when the scenario needs it.
    pub fn duration(self, plan: &Plan) -> Duration {
        match self {
            Self::Refused5s | Self::SlowRecovers | Self::MildSlowRecovers => plan
                .duration
                .max(plan.inject_at + RECOVER_AFTER + WATCH_RECOVERY),
            _ => plan.duration,
        }
    }

    pub(crate) async fn inject(self, backends: &[TestBackend]) {
        let b2 = &backends[1];
        match self {
            Self::Killed => b2.kill().await,
            Self::BlackHoled | Self::BlackHoledRoundRobin => {
                b2.set_behavior(Behavior::BlackHole);
            }
            Self::Failing503 => b2.set_behavior(Behavior::fail_one_in(2, 503)),
            Self::Failing500 => b2.set_behavior(Behavior::fail_one_in(2, 500)),
            Self::Rare500 => b2.set_behavior(Behavior::fail_one_in(100, 500)),
            Self::HealthzAllFail => backends.iter().for_each(|b| b.set_healthz(false)),
            Self::Fifth500 => b2.set_behavior(Behavior::fail_one_in(5, 500)),
            Self::AllShed503 => backends
                .iter()
                .for_each(|b| b.set_behavior(Behavior::fail_one_in(5, 503))),
            Self::Refused5s | Self::Flapping => b2.kill().await,
            Self::Fifth500FastOfFour => b2.set_behavior(Behavior::fail_one_in(5, 500)),
            Self::Slow | Self::SlowRecovers => b2.set_behavior(Behavior::slow(SLOW_B2)),
            Self::MildSlow | Self::MildSlowRecovers => b2.set_behavior(Behavior::slow(MILD_B2)),
        }
    }

    /// Undo the failure mid-run, for the scenarios that recover; returns whether it did.
    pub(crate) async fn recover(self, backends: &[TestBackend]) -> anyhow::Result<bool> {
        match self {
            Self::Refused5s => {
                backends[1].revive().await?;
                Ok(true)
            }
            Self::SlowRecovers => {
                backends[1].set_behavior(Behavior::ok());
                Ok(true)
            }
            Self::MildSlowRecovers => {
                backends[1].set_behavior(Behavior::slow(MILD_PEERS));
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
