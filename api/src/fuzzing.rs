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
        0 => edge_round_trip::<pb::WatchRequest, WatchRequest>(bytes),
        _ => edge_round_trip::<pb::HealthReport, HealthReport>(bytes),
    }
}

/// Decode `bytes` as the wire message `W` and pass it through the edge into `T`; what the edge
/// accepts must convert back to a message the edge accepts again as the same value.
fn edge_round_trip<W, T>(bytes: &[u8]) -> bool
where
    W: Message + Default + for<'a> From<&'a T>,
    T: TryFrom<W> + PartialEq + std::fmt::Debug,
    T::Error: std::fmt::Debug,
{
    let Ok(wire) = W::decode(bytes) else {
        return false;
    };
    let Ok(value) = T::try_from(wire) else {
        return false;
    };
    let again = T::try_from(W::from(&value)).expect("an accepted message converts back");
    assert_eq!(again, value);
    true
}
