use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::policy::{Algorithm, PoolPolicy};
use crate::roster::{PoolRef, PoolState, RosterUpdate};

fn pool() -> pb::PoolRef {
    (&PoolRef::new("shop", "web")).into()
}

fn endpoint(i: u32, weight: u32, ready: bool) -> Endpoint {
    Endpoint {
        addr: format!("10.2.{}.{}:8080", i / 250, i % 250)
            .parse()
            .unwrap(),
        pod: Some(format!("web-{i}")),
        zone: i.is_multiple_of(3).then(|| "zone-a".to_string()),
        ready,
        serving: true,
        terminating: !ready,
        weight,
    }
}

fn roster(endpoints: Vec<Endpoint>, algorithm: Algorithm) -> Roster {
    let mut policy = PoolPolicy::default();
    policy.load_balancer.algorithm = algorithm;
    let mut endpoints = endpoints;
    endpoints.sort_by_key(|e| e.addr);
    endpoints.dedup_by_key(|e| e.addr);
    Roster {
        endpoints,
        policy,
        service: "shop/web:http".into(),
    }
}

fn full(version: u64, r: &Roster) -> pb::RosterUpdate {
    pb::RosterUpdate::try_from(&RosterUpdate {
        pool: PoolRef::new("shop", "web"),
        version,
        state: PoolState::Roster(r.clone()),
    })
    .unwrap()
}

/// The roster's fingerprint, as the controller computes it.
fn fp(r: &Roster) -> Vec<u8> {
    fingerprint(r, &serde_json::to_string(&r.policy).unwrap())
}

/// What the controller sends a delta-capable stream that holds `base` for version `next`.
fn messages(base: Option<(u64, &Roster)>, version: u64, next: &Roster) -> Vec<pb::RosterUpdate> {
    if let Some((base_version, base)) = base {
        let change = diff(base, next);
        let fp = fp(next);
        if let Some(m) = delta_message(&pool(), version, base_version, &change, next, &fp).unwrap()
        {
            return vec![m];
        }
    }
    let mut whole = full(version, next);
    whole.fingerprint = fp(next);
    parts(&whole)
}

fn receive(asm: &mut Assembler, messages: Vec<pb::RosterUpdate>) -> Option<Roster> {
    let n = messages.len();
    let mut out = None;
    for (i, m) in messages.into_iter().enumerate() {
        match asm.accept(m).unwrap() {
            Assembled::Partial => assert!(i + 1 < n, "the last part must complete the state"),
            Assembled::Complete(update) => {
                assert_eq!(i + 1, n, "nothing completes before the last part");
                let update = RosterUpdate::try_from(update).unwrap();
                let PoolState::Roster(r) = update.state else {
                    panic!("a roster was sent");
                };
                out = Some(r);
            }
        }
    }
    out
}

fn random_roster(rng: &mut StdRng, previous: &Roster) -> Roster {
    let mut endpoints = previous.endpoints.clone();
    match rng.random_range(0..6) {
        // A few endpoints change, leave or arrive: what pod churn looks like.
        0..=2 => {
            for _ in 0..rng.random_range(1..6) {
                match rng.random_range(0..3) {
                    0 if !endpoints.is_empty() => {
                        let i = rng.random_range(0..endpoints.len());
                        endpoints.remove(i);
                    }
                    1 if !endpoints.is_empty() => {
                        let i = rng.random_range(0..endpoints.len());
                        endpoints[i].weight = rng.random_range(1..5);
                        endpoints[i].ready = rng.random_bool(0.8);
                    }
                    _ => endpoints.push(endpoint(rng.random_range(0..2000), 1, true)),
                }
            }
        }
        // A rollout: most of the pool is replaced.
        3 => {
            endpoints = (0..rng.random_range(0..900))
                .map(|_| endpoint(rng.random_range(0..2000), 1, true))
                .collect();
        }
        // Nothing left.
        4 => endpoints.clear(),
        // Only the policy changes.
        _ => {}
    }
    let algorithm = if rng.random_bool(0.5) {
        Algorithm::RoundRobin
    } else {
        Algorithm::LeastRequest
    };
    roster(endpoints, algorithm)
}

