use std::collections::BTreeMap;

use rollcall_api::roster::{EndpointHealth, PoolRef};

use super::*;

fn addr(i: u64) -> SocketAddr {
    format!("10.1.{}.{}:80", i / 250, i % 250).parse().unwrap()
}

fn ejecting(reason: &str, since: u64, error: Option<&str>) -> EndpointHealth {
    EndpointHealth {
        probe: None,
        addr: addr(0),
        state: EndpointState::Ejected,
        reason: reason.into(),
        since_unix_ms: since,
        times_ejected: 1,
        last_error: error.map(String::from),
        ejection_suppressed: false,
    }
}

fn health(version: u64, panic: bool, endpoints: Vec<EndpointHealth>) -> PoolHealth {
    PoolHealth {
        pool: PoolRef::new("shop", "web"),
        roster_version: version,
        panic,
        endpoints,
        refused: None,
        complete: false,
        continued: false,
        removed: Vec::new(),
    }
}

fn at(i: u64, state: EndpointState) -> EndpointHealth {
    EndpointHealth {
        addr: addr(i),
        state,
        ..ejecting("ProbeFailures", 10 + i, Some("refused"))
    }
}

/// A small deterministic generator (xorshift64*), so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Per address: the state counts over counted reports and the sorted ejection details.
type Totals = BTreeMap<SocketAddr, ([u32; 5], Vec<(String, u64, Option<String>)>)>;

/// What the totals must equal: every report kept whole, counted or not, recounted from scratch
/// (however it arrived: whole, in parts, or as changes onto the previous one).
#[derive(Default)]
struct Model {
    reports: BTreeMap<StreamId, (PoolHealth, bool)>,
}

impl Model {
    fn expected(&self) -> Totals {
        let mut out = Totals::new();
        for (health, counted) in self.reports.values() {
            // The last entry for an address wins, as in the tally.
            let mut latest: BTreeMap<SocketAddr, &EndpointHealth> = BTreeMap::new();
            for e in &health.endpoints {
                latest.insert(e.addr, e);
            }
            for (a, e) in latest {
                let entry = out.entry(a).or_default();
                if !counted {
                    continue;
                }
                let i = STATES.iter().position(|s| *s == e.state).unwrap();
                entry.0[i] += 1;
                if e.state == EndpointState::Ejected {
                    entry
                        .1
                        .push((e.reason.clone(), e.since_unix_ms, e.last_error.clone()));
                }
            }
        }
        for v in out.values_mut() {
            v.1.sort();
        }
        out
    }
}

fn observed(tally: &PoolTally, addrs: impl Iterator<Item = SocketAddr>) -> Totals {
    let mut out = Totals::new();
    for a in addrs {
        if let Some(t) = tally.endpoint(&a) {
            let mut ej: Vec<_> = t
                .ejecting()
                .map(|e| (e.reason.clone(), e.since_unix_ms, e.last_error.clone()))
                .collect();
            ej.sort();
            out.insert(a, (t.counts, ej));
        }
    }
    out
}

