//! What the deserializer cannot check: ranges and cross-field rules (a probe timeout longer
//! than its interval, RingHash without a header, an unknown `retryOn` entry). Every problem is
//! reported, not only the first, each with the field's path and what to write instead, so one
//! edit fixes a refused file or resource. The CRD's CEL rules say the same at admission.

use std::str::FromStr;
use std::time::Duration;

use super::{Algorithm, DurationString, HealthCheckType, PoolPolicy, Protocol};

/// Longest duration any field accepts. Every timer of the sidecar adds a duration to the clock;
/// a day is longer than any timeout, ejection or drain anyone means, and far from overflowing
/// it, so bounding here means no caller has to guard the arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// One thing wrong with a policy: the field's path and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyError {
    pub field: String,
    pub message: String,
}

impl PoolPolicy {
    /// Cross-field and range checks the deserializer cannot make. Returns every problem, not
    /// only the first, so one edit fixes them all.
    pub fn validate(&self) -> Result<(), Vec<PolicyError>> {
        let mut errors = Vec::new();
        let mut check = |ok: bool, field: &str, message: String| {
            if !ok {
                errors.push(PolicyError {
                    field: field.into(),
                    message,
                });
            }
        };
        let hc = &self.health_check;
        let od = &self.outlier_detection;
        let durations: [(&str, DurationString); 10] = [
            ("healthCheck.interval", hc.interval),
            ("healthCheck.timeout", hc.timeout),
            ("outlierDetection.errorRate.window", od.error_rate.window),
            ("outlierDetection.baseEjectionTime", od.base_ejection_time),
            ("outlierDetection.maxEjectionTime", od.max_ejection_time),
            ("slowStart.window", self.slow_start.window),
            ("draining.timeout", self.draining.timeout),
            ("retries.perTryTimeout", self.retries.per_try_timeout),
            ("timeouts.connect", self.timeouts.connect),
            ("timeouts.request", self.timeouts.request),
        ];
        for (field, duration) in durations {
            check(
                duration.get() <= MAX_DURATION,
                field,
                format!(
                    "must be at most {}, got {duration}",
                    DurationString::new(MAX_DURATION)
                ),
            );
        }
        if hc.kind != HealthCheckType::None {
            check(
                !hc.interval.is_zero(),
                "healthCheck.interval",
                "must be more than 0s".into(),
            );
            check(
                !hc.timeout.is_zero() && hc.timeout.get() <= hc.interval.get(),
                "healthCheck.timeout",
                format!(
                    "must be more than 0s and at most the interval ({}), got {}",
                    hc.interval, hc.timeout
                ),
            );
            check(
                hc.healthy_threshold >= 1,
                "healthCheck.healthyThreshold",
                "must be at least 1".into(),
            );
            check(
                hc.unhealthy_threshold >= 1,
                "healthCheck.unhealthyThreshold",
                "must be at least 1".into(),
            );
            check(
                hc.checkers <= super::MAX_CHECKERS,
                "healthCheck.checkers",
                format!(
                    "must be at most {}, got {}",
                    super::MAX_CHECKERS,
                    hc.checkers
                ),
            );
            check(
                hc.jitter.get() <= 100.0,
                "healthCheck.jitter",
                format!("must be at most 100%, got {}", hc.jitter),
            );
        }
        if hc.kind == HealthCheckType::Http {
            check(
                hc.path.starts_with('/'),
                "healthCheck.path",
                format!("must start with '/', got {:?}", hc.path),
            );
        }
        if hc.kind == HealthCheckType::Grpc {
            check(
                matches!(self.protocol, Protocol::Grpc | Protocol::Http2),
                "healthCheck.type",
                "GRPC checks need protocol GRPC (or HTTP2): the health service speaks HTTP/2"
                    .into(),
            );
        }
        check(
            !od.base_ejection_time.is_zero(),
            "outlierDetection.baseEjectionTime",
            "must be more than 0s".into(),
        );
        check(
            od.max_ejection_time.get() >= od.base_ejection_time.get(),
            "outlierDetection.maxEjectionTime",
            format!(
                "must be at least baseEjectionTime ({}), got {}",
                od.base_ejection_time, od.max_ejection_time
            ),
        );
        check(
            od.max_ejection_percent <= 100,
            "outlierDetection.maxEjectionPercent",
            format!("must be 0-100, got {}", od.max_ejection_percent),
        );
        check(
            od.error_rate.threshold.get() <= 100.0,
            "outlierDetection.errorRate.threshold",
            format!("must be at most 100%, got {}", od.error_rate.threshold),
        );
        check(
            od.error_rate.threshold.get() == 0.0 || !od.error_rate.window.is_zero(),
            "outlierDetection.errorRate.window",
            "must be more than 0s when a threshold is set".into(),
        );
        check(
            od.probation.successes >= 1,
            "outlierDetection.probation.successes",
            "must be at least 1".into(),
        );
        check(
            od.probation.traffic_share.get() > 0.0 && od.probation.traffic_share.get() <= 100.0,
            "outlierDetection.probation.trafficShare",
            format!(
                "must be more than 0% and at most 100%, got {}",
                od.probation.traffic_share
            ),
        );
        check(
            self.panic_threshold.get() <= 100.0,
            "panicThreshold",
            format!("must be at most 100%, got {}", self.panic_threshold),
        );
        let lb = &self.load_balancer;
        check(
            lb.algorithm != Algorithm::RingHash
                || lb.hash_header.as_deref().is_some_and(|h| !h.is_empty()),
            "loadBalancer.hashHeader",
            "is required when the algorithm is RingHash".into(),
        );
        check(
            lb.max_share_multiple >= 1.0,
            "loadBalancer.maxShareMultiple",
            format!("must be at least 1, got {}", lb.max_share_multiple),
        );
        check(
            lb.zone_aware.min_healthy.get() <= 100.0,
            "loadBalancer.zoneAware.minHealthy",
            format!("must be at most 100%, got {}", lb.zone_aware.min_healthy),
        );
        let rt = &self.retries;
        check(
            (1..=10).contains(&rt.attempts),
            "retries.attempts",
            format!("must be 1-10, got {}", rt.attempts),
        );
        check(
            !rt.per_try_timeout.is_zero(),
            "retries.perTryTimeout",
            "must be more than 0s".into(),
        );
        check(
            rt.budget.percent <= 100,
            "retries.budget.percent",
            format!("must be 0-100, got {}", rt.budget.percent),
        );
        for (i, cond) in rt.retry_on.iter().enumerate() {
            check(
                RetryOn::from_str(cond).is_ok(),
                &format!("retries.retryOn[{i}]"),
                format!(
                    "unknown condition {cond:?}; use connect-failure, reset, 5xx or a status 500-599"
                ),
            );
        }
        check(
            !self.timeouts.connect.is_zero(),
            "timeouts.connect",
            "must be more than 0s".into(),
        );
        check(
            !self.timeouts.request.is_zero(),
            "timeouts.request",
            "must be more than 0s".into(),
        );
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// One parsed `retries.retryOn` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryOn {
    ConnectFailure,
    Reset,
    Any5xx,
    Status(u16),
}

impl FromStr for RetryOn {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "connect-failure" => Ok(Self::ConnectFailure),
            "reset" => Ok(Self::Reset),
            "5xx" => Ok(Self::Any5xx),
            other => match other.parse::<u16>() {
                Ok(code) if (500..=599).contains(&code) => Ok(Self::Status(code)),
                _ => Err(()),
            },
        }
    }
}

/// Render a list of problems as one message, one per line.
pub fn describe(errors: &[PolicyError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}
