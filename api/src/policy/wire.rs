//! Reading a policy that came over the wire from the controller. The roster file and the CRD
//! refuse unknown fields (a typo must not silently become a default), but a controller newer than
//! the sidecar may send fields this sidecar does not know yet. Refusing those would leave every
//! older sidecar on a stale roster for the length of a rolling upgrade, so here they are dropped,
//! named, and the rest of the policy is used, as an older controller would have sent it.

use serde_json::Value;

use super::PoolPolicy;

/// How many distinct unknown fields are dropped before giving up.
const MAX_UNKNOWN: usize = 32;

/// Parse `json`, dropping fields this version does not know. Returns the policy and the names
/// of the dropped fields. Any other error (wrong type, bad duration) is an error.
pub fn from_json_lenient(json: &str) -> Result<(PoolPolicy, Vec<String>), serde_json::Error> {
    let mut value: Value = serde_json::from_str(json)?;
    let mut dropped = Vec::new();
    loop {
        match serde_json::from_value::<PoolPolicy>(value.clone()) {
            Ok(policy) => return Ok((policy, dropped)),
            Err(error) => {
                let Some(name) = unknown_field(&error.to_string()) else {
                    return Err(error);
                };
                if dropped.len() >= MAX_UNKNOWN || dropped.contains(&name) {
                    return Err(error);
                }
                remove_key(&mut value, &name);
                dropped.push(name);
            }
        }
    }
}

/// The field named by serde's "unknown field `x`, expected ..." message.
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(name, _)| name.to_string())
}

/// Remove `key` from every object in `value`. Known field names are not reused across the
/// policy's structs for unrelated meanings, so an unknown name is unknown wherever it stands.
fn remove_key(value: &mut Value, key: &str) {
    match value {
        Value::Object(map) => {
            map.remove(key);
            for v in map.values_mut() {
                remove_key(v, key);
            }
        }
        Value::Array(items) => {
            for v in items {
                remove_key(v, key);
            }
        }
        _ => {}
    }
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
        assert_eq!(dropped, ["futurePolicy", "http3Probe", "quantumEjection"]);
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