#[test]
fn any_sequence_of_reports_whole_in_parts_or_as_changes_equals_counting_the_latest_from_scratch() {
    let states = STATES;
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut tally = PoolTally::default();
        let mut model = Model::default();
        // Addresses drift upward over the run, as pods are replaced.
        let mut base = 0;
        for step in 0..300 {
            let id = StreamId::new(rng.below(6));
            match rng.below(10) {
                0..=5 => {
                    if rng.below(20) == 0 {
                        base += 3;
                    }
                    let n = rng.below(12);
                    let endpoints = (0..n)
                        .map(|_| {
                            let mut e = at(base + rng.below(15), states[rng.below(5) as usize]);
                            e.reason = ["ProbeFailures", "ConsecutiveGatewayErrors"]
                                [rng.below(2) as usize]
                                .into();
                            e.since_unix_ms = rng.below(4);
                            e.last_error = (rng.below(3) > 0).then(|| format!("e{}", rng.below(3)));
                            e
                        })
                        .collect();
                    let h = health(rng.below(3), rng.below(4) == 0, endpoints);
                    match rng.below(3) {
                        0 => {
                            tally.record(id, &h);
                        }
                        // A complete report in parts: nothing changes before the last.
                        1 => {
                            let chunks: Vec<&[EndpointHealth]> = if h.endpoints.is_empty() {
                                vec![&[]]
                            } else {
                                h.endpoints.chunks(1 + rng.below(4) as usize).collect()
                            };
                            let before = model.expected();
                            let universe = (0..base + 15).map(addr);
                            let n = chunks.len();
                            for (i, chunk) in chunks.into_iter().enumerate() {
                                let part = PoolHealth {
                                    endpoints: chunk.to_vec(),
                                    ..h.clone()
                                };
                                let changed = tally.record_part(id, &part, i == 0, i + 1 == n);
                                if i + 1 < n {
                                    assert!(!changed);
                                    assert!(tally.in_parts(id));
                                    // Slots the parts hold show no counts (the status
                                    // reads those as unreported).
                                    let seen = |t: Totals| -> Totals {
                                        t.into_iter().filter(|(_, v)| v.0 != [0; 5]).collect()
                                    };
                                    let now = seen(observed(&tally, universe.clone()));
                                    assert_eq!(
                                        now,
                                        seen(before.clone()),
                                        "seed {seed} step {step} part {i}"
                                    );
                                }
                            }
                            assert!(!tally.in_parts(id));
                        }
                        // Changes onto the stream's previous report.
                        _ => {
                            let latest = |h: &PoolHealth| -> BTreeMap<SocketAddr, EndpointHealth> {
                                h.endpoints.iter().map(|e| (e.addr, e.clone())).collect()
                            };
                            let previous = model
                                .reports
                                .get(&id)
                                .map(|(h, _)| latest(h))
                                .unwrap_or_default();
                            let next = latest(&h);
                            let changes = PoolHealth {
                                endpoints: next
                                    .values()
                                    .filter(|e| previous.get(&e.addr) != Some(*e))
                                    .cloned()
                                    .collect(),
                                removed: previous
                                    .keys()
                                    .filter(|a| !next.contains_key(a))
                                    .copied()
                                    .collect(),
                                ..h.clone()
                            };
                            tally.record_changes(id, &changes);
                        }
                    }
                    model.reports.insert(id, (h, true));
                }
                6..=7 => {
                    let counted = rng.below(2) == 0;
                    tally.set_counted(id, counted);
                    if let Some(r) = model.reports.get_mut(&id) {
                        r.1 = counted;
                    }
                }
                _ => {
                    tally.remove(id);
                    model.reports.remove(&id);
                }
            }
            let universe = (0..base + 15).map(addr);
            let expected = model.expected();
            assert_eq!(
                observed(&tally, universe),
                expected,
                "seed {seed} step {step}"
            );
            // Exactly the addresses some report names hold a slot: freed ones are reused.
            assert_eq!(tally.addresses(), expected.len(), "seed {seed} step {step}");
            let counted: Vec<&PoolHealth> = model
                .reports
                .values()
                .filter(|(_, c)| *c)
                .map(|(h, _)| h)
                .collect();
            assert_eq!(tally.reporting() as usize, counted.len());
            assert_eq!(
                tally.panicking() as usize,
                counted.iter().filter(|h| h.panic).count()
            );
            let mut versions: Vec<u64> = tally.roster_versions().collect();
            versions.sort();
            let mut want: Vec<u64> = counted.iter().map(|h| h.roster_version).collect();
            want.sort();
            assert_eq!(versions, want);
            assert_eq!(tally.is_empty(), model.reports.is_empty());
        }
    }
}

#[test]
fn a_report_changes_the_totals_only_when_what_it_says_changed() {
    let mut tally = PoolTally::default();
    let a = StreamId::new(1);
    let h = health(1, false, vec![at(1, EndpointState::Healthy)]);
    assert!(tally.record(a, &h), "a first report is a change");
    assert!(!tally.record(a, &h), "the same report again is not");
    let mut later = h.clone();
    later.endpoints[0].since_unix_ms += 5;
    assert!(
        !tally.record(a, &later),
        "a healthy endpoint's details are not shown in the status"
    );
    let ejected = health(1, false, vec![at(1, EndpointState::Ejected)]);
    assert!(tally.record(a, &ejected));
    let mut other_error = ejected.clone();
    other_error.endpoints[0].last_error = Some("timeout".into());
    assert!(
        tally.record(a, &other_error),
        "an ejection's error is listed"
    );
    assert!(tally.record(a, &health(2, false, other_error.endpoints.clone())));
    assert!(tally.record(a, &health(2, true, other_error.endpoints.clone())));
    assert!(tally.set_counted(a, false));
    assert!(!tally.set_counted(a, false));
    assert!(
        tally.record(a, &health(2, true, other_error.endpoints)),
        "a quiet stream speaking again counts again"
    );
    assert!(tally.remove(a));
    assert!(!tally.remove(a));
    assert!(tally.is_empty());
    assert_eq!(tally.addresses(), 0);
}