#[test]
fn any_sequence_of_changes_sent_as_deltas_and_parts_equals_the_snapshot() {
    for seed in 0..40 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut asm = Assembler::new();
        let mut current = roster(
            (0..rng.random_range(0..700))
                .map(|i| endpoint(i, 1, true))
                .collect(),
            Algorithm::RoundRobin,
        );
        let mut version = 1;
        assert_eq!(
            receive(&mut asm, messages(None, version, &current)).as_ref(),
            Some(&current)
        );
        for _ in 0..60 {
            let next = random_roster(&mut rng, &current);
            // A slow stream skips versions and gets the complete state.
            let skipped = rng.random_bool(0.1);
            let base = (!skipped).then_some((version, &current));
            version += if skipped { 2 } else { 1 };
            let got = receive(&mut asm, messages(base, version, &next));
            assert_eq!(got.as_ref(), Some(&next), "seed {seed} version {version}");
            assert_eq!(asm.endpoints(&pool()).count(), next.endpoints.len());
            assert_eq!(asm.held(&pool()), next.endpoints.len());
            current = next;
        }
    }
}

#[test]
fn diff_names_exactly_what_changed() {
    let base = roster(
        vec![
            endpoint(1, 1, true),
            endpoint(2, 1, true),
            endpoint(3, 1, true),
        ],
        Algorithm::RoundRobin,
    );
    let next = roster(
        vec![
            endpoint(2, 5, true),
            endpoint(3, 1, true),
            endpoint(4, 1, true),
        ],
        Algorithm::RoundRobin,
    );
    let change = diff(&base, &next);
    assert_eq!(
        change.upserted.iter().map(|e| e.addr).collect::<Vec<_>>(),
        vec![endpoint(2, 1, true).addr, endpoint(4, 1, true).addr]
    );
    assert_eq!(change.removed, vec![endpoint(1, 1, true).addr]);
    assert!(!change.policy_changed && !change.service_changed);
    assert!(diff(&next, &next).is_empty());
    let other = roster(next.endpoints.clone(), Algorithm::LeastRequest);
    let change = diff(&next, &other);
    assert!(change.policy_changed && change.upserted.is_empty() && change.removed.is_empty());
    let m = delta_message(&pool(), 9, 8, &change, &other, &[])
        .unwrap()
        .unwrap();
    let Some(pb::roster_update::State::Delta(d)) = m.state else {
        panic!("a delta");
    };
    assert!(d.policy_json.is_some() && d.service.is_none() && d.upserted.is_empty());
}

#[test]
fn a_large_change_goes_as_the_complete_state_in_small_parts() {
    let base = roster(vec![], Algorithm::RoundRobin);
    let next = roster(
        (0..1000).map(|i| endpoint(i, 1, true)).collect(),
        Algorithm::RoundRobin,
    );
    let change = diff(&base, &next);
    assert_eq!(
        delta_message(&pool(), 2, 1, &change, &next, &[]).unwrap(),
        None
    );
    let sent = parts(&full(2, &next));
    assert_eq!(sent.len(), 1000_usize.div_ceil(PART_ENDPOINTS));
    assert!(
        sent.iter()
            .all(|m| prost::Message::encoded_len(m) < 16 * 1024)
    );
    assert!(sent[..sent.len() - 1].iter().all(|m| m.continued));
    assert!(!sent[sent.len() - 1].continued);
    // A small state is one message, unchanged.
    let small = roster(
        (0..3).map(|i| endpoint(i, 1, true)).collect(),
        Algorithm::RoundRobin,
    );
    assert_eq!(parts(&full(3, &small)), vec![full(3, &small)]);
}

