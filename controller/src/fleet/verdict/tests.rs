//! Verdict combination: majority, the lone liar, silence, and the cap.

use std::collections::HashMap;

use super::*;

const SEC: Duration = Duration::from_secs(1);

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 80))
}

fn votes(pairs: &[(&'static str, ProbeVerdict)]) -> HashMap<&'static str, ProbeVerdict> {
    pairs.iter().copied().collect()
}

use ProbeVerdict::{Failing as F, Passing as P};

#[test]
fn a_strict_majority_of_the_reporting_checkers_fails_an_endpoint() {
    let checkers = ["a", "b", "c"];
    /// The votes given, then the voters, the failing votes, and whether it fails.
    type Case = (&'static [(&'static str, ProbeVerdict)], u32, u32, bool);
    let cases: &[Case] = &[
        (&[("a", F), ("b", F), ("c", F)], 3, 3, true),
        (&[("a", F), ("b", F), ("c", P)], 3, 2, true),
        // A lone liar is outvoted.
        (&[("a", F), ("b", P), ("c", P)], 3, 1, false),
        // Two report, they disagree: a tie passes.
        (&[("a", F), ("b", P)], 2, 1, false),
        // Two report, both fail: the silent third does not save it.
        (&[("a", F), ("b", F)], 2, 2, true),
        // The only one reporting decides.
        (&[("c", F)], 1, 1, true),
        (&[], 0, 0, false),
    ];
    for (given, voters, failing, fails) in cases {
        let given: HashMap<&str, ProbeVerdict> = given.iter().copied().collect();
        let tally = Tally::of(checkers, |c| given.get(c).copied());
        assert_eq!(
            tally,
            Tally {
                voters: *voters,
                failing: *failing
            },
            "{given:?}"
        );
        assert_eq!(tally.fails(), *fails, "{given:?}");
    }
}

#[test]
fn only_assigned_checkers_vote_and_each_once() {
    let given = votes(&[("a", P), ("outsider", F), ("other", F)]);
    let tally = Tally::of(["a", "b", "c"], |c| given.get(c).copied());
    assert_eq!(
        tally,
        Tally {
            voters: 1,
            failing: 0
        }
    );
    assert!(
        !tally.fails(),
        "votes of sidecars not assigned do not count"
    );
}

#[test]
fn silence_is_pending_then_unchecked_after_two_intervals() {
    let silent = |for_: Duration| Input {
        addr: addr(1),
        tally: Tally::default(),
        silent_for: for_,
    };
    let after = 2 * SEC;
    assert_eq!(
        decide(&[silent(Duration::ZERO)], 1, after),
        [Standing::Pending]
    );
    assert_eq!(
        decide(&[silent(after - Duration::from_millis(1))], 1, after),
        [Standing::Pending]
    );
    assert_eq!(decide(&[silent(after)], 1, after), [Standing::Unchecked]);
    // A vote ends the silence whatever the clock says.
    let spoken = Input {
        addr: addr(1),
        tally: Tally {
            voters: 1,
            failing: 0,
        },
        silent_for: 10 * SEC,
    };
    assert_eq!(decide(&[spoken], 1, after), [Standing::Passing]);
}

#[test]
fn never_more_fail_than_max_ejection_percent_clearest_first() {
    let failing = |n: u8, failing: u32, voters: u32| Input {
        addr: addr(n),
        tally: Tally { voters, failing },
        silent_for: Duration::ZERO,
    };
    let inputs = [
        failing(1, 2, 3),
        failing(2, 3, 3),
        failing(3, 2, 2),
        failing(4, 2, 3),
        failing(5, 0, 3),
    ];
    let standings = decide(&inputs, 2, 2 * SEC);
    assert_eq!(
        standings,
        [
            Standing::FailingCapped,
            Standing::Failing,
            Standing::Failing,
            Standing::FailingCapped,
            Standing::Passing,
        ]
    );
    // Equal verdicts: by address, so the choice is the same every time.
    let even = [failing(9, 2, 3), failing(8, 2, 3), failing(7, 2, 3)];
    assert_eq!(
        decide(&even, 1, 2 * SEC),
        [
            Standing::FailingCapped,
            Standing::FailingCapped,
            Standing::Failing
        ]
    );
    assert_eq!(decide(&even, 0, 2 * SEC), [Standing::FailingCapped; 3]);
}

#[test]
fn the_cap_is_counted_as_a_sidecar_counts_it() {
    assert_eq!(max_failing(100, 10), 10);
    assert_eq!(max_failing(3, 10), 1, "at least one");
    assert_eq!(max_failing(3, 0), 0);
    assert_eq!(max_failing(7, 100), 7);
    assert_eq!(max_failing(7, 250), 7);
}
