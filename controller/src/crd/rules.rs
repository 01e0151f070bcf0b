//! Bounds and CEL rules that the shared policy types do not carry in their own schema:
//! upper limits, "at least one" thresholds and cross-field rules (a probe timeout within its
//! interval, a ring hash with a header). Each edit names the spec field it applies to; a test
//! checks that every edit found its field, so a renamed policy field cannot silently drop a rule.
//! The messages name the field and say what to write instead.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, ValidationRule,
};

/// One change to the schema node at a spec path.
pub(super) enum Edit {
    /// A CEL rule and its message.
    Rule(&'static str, &'static str),
    Minimum(f64),
    Maximum(f64),
    MaxLength(i64),
    Pattern(&'static str),
    MaxItems(i64),
    ItemsPattern(&'static str),
}

/// A percentage from 0% to 100%.
const PERCENT_0_100: &str = r"^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)%$";
const DURATION_MAX_LEN: i64 = 32;
const PERCENT_MAX_LEN: i64 = 16;

use Edit::*;

pub(super) const EDITS: &[(&[&str], Edit)] = &[
    (
        &["healthCheck"],
        Rule(
            "self.type == 'None' || duration(self.interval) > duration('0s')",
            "healthCheck.interval must be more than 0s",
        ),
    ),
    (
        &["healthCheck"],
        Rule(
            "self.type == 'None' || (duration(self.timeout) > duration('0s') && duration(self.timeout) <= duration(self.interval))",
            "healthCheck.timeout must be more than 0s and at most healthCheck.interval",
        ),
    ),
    (
        &["healthCheck"],
        Rule(
            "self.type != 'HTTP' || self.path.startsWith('/')",
            "healthCheck.path must start with '/' for HTTP checks",
        ),
    ),
    (&["healthCheck", "healthyThreshold"], Minimum(1.0)),
    (&["healthCheck", "healthyThreshold"], Maximum(100.0)),
    (&["healthCheck", "unhealthyThreshold"], Minimum(1.0)),
    (&["healthCheck", "unhealthyThreshold"], Maximum(100.0)),
    (&["healthCheck", "checkers"], Minimum(0.0)),
    (
        &["healthCheck", "checkers"],
        Maximum(rollcall_api::policy::MAX_CHECKERS as f64),
    ),
    (&["healthCheck", "jitter"], MaxLength(PERCENT_MAX_LEN)),
    (&["healthCheck", "jitter"], Pattern(PERCENT_0_100)),
    (&["healthCheck", "path"], MaxLength(1024)),
    (&["healthCheck", "interval"], MaxLength(DURATION_MAX_LEN)),
    (&["healthCheck", "timeout"], MaxLength(DURATION_MAX_LEN)),
    (
        &["outlierDetection"],
        Rule(
            "duration(self.baseEjectionTime) > duration('0s')",
            "outlierDetection.baseEjectionTime must be more than 0s",
        ),
    ),
    (
        &["outlierDetection"],
        Rule(
            "duration(self.maxEjectionTime) >= duration(self.baseEjectionTime)",
            "outlierDetection.maxEjectionTime must be at least outlierDetection.baseEjectionTime",
        ),
    ),
    (
        &["outlierDetection", "baseEjectionTime"],
        MaxLength(DURATION_MAX_LEN),
    ),
    (
        &["outlierDetection", "maxEjectionTime"],
        MaxLength(DURATION_MAX_LEN),
    ),
    (&["outlierDetection", "maxEjectionPercent"], Maximum(100.0)),
    (
        &["outlierDetection", "errorRate"],
        Rule(
            "self.threshold.matches('^0+(\\\\.0+)?%$') || duration(self.window) > duration('0s')",
            "outlierDetection.errorRate.window must be more than 0s when a threshold is set",
        ),
    ),
    (
        &["outlierDetection", "errorRate", "threshold"],
        MaxLength(PERCENT_MAX_LEN),
    ),
    (
        &["outlierDetection", "errorRate", "threshold"],
        Pattern(PERCENT_0_100),
    ),
    (
        &["outlierDetection", "errorRate", "window"],
        MaxLength(DURATION_MAX_LEN),
    ),
    (
        &["outlierDetection", "probation", "successes"],
        Minimum(1.0),
    ),
    (
        &["outlierDetection", "probation", "successes"],
        Maximum(1000.0),
    ),
    (
        &["outlierDetection", "probation", "trafficShare"],
        MaxLength(PERCENT_MAX_LEN),
    ),
    (
        &["outlierDetection", "probation", "trafficShare"],
        Pattern(PERCENT_0_100),
    ),
    (
        &["outlierDetection", "probation"],
        Rule(
            "!self.trafficShare.matches('^0+(\\\\.0+)?%$')",
            "outlierDetection.probation.trafficShare must be more than 0%",
        ),
    ),
    (&["panicThreshold"], MaxLength(PERCENT_MAX_LEN)),
    (&["panicThreshold"], Pattern(PERCENT_0_100)),
    (
        &["loadBalancer"],
        Rule(
            "self.algorithm != 'RingHash' || (has(self.hashHeader) && self.hashHeader != '')",
            "loadBalancer.hashHeader is required when the algorithm is RingHash",
        ),
    ),
    (&["loadBalancer", "hashHeader"], MaxLength(256)),
    (&["loadBalancer", "maxShareMultiple"], Minimum(1.0)),
    (&["slowStart", "window"], MaxLength(DURATION_MAX_LEN)),
    (&["draining", "timeout"], MaxLength(DURATION_MAX_LEN)),
    (&["retries", "attempts"], Minimum(1.0)),
    (&["retries", "attempts"], Maximum(10.0)),
    (
        &["retries", "perTryTimeout"],
        Rule(
            "duration(self) > duration('0s')",
            "retries.perTryTimeout must be more than 0s",
        ),
    ),
    (&["retries", "perTryTimeout"], MaxLength(DURATION_MAX_LEN)),
    (&["retries", "budget", "percent"], Maximum(100.0)),
    (&["retries", "retryOn"], MaxItems(16)),
    (
        &["retries", "retryOn"],
        ItemsPattern("^(connect-failure|reset|5xx|5[0-9][0-9])$"),
    ),
    (&["retries", "idempotencyKeyHeader"], MaxLength(256)),
    (
        &["timeouts", "connect"],
        Rule(
            "duration(self) > duration('0s')",
            "timeouts.connect must be more than 0s",
        ),
    ),
    (&["timeouts", "connect"], MaxLength(DURATION_MAX_LEN)),
    (
        &["timeouts", "request"],
        Rule(
            "duration(self) > duration('0s')",
            "timeouts.request must be more than 0s",
        ),
    ),
    (&["timeouts", "request"], MaxLength(DURATION_MAX_LEN)),
];

/// Apply every edit to the spec schema; returns how many found their field.
pub(super) fn apply(crd: &mut CustomResourceDefinition) -> usize {
    let mut applied = 0;
    for version in &mut crd.spec.versions {
        let Some(spec) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|root| property(root, "spec"))
        else {
            continue;
        };
        for (path, edit) in EDITS {
            let Some(node) = path.iter().try_fold(&mut *spec, |n, p| property(n, p)) else {
                continue;
            };
            applied += 1;
            match edit {
                Rule(rule, message) => node
                    .x_kubernetes_validations
                    .get_or_insert_with(Vec::new)
                    .push(ValidationRule {
                        rule: (*rule).into(),
                        message: Some((*message).into()),
                        ..Default::default()
                    }),
                Minimum(v) => node.minimum = Some(*v),
                Maximum(v) => node.maximum = Some(*v),
                MaxLength(v) => node.max_length = Some(*v),
                Pattern(p) => node.pattern = Some((*p).into()),
                MaxItems(v) => node.max_items = Some(*v),
                ItemsPattern(p) => match &mut node.items {
                    Some(JSONSchemaPropsOrArray::Schema(items)) => {
                        items.pattern = Some((*p).into());
                        items.max_length = Some(16);
                    }
                    _ => applied -= 1,
                },
            }
        }
    }
    applied
}

fn property<'a>(node: &'a mut JSONSchemaProps, name: &str) -> Option<&'a mut JSONSchemaProps> {
    node.properties.as_mut()?.get_mut(name)
}
