//! Reading a policy that came over the wire from the controller. The roster file and the CRD
//! refuse unknown fields (a typo must not silently become a default), but a controller newer than
//! the sidecar may send fields this sidecar does not know yet. Refusing those would leave every
//! older sidecar on a stale roster for the length of a rolling upgrade, so here they are dropped,
//! named by their path, and the rest of the policy is used, as an older controller would have
//! sent it.

use serde_json::Value;

use super::PoolPolicy;

/// How many distinct unknown fields are dropped before giving up.
const MAX_UNKNOWN: usize = 32;

/// Parse `json`, dropping fields this version does not know. Returns the policy and the paths
/// of the dropped fields (`healthCheck.http3Probe`). Any other error (wrong type, bad duration)
/// is an error.
pub fn from_json_lenient(json: &str) -> Result<(PoolPolicy, Vec<String>), serde_json::Error> {
    let mut value: Value = serde_json::from_str(json)?;
    let mut dropped = Vec::new();
    loop {
        match serde_path_to_error::deserialize::<_, PoolPolicy>(&value) {
            Ok(policy) => return Ok((policy, dropped)),
            Err(error) => {
                let path: Vec<String> = error
                    .path()
                    .iter()
                    .map(|segment| segment.to_string())
                    .collect();
                let error = error.into_inner();
                // Only the field serde names, at the place it stands: the same name elsewhere
                // in the policy may be a field this version knows.
                let unknown_here = unknown_field(&error.to_string())
                    .is_some_and(|name| path.last() == Some(&name));
                let dotted = path.join(".");
                if !unknown_here
                    || dropped.len() >= MAX_UNKNOWN
                    || dropped.contains(&dotted)
                    || !remove_at(&mut value, &path)
                {
                    return Err(error);
                }
                dropped.push(dotted);
            }
        }
    }
}

/// The field named by serde's "unknown field `x`, expected ..." message.
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(name, _)| name.to_string())
}

/// Remove the field at `path` (object keys from the top); whether there was one.
fn remove_at(value: &mut Value, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut current = value;
    for key in parents {
        match current.get_mut(key.as_str()) {
            Some(next) => current = next,
            None => return false,
        }
    }
    current
        .as_object_mut()
        .is_some_and(|map| map.remove(last.as_str()).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_from_a_newer_controller_are_dropped_and_named() {
        let json = r#"{"healthCheck": {"interval": "5s", "http3Probe": "x"},
                       "outlierDetection": {"baseEjectionTime": "10s", "quantumEjection": true},
                       "futurePolicy": {"a": 1}}"#;
        let (policy, dropped) = from_json_lenient(json).unwrap();
        assert_eq!(policy.health_check.interval.to_string(), "5s");
        assert_eq!(
            policy.outlier_detection.base_ejection_time.to_string(),
            "10s"
        );
        let mut dropped = dropped;
        dropped.sort();
        assert_eq!(
            dropped,
            [
                "futurePolicy",
                "healthCheck.http3Probe",
                "outlierDetection.quantumEjection"
            ]
        );
    }

    #[test]
    fn an_unknown_field_is_dropped_only_where_it_stands() {
        // `zoneAware` is known in loadBalancer; a newer controller's `outlierDetection.zoneAware`
        // must not take the real one with it.
        let json = r#"{"loadBalancer": {"zoneAware": {"enabled": true}},
                       "outlierDetection": {"zoneAware": true}}"#;
        let (policy, dropped) = from_json_lenient(json).unwrap();
        assert!(policy.load_balancer.zone_aware.enabled);
        assert_eq!(dropped, ["outlierDetection.zoneAware"]);
    }

    #[test]
    fn known_fields_with_bad_values_are_still_errors() {
        assert!(from_json_lenient(r#"{"healthCheck": {"interval": "soon"}}"#).is_err());
        assert!(from_json_lenient(r#"{"retries": {"attempts": "two"}}"#).is_err());
        assert!(from_json_lenient("not json").is_err());
    }

    #[test]
    fn a_clean_policy_drops_nothing() {
        let (policy, dropped) = from_json_lenient(r#"{"panicThreshold": "30%"}"#).unwrap();
        assert_eq!(policy.panic_threshold.get(), 30.0);
        assert!(dropped.is_empty());
    }
}
