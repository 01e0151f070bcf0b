use super::*;

fn parse(yaml: &str) -> PoolPolicy {
    serde_saphyr::from_str(yaml).expect("policy parses")
}

#[test]
fn empty_policy_takes_every_default() {
    let p = parse("{}");
    assert_eq!(p, PoolPolicy::default());
    assert_eq!(
        p.health_check.interval.get(),
        std::time::Duration::from_secs(2)
    );
    assert_eq!(p.outlier_detection.consecutive_gateway_errors, 3);
    assert_eq!(p.panic_threshold.get(), 50.0);
    assert_eq!(p.retries.attempts, 2);
    assert!(p.validate().is_ok());
}

#[test]
fn design_example_round_trips() {
    let yaml = r#"
protocol: HTTP1
loadBalancer: {algorithm: LeastRequest}
healthCheck: {type: HTTP, path: /healthz, interval: 2s, timeout: 1s, jitter: 10%,
              healthyThreshold: 2, unhealthyThreshold: 3}
outlierDetection: {consecutiveGatewayErrors: 3, consecutive5xx: 5,
                   errorRate: {threshold: 20%, window: 10s, minRequests: 20},
                   baseEjectionTime: 30s, maxEjectionTime: 5m, maxEjectionPercent: 50,
                   probation: {successes: 5, trafficShare: 5%}}
panicThreshold: 50%
slowStart: {window: 30s}
draining: {timeout: 30s}
retries: {attempts: 2, perTryTimeout: 4s, budget: {percent: 20, minPerSecond: 10},
          retryOn: [connect-failure, reset, "502", "503", "504"],
          idempotencyKeyHeader: Idempotency-Key}
timeouts: {connect: 1s, request: 12s}
"#;
    let p = parse(yaml);
    assert_eq!(p.health_check.kind, HealthCheckType::Http);
    assert_eq!(
        p.outlier_detection.max_ejection_time.get(),
        std::time::Duration::from_secs(300)
    );
    assert_eq!(
        p.retries.idempotency_key_header.as_deref(),
        Some("Idempotency-Key")
    );
    assert!(p.validate().is_ok());
    let json = serde_json::to_string(&p).unwrap();
    let back: PoolPolicy = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    assert!(json.contains("\"maxEjectionTime\":\"5m\""), "{json}");
}

#[test]
fn durations_parse_in_go_style_and_refuse_bare_numbers() {
    for (text, ms) in [
        ("500ms", 500),
        ("2s", 2000),
        ("1m30s", 90_000),
        ("1h", 3_600_000),
        ("0", 0),
    ] {
        let d: DurationString = text.parse().unwrap();
        assert_eq!(d.get().as_millis(), ms, "{text}");
    }
    for bad in ["30", "", "two seconds", "-1s"] {
        let err = bad.parse::<DurationString>().unwrap_err();
        assert!(err.contains("1m30s"), "{err}");
    }
    assert_eq!(DurationString::millis(1500).to_string(), "1500ms");
    assert_eq!(DurationString::secs(90).to_string(), "1m30s");
}

#[test]
fn every_duration_prints_as_text_that_parses_back_to_it_exactly() {
    // The fuzzer found "50ns" printed as "0us" (fuzz/corpus/policy/regression-duration-whitespace).
    for nanos in [
        1,
        50,
        999,
        1_000,
        1_500,
        500_000,
        1_000_000,
        1_000_001,
        1_500_000_000,
        90_000_000_000,
        3_600_000_000_123,
    ] {
        let d = DurationString::new(std::time::Duration::from_nanos(nanos));
        let again: DurationString = d.to_string().parse().unwrap();
        assert_eq!(again, d, "{nanos} ns printed as {d}");
    }
    // Past u64 nanoseconds (about 584 years) a single unit no longer parses back; the fuzzer
    // found "58888.88s8877776h" printed as "31960052488880ms"
    // (fuzz/corpus/policy/regression-duration-past-u64-nanos).
    for (secs, nanos) in [
        (31_960_052_488, 880_000_000),
        (18_446_744_074, 1),
        (18_446_744_074, 0),
        (u64::MAX / 2, 999_999_999),
    ] {
        let d = DurationString::new(std::time::Duration::new(secs, nanos));
        let again: DurationString = d.to_string().parse().unwrap();
        assert_eq!(again, d, "{secs} s {nanos} ns printed as {d}");
    }
}

