//! The fleet's verdict on each endpoint, from the votes of its assigned checkers. Pure.
//!
//! - One pod, one vote: only the assigned checkers' verdicts count, each once; a sidecar that
//!   is not assigned (or no longer is) does not vote.
//! - A strict majority of the checkers that report fails an endpoint: one liar among three is
//!   outvoted, and a tie passes (a failing health check must be seen by most of its checkers).
//! - An endpoint none of whose checkers has a verdict is `Pending` until `unchecked_after`
//!   (two probe intervals) has passed, then `Unchecked`: every sidecar probes it itself.
//! - The failing endpoints are capped at `maxEjectionPercent` of the pool, the ones with the
//!   clearest verdict first (most of their checkers failing them), then by address, so the
//!   fleet never takes out more than a sidecar's own machine would.

use std::net::SocketAddr;
use std::time::Duration;

use rollcall_api::roster::ProbeVerdict;

/// The votes of one endpoint's checkers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Assigned checkers that gave a verdict.
    pub voters: u32,
    /// Of them, those whose probes fail.
    pub failing: u32,
}

impl Tally {
    /// Count the votes of `checkers` (each once) as `vote_of` reads them.
    pub fn of<T>(
        checkers: impl IntoIterator<Item = T>,
        vote_of: impl Fn(T) -> Option<ProbeVerdict>,
    ) -> Self {
        let mut tally = Self::default();
        for checker in checkers {
            match vote_of(checker) {
                Some(ProbeVerdict::Failing) => {
                    tally.voters += 1;
                    tally.failing += 1;
                }
                Some(ProbeVerdict::Passing) => tally.voters += 1,
                None => {}
            }
        }
        tally
    }

    /// A strict majority of those that voted fails it.
    pub fn fails(self) -> bool {
        self.failing * 2 > self.voters
    }
}

/// What the fleet says of one endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Passing,
    Failing,
    /// No checker has spoken yet (for less than `unchecked_after`).
    Pending,
    /// No checker has spoken for `unchecked_after`: every sidecar probes it itself.
    Unchecked,
    /// Failing, but the pool's ejection cap is spent: passed on as passing.
    FailingCapped,
}

/// One endpoint's input: its address, its checkers' votes, and how long it has had none.
#[derive(Clone, Copy, Debug)]
pub struct Input {
    pub addr: SocketAddr,
    pub tally: Tally,
    /// How long no checker has had a verdict on it (zero while some has).
    pub silent_for: Duration,
}

/// Every endpoint's standing, in the order of `inputs`; at most `max_failing` fail.
pub fn decide(inputs: &[Input], max_failing: usize, unchecked_after: Duration) -> Vec<Standing> {
    let mut standings: Vec<Standing> = inputs
        .iter()
        .map(|i| match i.tally {
            Tally { voters: 0, .. } if i.silent_for >= unchecked_after => Standing::Unchecked,
            Tally { voters: 0, .. } => Standing::Pending,
            t if t.fails() => Standing::Failing,
            _ => Standing::Passing,
        })
        .collect();
    let mut failing: Vec<usize> = (0..inputs.len())
        .filter(|&i| standings[i] == Standing::Failing)
        .collect();
    if failing.len() > max_failing {
        // Clearest first: the larger share of checkers failing it, then more of them, then
        // the address, so the same endpoints stay out from one computation to the next.
        failing.sort_by(|&a, &b| {
            let (ta, tb) = (inputs[a].tally, inputs[b].tally);
            (u64::from(tb.failing) * u64::from(ta.voters))
                .cmp(&(u64::from(ta.failing) * u64::from(tb.voters)))
                .then(tb.failing.cmp(&ta.failing))
                .then(inputs[a].addr.cmp(&inputs[b].addr))
        });
        for &i in &failing[max_failing..] {
            standings[i] = Standing::FailingCapped;
        }
    }
    standings
}

/// How many endpoints of `total` may fail at once under `maxEjectionPercent`, as a sidecar's
/// health machine counts it (at least one unless the percentage is 0).
pub fn max_failing(total: usize, max_ejection_percent: u32) -> usize {
    match max_ejection_percent.min(100) {
        0 => 0,
        pct => (total * pct as usize / 100).max(1),
    }
}

#[cfg(test)]
mod tests;