#[test]
fn a_delta_on_the_wrong_base_is_refused_and_forgets_the_pool() {
    let mut asm = Assembler::new();
    let one = roster(vec![endpoint(1, 1, true)], Algorithm::RoundRobin);
    let two = roster(
        vec![endpoint(1, 1, true), endpoint(2, 1, true)],
        Algorithm::RoundRobin,
    );
    receive(&mut asm, messages(None, 5, &one));
    let change = diff(&one, &two);
    let stale = delta_message(&pool(), 7, 4, &change, &two, &[])
        .unwrap()
        .unwrap();
    let err = asm.accept(stale).unwrap_err();
    assert!(
        matches!(err, DeltaError::WrongBase { base: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("holds version 5"), "{err}");
    // Even the right base now fails: the stream must start over with a snapshot.
    let right = delta_message(&pool(), 6, 5, &change, &two, &[])
        .unwrap()
        .unwrap();
    assert!(matches!(
        asm.accept(right),
        Err(DeltaError::WrongBase { .. })
    ));
    // A version that does not move forward is no delta either.
    let mut asm = Assembler::new();
    receive(&mut asm, messages(None, 5, &one));
    let same = delta_message(&pool(), 5, 5, &change, &two, &[])
        .unwrap()
        .unwrap();
    assert!(matches!(
        asm.accept(same),
        Err(DeltaError::WrongBase { .. })
    ));
}

#[test]
fn removing_an_address_not_held_or_naming_a_bad_one_is_refused() {
    let one = roster(vec![endpoint(1, 1, true)], Algorithm::RoundRobin);
    let mut asm = Assembler::new();
    receive(&mut asm, messages(None, 5, &one));
    let mut delta = pb::RosterDelta {
        base_version: 5,
        removed: vec![pb::EndpointAddress {
            ip: "10.9.9.9".into(),
            port: 80,
        }],
        ..Default::default()
    };
    let message = |d: &pb::RosterDelta| pb::RosterUpdate {
        fleet: None,
        pool: Some(pool()),
        version: 6,
        state: Some(pb::roster_update::State::Delta(d.clone())),
        continued: false,
        fingerprint: Vec::new(),
    };
    assert!(matches!(
        asm.accept(message(&delta)),
        Err(DeltaError::NotHeld { .. })
    ));
    let mut asm = Assembler::new();
    receive(&mut asm, messages(None, 5, &one));
    delta.removed[0].ip = "not-an-ip".into();
    let err = asm.accept(message(&delta)).unwrap_err();
    assert!(matches!(err, DeltaError::BadAddress { .. }), "{err}");
}

#[test]
fn unavailable_passes_through_and_leaves_no_base() {
    let one = roster(vec![endpoint(1, 1, true)], Algorithm::RoundRobin);
    let mut asm = Assembler::new();
    receive(&mut asm, messages(None, 5, &one));
    let gone = pb::RosterUpdate {
        fleet: None,
        pool: Some(pool()),
        version: 6,
        state: Some(pb::roster_update::State::Unavailable(pb::Unavailable {
            reason: pb::unavailable::Reason::ServiceNotFound.into(),
            message: "no Service".into(),
        })),
        continued: false,
        fingerprint: Vec::new(),
    };
    assert_eq!(asm.accept(gone.clone()).unwrap(), Assembled::Complete(gone));
    let change = diff(&one, &one);
    let delta = delta_message(&pool(), 7, 6, &change, &one, &[])
        .unwrap()
        .unwrap();
    assert!(matches!(
        asm.accept(delta),
        Err(DeltaError::WrongBase { .. })
    ));
    // A complete roster is a base again.
    assert_eq!(receive(&mut asm, messages(None, 8, &one)), Some(one));
}

#[test]
fn a_roster_with_an_unusable_address_passes_through_for_the_receiver_to_refuse() {
    let mut bad = full(
        3,
        &roster(vec![endpoint(1, 1, true)], Algorithm::RoundRobin),
    );
    if let Some(pb::roster_update::State::Roster(r)) = &mut bad.state {
        r.endpoints[0].ip = "nope".into();
    }
    let mut asm = Assembler::new();
    assert_eq!(asm.accept(bad.clone()).unwrap(), Assembled::Complete(bad));
    assert_eq!(asm.endpoints(&pool()).count(), 0);
}

#[test]
fn what_a_stream_completed_is_held_across_streams_and_resumed_by_an_empty_delta() {
    let r = roster(
        (0..600).map(|i| endpoint(i, 1, true)).collect(),
        Algorithm::RoundRobin,
    );
    let mut asm = Assembler::new();
    receive(&mut asm, messages(None, 4, &r));
    let held = asm.held_rosters();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].version, 4);
    assert_eq!(
        held[0].fingerprint,
        fp(&r),
        "the fingerprint of the last part"
    );

    asm.new_stream();
    let resumed = resume_message(&pool(), 9, 4, &held[0].fingerprint);
    assert!(
        prost::Message::encoded_len(&resumed) < 100,
        "a resume is tiny"
    );
    let Assembled::Complete(update) = asm.accept(resumed).unwrap() else {
        panic!("an empty delta completes the held roster");
    };
    assert_eq!(update.version, 9);
    assert_eq!(update.fingerprint, held[0].fingerprint);
    let PoolState::Roster(got) = RosterUpdate::try_from(update).unwrap().state else {
        panic!("a roster");
    };
    assert_eq!(got, r);

    // Half a state in parts is no base: a new stream forgets it.
    let mut asm = Assembler::new();
    let sent = messages(None, 4, &r);
    assert_eq!(asm.accept(sent[0].clone()).unwrap(), Assembled::Partial);
    asm.new_stream();
    assert!(asm.held_rosters().is_empty());
    assert!(asm.accept(resume_message(&pool(), 9, 4, &[1])).is_err());
}