#[test]
fn percent_accepts_suffix_or_number_and_refuses_negative() {
    assert_eq!("20%".parse::<Percent>().unwrap().get(), 20.0);
    assert_eq!(parse("panicThreshold: 30").panic_threshold.get(), 30.0);
    assert!("-5%".parse::<Percent>().is_err());
    assert!("lots".parse::<Percent>().is_err());
}

#[test]
fn unknown_field_is_refused_by_name() {
    let err = serde_saphyr::from_str::<PoolPolicy>("healthCheck: {intervall: 2s}").unwrap_err();
    assert!(err.to_string().contains("intervall"), "{err}");
}

#[test]
fn validate_reports_every_problem_with_its_field() {
    let p = parse(
        r#"
healthCheck: {type: HTTP, path: healthz, interval: 1s, timeout: 2s}
outlierDetection: {baseEjectionTime: 1m, maxEjectionTime: 30s, maxEjectionPercent: 150}
loadBalancer: {algorithm: RingHash}
retries: {attempts: 0, retryOn: [teapot]}
"#,
    );
    let errors = p.validate().unwrap_err();
    let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "healthCheck.timeout",
            "healthCheck.path",
            "outlierDetection.maxEjectionTime",
            "outlierDetection.maxEjectionPercent",
            "loadBalancer.hashHeader",
            "retries.attempts",
            "retries.retryOn[0]",
        ]
    );
    assert!(describe(&errors).contains("at most the interval (1s), got 2s"));
}

#[test]
fn status_range_parses_and_bounds() {
    assert_eq!(
        "200-299".parse::<StatusRange>().unwrap(),
        StatusRange { min: 200, max: 299 }
    );
    assert_eq!(
        "204".parse::<StatusRange>().unwrap(),
        StatusRange { min: 204, max: 204 }
    );
    assert!("300-200".parse::<StatusRange>().is_err());
    assert!("2xx".parse::<StatusRange>().is_err());
    assert!(StatusRange::default().contains(302));
    assert!(!StatusRange::default().contains(404));
}

#[test]
fn retry_on_parses_known_conditions() {
    assert_eq!("5xx".parse(), Ok(RetryOn::Any5xx));
    assert_eq!("503".parse(), Ok(RetryOn::Status(503)));
    assert!("404".parse::<RetryOn>().is_err());
}

#[test]
fn durations_longer_than_a_day_are_refused_by_field() {
    let p = parse(
        r#"
timeouts: {request: 100000000h, connect: 25h}
retries: {perTryTimeout: 5000000000000000h}
draining: {timeout: 24h}
"#,
    );
    let errors = p.validate().unwrap_err();
    let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "retries.perTryTimeout",
            "timeouts.connect",
            "timeouts.request"
        ],
        "a day is allowed, anything longer is not"
    );
    assert!(describe(&errors).contains("must be at most 24h, got 100000000h"));
}

#[test]
fn grpc_health_checks_need_an_http2_protocol() {
    let refused = parse("healthCheck: {type: GRPC}").validate().unwrap_err();
    let fields: Vec<_> = refused.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["healthCheck.type"]);
    assert!(describe(&refused).contains("need protocol GRPC"));
    for protocol in ["GRPC", "HTTP2"] {
        let p = parse(&format!(
            "protocol: {protocol}\nhealthCheck: {{type: GRPC, grpcService: shop.Checkout}}"
        ));
        assert_eq!(p.validate(), Ok(()), "{protocol}");
        assert_eq!(p.health_check.grpc_service, "shop.Checkout");
    }
}

#[test]
fn zone_aware_min_healthy_is_a_share() {
    let p = parse("loadBalancer: {zoneAware: {enabled: true, minHealthy: 150%}}");
    let errors = p.validate().unwrap_err();
    assert_eq!(errors[0].field, "loadBalancer.zoneAware.minHealthy");
    assert!(!PoolPolicy::default().load_balancer.zone_aware.enabled);
}