#[test]
fn ejection_details_come_from_the_counted_reporters_that_eject() {
    let mut tally = PoolTally::default();
    let one = health(1, false, vec![at(1, EndpointState::Ejected)]);
    let mut two = one.clone();
    two.endpoints[0].reason = "ConsecutiveGatewayErrors".into();
    tally.record(StreamId::new(1), &one);
    tally.record(StreamId::new(2), &two);
    tally.record(
        StreamId::new(3),
        &health(1, false, vec![at(1, EndpointState::Healthy)]),
    );
    let reasons = |t: &PoolTally| -> Vec<String> {
        t.endpoint(&addr(1))
            .unwrap()
            .ejecting()
            .map(|e| e.reason.clone())
            .collect()
    };
    assert_eq!(
        tally.endpoint(&addr(1)).unwrap().counts,
        [1, 0, 0, 0, 2],
        "one healthy, two ejecting"
    );
    assert_eq!(
        reasons(&tally),
        ["ProbeFailures", "ConsecutiveGatewayErrors"]
    );
    tally.set_counted(StreamId::new(1), false);
    assert_eq!(reasons(&tally), ["ConsecutiveGatewayErrors"]);
    assert_eq!(tally.endpoint(&addr(1)).unwrap().seen(), 2);
    assert!(tally.endpoint(&addr(7)).is_none());
}

#[test]
fn a_fleet_of_mostly_healthy_reports_holds_no_byte_per_endpoint_per_sidecar() {
    // 50 sidecars report 2,000 endpoints whole, in parts of 64, interleaved as a fleet's
    // first reports arrive; one ejects an endpoint, one sees 50 unknown, one 300.
    let mut tally = PoolTally::default();
    let report = |sidecar: u64| -> Vec<EndpointHealth> {
        (0..2000)
            .map(|i| match (sidecar, i) {
                (0, 7) => at(i, EndpointState::Ejected),
                (1, 100..400) | (2, 100..150) => at(i, EndpointState::Unknown),
                _ => at(i, EndpointState::Healthy),
            })
            .collect()
    };
    let reports: Vec<Vec<EndpointHealth>> = (0..50).map(report).collect();
    let parts = 2000usize.div_ceil(64);
    for part in 0..parts {
        for (sidecar, endpoints) in reports.iter().enumerate() {
            let chunk = endpoints.chunks(64).nth(part).unwrap().to_vec();
            tally.record_part(
                StreamId::new(sidecar as u64),
                &health(1, false, chunk),
                part == 0,
                part + 1 == parts,
            );
        }
        // Reports still in parts are gathered compact too (they all pile up at once).
        if part + 2 == parts {
            assert_eq!(tally.pending.len(), 50);
            let dense: Vec<StreamId> = (tally.pending.iter())
                .filter(|(_, r)| r.states.is_dense())
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(dense, [StreamId::new(1)]);
        }
    }
    assert_eq!(tally.reporting(), 50);
    let e = tally.endpoint(&addr(7)).unwrap();
    assert_eq!(e.counts, [49, 0, 0, 0, 1]);
    assert_eq!(tally.endpoint(&addr(120)).unwrap().counts, [48, 2, 0, 0, 0]);
    assert_eq!(tally.endpoint(&addr(150)).unwrap().counts, [49, 1, 0, 0, 0]);
    let dense: Vec<StreamId> = tally
        .reporters
        .iter()
        .filter(|(_, r)| r.states.is_dense())
        .map(|(id, _)| *id)
        .collect();
    // Only the one that sees 15% of the pool differently is kept a byte per endpoint.
    assert_eq!(dense, [StreamId::new(1)]);
}
