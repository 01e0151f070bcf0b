use super::*;
use crate::policy::Algorithm;

fn endpoint(addr: &str) -> Endpoint {
    Endpoint {
        pod: Some("web-1".into()),
        ..Endpoint::serving(addr.parse().unwrap())
    }
}

fn update() -> RosterUpdate {
    let mut policy = PoolPolicy::default();
    policy.load_balancer.algorithm = Algorithm::RoundRobin;
    RosterUpdate {
        pool: PoolRef::new("shop", "checkout"),
        version: 7,
        state: PoolState::Roster(Roster {
            endpoints: vec![endpoint("10.0.0.1:8080"), endpoint("[fd00::1]:8080")],
            policy,
            service: "shop/checkout:http".into(),
        }),
    }
}

#[test]
fn roster_update_round_trips_through_protobuf() {
    let u = update();
    let wire = pb::RosterUpdate::try_from(&u).unwrap();
    assert_eq!(wire.endpoints_len(), 2);
    assert_eq!(RosterUpdate::try_from(wire).unwrap(), u);
}

#[test]
fn policy_travels_as_json_with_its_defaults() {
    let wire = pb::RosterUpdate::try_from(&update()).unwrap();
    let Some(pb::roster_update::State::Roster(r)) = wire.state else {
        panic!("not a roster")
    };
    let v: serde_json::Value = serde_json::from_str(&r.policy_json).unwrap();
    assert_eq!(v["loadBalancer"]["algorithm"], "RoundRobin");
    assert_eq!(v["panicThreshold"], "50%");
}

#[test]
fn empty_policy_json_means_defaults() {
    let r = Roster::try_from(pb::PoolRoster::default()).unwrap();
    assert_eq!(r.policy, PoolPolicy::default());
}

#[test]
fn policy_fields_from_a_newer_controller_do_not_refuse_the_roster() {
    let r = Roster::try_from(pb::PoolRoster {
        policy_json: r#"{"panicThreshold": "30%", "healthCheck": {"grpcService": "x"}}"#.into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(r.policy.panic_threshold.get(), 30.0);
}

#[test]
fn unavailable_round_trips_and_unknown_reason_reads_as_other() {
    let u = RosterUpdate {
        pool: PoolRef::new("shop", "gone"),
        version: 3,
        state: PoolState::Unavailable {
            reason: UnavailableReason::PortNotFound,
            message: "no port named http".into(),
        },
    };
    let mut wire = pb::RosterUpdate::try_from(&u).unwrap();
    assert_eq!(RosterUpdate::try_from(wire.clone()).unwrap(), u);
    if let Some(pb::roster_update::State::Unavailable(un)) = &mut wire.state {
        un.reason = 99;
    }
    let back = RosterUpdate::try_from(wire).unwrap();
    assert!(matches!(
        back.state,
        PoolState::Unavailable {
            reason: UnavailableReason::Other,
            ..
        }
    ));
}

#[test]
fn malformed_inbound_values_are_refused() {
    let bad_ip = pb::Endpoint {
        ip: "10.0.0.300".into(),
        port: 80,
        ..Default::default()
    };
    assert!(matches!(
        Endpoint::try_from(bad_ip),
        Err(EdgeError::InvalidAddress(_))
    ));
    let bad_port = pb::Endpoint {
        ip: "10.0.0.3".into(),
        port: 70000,
        ..Default::default()
    };
    assert!(matches!(
        Endpoint::try_from(bad_port),
        Err(EdgeError::InvalidPort(70000))
    ));
    let bad_ref = pb::PoolRef {
        namespace: "Shop".into(),
        name: "x".into(),
    };
    assert!(matches!(
        PoolRef::try_from(bad_ref),
        Err(EdgeError::InvalidPoolRef(_))
    ));
    let bad_policy = pb::PoolRoster {
        policy_json: r#"{"panicThreshold": "lots"}"#.into(),
        ..Default::default()
    };
    assert!(matches!(
        Roster::try_from(bad_policy),
        Err(EdgeError::InvalidPolicy(_))
    ));
    let no_state = pb::RosterUpdate {
        pool: Some((&PoolRef::new("a", "b")).into()),
        ..Default::default()
    };
    assert!(matches!(
        RosterUpdate::try_from(no_state),
        Err(EdgeError::MissingField("state"))
    ));
}

#[test]
fn weight_zero_reads_as_one_and_duplicates_collapse() {
    let e = pb::Endpoint {
        ip: "10.0.0.1".into(),
        port: 80,
        weight: 0,
        ..Default::default()
    };
    let r = Roster::try_from(pb::PoolRoster {
        endpoints: vec![e.clone(), e],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(r.endpoints.len(), 1);
    assert_eq!(r.endpoints[0].weight, 1);
}

#[test]
fn health_report_round_trips_and_unset_state_is_unknown() {
    let report = HealthReport {
        sidecar: Some(SidecarId {
            namespace: "shop".into(),
            pod: "front-1".into(),
            instance: "a1".into(),
        }),
        pools: vec![PoolHealth {
            pool: PoolRef::new("shop", "checkout"),
            roster_version: 7,
            panic: true,
            endpoints: vec![EndpointHealth {
                probe: None,
                addr: "[fd00::1]:8080".parse().unwrap(),
                state: EndpointState::Ejected,
                reason: "ConsecutiveGatewayErrors".into(),
                since_unix_ms: 1_700_000_000_000,
                times_ejected: 2,
                last_error: Some("connection refused".into()),
                ejection_suppressed: false,
            }],
            refused: Some(Refusal {
                version: 9,
                reason: "policy.healthCheck.timeout: must be below interval".into(),
            }),
            complete: false,
            continued: false,
            removed: Vec::new(),
        }],
    };
    let mut wire = pb::HealthReport::from(&report);
    assert_eq!(HealthReport::try_from(wire.clone()).unwrap(), report);
    wire.pools[0].endpoints[0].state = 0;
    let back = HealthReport::try_from(wire.clone()).unwrap();
    assert_eq!(back.pools[0].endpoints[0].state, EndpointState::Unknown);
    // A refusal of a version not newer than the one it runs is no news: it is dropped.
    wire.pools[0].refused_version = 7;
    let back = HealthReport::try_from(wire.clone()).unwrap();
    assert_eq!(back.pools[0].refused, None);
    // An older sidecar sends neither field.
    wire.pools[0].refused_version = 0;
    wire.pools[0].refused_reason.clear();
    assert_eq!(HealthReport::try_from(wire).unwrap().pools[0].refused, None);
}

#[test]
fn heartbeat_is_a_report_without_pools() {
    let hb = HealthReport::try_from(pb::HealthReport::default()).unwrap();
    assert!(hb.pools.is_empty() && hb.sidecar.is_none());
}

#[test]
fn pool_ref_parses_namespace_slash_name() {
    assert_eq!(
        "shop/checkout".parse::<PoolRef>().unwrap(),
        PoolRef::new("shop", "checkout")
    );
    assert!("checkout".parse::<PoolRef>().is_err());
    assert!("shop/Checkout".parse::<PoolRef>().is_err());
}

trait EndpointsLen {
    fn endpoints_len(&self) -> usize;
}

impl EndpointsLen for pb::RosterUpdate {
    fn endpoints_len(&self) -> usize {
        match &self.state {
            Some(pb::roster_update::State::Roster(r)) => r.endpoints.len(),
            _ => 0,
        }
    }
}
