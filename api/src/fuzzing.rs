//! Entry points for the fuzz targets (`fuzz/`, cargo-fuzz on nightly) and for the corpus
//! replay test that runs every committed input on stable. Each takes arbitrary bytes, must
//! never panic, checks what must hold of whatever it accepts: an inbound message that
//! passes the edge converts back to a message that passes again to the same value; a policy
//! that parses and validates survives a round trip through its own JSON. Each returns whether
//! the input got past parsing to those checks, so a seed that stopped parsing is noticed.

use prost::Message;

use crate::policy::PoolPolicy;
use crate::proto::v1 as pb;
use crate::roster::{HealthReport, WatchRequest};

/// A `PoolPolicy` as the roster carries it (JSON) and as a sidecar file or the CRD gives it
/// (YAML is a superset handled by the same serde types): parse, validate, round-trip.
pub fn policy(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(policy) = serde_json::from_str::<PoolPolicy>(text) else {
        return false;
    };
    let valid = policy.validate().is_ok();
    let json = serde_json::to_string(&policy).expect("a parsed policy serializes");
    let again: PoolPolicy = serde_json::from_str(&json).expect("a policy's own JSON parses");
    assert_eq!(
        again, policy,
        "the JSON round trip changed the policy: {json}"
    );
    assert_eq!(
        again.validate().is_ok(),
        valid,
        "validation depends on more than the value"
    );
    true
}

/// What a caller sends the controller (`WatchRequest`, `HealthReport`), decoded as protobuf and
/// passed through the edge: the first byte picks the message.
pub fn inbound(data: &[u8]) -> bool {
    let Some((&kind, bytes)) = data.split_first() else {
        return false;
    };
    match kind % 2 {
        0 => {
            let Ok(wire) = pb::WatchRequest::decode(bytes) else {
                return false;
            };
            let Ok(request) = WatchRequest::try_from(wire) else {
                return false;
            };
            let back = pb::WatchRequest::from(&request);
            let again = WatchRequest::try_from(back).expect("an accepted request converts back");
            assert_eq!(again, request);
        }
        _ => {
            let Ok(wire) = pb::HealthReport::decode(bytes) else {
                return false;
            };
            let Ok(report) = HealthReport::try_from(wire) else {
                return false;
            };
            let back = pb::HealthReport::from(&report);
            let again = HealthReport::try_from(back).expect("an accepted report converts back");
            assert_eq!(again, report);
        }
    }
    true
}