#[test]
fn the_same_roster_has_the_same_fingerprint_and_any_change_another() {
    let r = roster(
        (0..5).map(|i| endpoint(i, 1, true)).collect(),
        Algorithm::RoundRobin,
    );
    assert_eq!(fp(&r), fp(&r.clone()));
    assert_eq!(fp(&r).len(), 32, "SHA-256");
    // Every field of an endpoint, the policy and the Service count.
    type Change = Box<dyn Fn(&mut Roster)>;
    let changed: Vec<(&str, Change)> = vec![
        ("weight", Box::new(|r| r.endpoints[2].weight = 2)),
        ("port", Box::new(|r| r.endpoints[2].addr.set_port(81))),
        (
            "ip",
            Box::new(|r| r.endpoints[2].addr.set_ip("10.9.9.9".parse().unwrap())),
        ),
        (
            "ipv6",
            Box::new(|r| r.endpoints[2].addr.set_ip("::a00:3".parse().unwrap())),
        ),
        (
            "pod",
            Box::new(|r| r.endpoints[2].pod = Some("web-x".into())),
        ),
        ("zone", Box::new(|r| r.endpoints[2].zone = Some("a".into()))),
        ("ready", Box::new(|r| r.endpoints[2].ready ^= true)),
        ("serving", Box::new(|r| r.endpoints[2].serving ^= true)),
        (
            "terminating",
            Box::new(|r| r.endpoints[2].terminating ^= true),
        ),
        ("one fewer", Box::new(|r| drop(r.endpoints.pop()))),
        ("service", Box::new(|r| r.service.push('x'))),
        (
            "policy",
            Box::new(|r| r.policy = roster(vec![], Algorithm::LeastRequest).policy),
        ),
    ];
    for (what, change) in changed {
        let mut other = r.clone();
        change(&mut other);
        assert_ne!(fp(&r), fp(&other), "{what}");
    }
    // Length prefixes keep neighbouring fields apart: moving text from the pod to the zone
    // is a change.
    let (mut a, mut b) = (r.clone(), r.clone());
    (a.endpoints[0].pod, a.endpoints[0].zone) = (Some("ab".into()), Some("c".into()));
    (b.endpoints[0].pod, b.endpoints[0].zone) = (Some("a".into()), Some("bc".into()));
    assert_ne!(fp(&a), fp(&b));
}
