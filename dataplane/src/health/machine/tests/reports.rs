//! Reports, names on the wire, and the mapping from the pool policy.

use std::time::SystemTime;

use rollcall_api::policy::{HealthCheckType, PoolPolicy};

use super::super::{Summary, wall_clock};
use super::*;

#[test]
fn report_tracks_counts_times_and_last_error() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.advance(5 * SEC);
    fx.probe(1, true);
    fx.pool
        .record_probe(addr(1), false, "connect: connection refused", fx.now);
    fx.requests(1, Verdict::ServerError, 2);
    fx.requests(1, Verdict::GatewayError, 1);
    fx.advance(2 * SEC);
    let r = fx.report(1);
    assert_eq!(r.state, State::Healthy);
    assert_eq!(r.reason, Reason::ProbeSucceeded);
    assert_eq!(r.seconds_in_state, 7);
    assert_eq!((r.probe_successes_total, r.probe_failures_total), (2, 1));
    assert_eq!(r.consecutive_probe_failures, 1);
    assert_eq!((r.consecutive_5xx, r.consecutive_gateway_errors), (3, 1));
    assert_eq!((r.window_requests, r.window_failures), (3, 3));
    assert_eq!(r.last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(r.seconds_since_last_error, Some(2));
    assert_eq!(r.ejection_remaining_seconds, None);
}

#[test]
fn report_counts_ejections_now_and_over_a_lifetime() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.advance(10 * SEC);
    let r = fx.report(1);
    assert_eq!(r.ejection_remaining_seconds, Some(20));
    assert_eq!(r.seconds_in_state, 10);
    assert_eq!((r.ejection_multiplier, r.ejections_total), (1, 1));
    assert_eq!(r.last_error.as_deref(), Some("probe failed"));
}

#[test]
fn report_serializes_to_camel_case_json_with_pascal_case_names() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.requests(1, Verdict::ConnectionFailure, 3);
    let json = serde_json::to_value(fx.report(1)).expect("serializes");
    assert_eq!(json["address"], "10.0.0.1:8080");
    assert_eq!(json["state"], "Ejected");
    assert_eq!(json["reason"], "ConsecutiveGatewayErrors");
    assert_eq!(json["ejectionRemainingSeconds"], 30);
    assert_eq!(json["ejectionSuppressed"], false);
    assert!(json.get("since").is_none(), "an Instant has no wire form");
    let routes = serde_json::to_value(fx.pool.routes(fx.now)).expect("serializes");
    assert_eq!(routes["endpoints"][0]["class"], "Normal");
}

#[test]
fn error_details_are_kept_printable_and_short() {
    let mut fx = Fx::healthy(settings(), 4);
    let long = format!("bad\r\nthing {}", "x".repeat(1000));
    fx.pool.record_probe(addr(1), false, &long, fx.now);
    let detail = fx.report(1).last_error.expect("kept");
    assert!(detail.starts_with("bad  thing x"), "{detail}");
    assert_eq!(detail.chars().count(), 200);
    assert!(!detail.chars().any(char::is_control));
}

#[test]
fn since_converts_to_wall_clock_time() {
    let mut fx = Fx::healthy(settings(), 1);
    let start = fx.now;
    fx.advance(90 * SEC);
    let wall_now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let r = fx.report(1);
    assert_eq!(r.since, start);
    assert_eq!(r.since_wall_clock(fx.now, wall_now), wall_now - 90 * SEC);
    assert_eq!(wall_clock(fx.now + SEC, fx.now, wall_now), wall_now + SEC);
}

#[test]
fn states_and_reasons_display_and_serialize_as_pascal_case() {
    for s in [
        State::Unknown,
        State::Healthy,
        State::Ejected,
        State::Probation,
        State::Draining,
    ] {
        let json = serde_json::to_value(s).expect("serializes");
        assert_eq!(json, s.to_string());
        assert_eq!(format!("{s:?}"), s.to_string());
    }
    let reasons = [
        Reason::New,
        Reason::ProbeSucceeded,
        Reason::RequestSucceeded,
        Reason::ProbeFailures,
        Reason::ConsecutiveGatewayErrors,
        Reason::Consecutive5xx,
        Reason::ErrorRate,
        Reason::ProbationFailed,
        Reason::ProbationPassed,
        Reason::EjectionExpired,
        Reason::Terminating,
        Reason::RemovedFromRoster,
        Reason::BackInRoster,
    ];
    for r in reasons {
        let name = r.to_string();
        assert_eq!(serde_json::to_value(r).expect("serializes"), name);
        assert_eq!(format!("{r:?}"), name);
        assert!(name.starts_with(|c: char| c.is_ascii_uppercase()) && !name.contains('_'));
    }
}

#[test]
fn settings_come_from_the_pool_policy() {
    let s = HealthSettings::from_policy(&PoolPolicy::default());
    assert_eq!(s, HealthSettings::default());
    assert!(s.probes_enabled);
    assert_eq!((s.healthy_threshold, s.unhealthy_threshold), (2, 3));
    assert_eq!((s.consecutive_gateway_errors, s.consecutive_5xx), (3, 5));
    assert!(close(s.error_rate_threshold, 0.2));
    assert_eq!(s.error_rate_window, Duration::from_secs(10));
    assert_eq!(s.error_rate_min_requests, 20);
    assert_eq!(
        (s.base_ejection, s.max_ejection),
        (BASE, Duration::from_secs(300))
    );
    assert_eq!((s.max_ejection_percent, s.probation_successes), (50, 5));
    assert!(close(s.panic_threshold, 0.5));
    assert_eq!(s.slow_start_window, Duration::from_secs(30));
    let mut passive = PoolPolicy::default();
    passive.health_check.kind = HealthCheckType::None;
    assert!(!HealthSettings::from_policy(&passive).probes_enabled);
}

#[test]
fn ejection_time_and_budget_arithmetic() {
    let s = settings();
    let secs: Vec<u64> = (1..=12).map(|n| s.ejection_time(n).as_secs()).collect();
    assert_eq!(
        secs,
        [30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300]
    );
    assert_eq!(s.ejection_time(u32::MAX).as_secs(), 300);
    assert_eq!([1, 2, 3, 4, 10].map(|t| s.max_out(t)), [1, 1, 1, 2, 5]);
}

#[test]
fn summary_counts_endpoints_per_state() {
    let mut fx = Fx::healthy(settings(), 4);
    fx.eject(1);
    fx.upsert(2, true);
    fx.upsert(5, false);
    let want = Summary {
        total: 5,
        unknown: 1,
        healthy: 2,
        ejected: 1,
        probation: 0,
        draining: 1,
    };
    assert_eq!(fx.pool.summary(), want);
}
