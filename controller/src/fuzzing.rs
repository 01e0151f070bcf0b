//! Entry points for the fuzz targets (`fuzz/`, cargo-fuzz on nightly) and for the corpus
//! replay test that runs every committed input on stable. Each takes arbitrary bytes, must
//! never panic, and returns whether the input got past parsing to its checks.

use std::net::SocketAddr;

use http_body_util::BodyExt;
use prost::Message;
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{HealthReport, SidecarId};
use tokio::time::Instant;

use crate::FastSet;
use crate::server::admit::{MAX_ERROR_CHARS, OTHER_REASON, REASONS, admit};
use crate::server::frame_limit::SizeGuarded;
use crate::status::ReportStore;

/// The endpoints the fuzzed reports are judged against: a roster of four.
fn known() -> FastSet<SocketAddr> {
    (1..=4)
        .map(|i| SocketAddr::from(([10, 0, 0, i], 8080)))
        .collect()
}

/// A report message as any caller could send it: decoded, passed through the edge, admitted
/// against a roster and recorded. What must hold: no panic; what is kept names only roster
/// endpoints, each once, with a known reason (or `Other`) and a bounded error text free of control
/// characters; the store counts the stream once and forgets it on close.
pub fn report(data: &[u8]) -> bool {
    let Ok(wire) = pb::HealthReport::decode(data) else {
        return false;
    };
    let Ok(report) = HealthReport::try_from(wire) else {
        return false;
    };
    let known = known();
    let store = ReportStore::new();
    let now = Instant::now();
    let sidecar = SidecarId {
        namespace: "shop".into(),
        pod: "front-1".into(),
        instance: "i".into(),
    };
    let id = store.open(sidecar, now);
    let mut pools = Vec::new();
    for mut pool in report.pools {
        let before = pool.endpoints.len();
        let dropped = admit(&mut pool, &known);
        assert_eq!(before - dropped, pool.endpoints.len());
        let mut seen = FastSet::default();
        for e in &pool.endpoints {
            assert!(known.contains(&e.addr), "{} is not in the roster", e.addr);
            assert!(seen.insert(e.addr), "{} is kept twice", e.addr);
            let reason = e.reason.as_str();
            assert!(reason.is_empty() || reason == OTHER_REASON || REASONS.contains(&reason));
            if let Some(error) = &e.last_error {
                assert!(error.chars().count() <= MAX_ERROR_CHARS);
                assert!(!error.chars().any(char::is_control));
            }
        }
        pools.push(pool.pool.clone());
        store.record(id, pool, now);
    }
    for pool in &pools {
        assert!(
            store.reporters(pool, now).len() <= 1,
            "one stream counts once"
        );
    }
    store.close(id);
    for pool in &pools {
        assert!(
            store.reporters(pool, now).is_empty(),
            "a closed stream still counts"
        );
    }
    true
}

/// The gRPC length-prefix guard every request body passes before tonic sees it: byte 0 picks
/// the limit, byte 1 how the rest is cut into frames. What must hold: the guard's verdict does
/// not depend on how the bytes were cut, and it is the verdict of a plain reading of the
/// framing (the first message whose declared length is over the limit is refused).
pub fn grpc_framing(data: &[u8]) -> bool {
    let [limit_seed, cut_seed, body @ ..] = data else {
        return false;
    };
    let limit = usize::from(*limit_seed) * 4;
    let cut = usize::from(*cut_seed % 16) + 1;
    let expected = reference(body, limit);
    let whole = guard(limit, std::iter::once(body));
    let pieces = guard(limit, body.chunks(cut));
    assert_eq!(whole, expected, "limit {limit}");
    assert_eq!(pieces, expected, "limit {limit}, cut every {cut} bytes");
    !body.is_empty()
}

/// The declared length of the first message over `limit`, reading the framing plainly.
fn reference(mut body: &[u8], limit: usize) -> Option<usize> {
    while body.len() >= 5 {
        let declared = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        if declared > limit {
            return Some(declared);
        }
        body = &body[(5 + declared).min(body.len())..];
    }
    None
}

/// What `SizeGuarded` says of `frames`: the size it refused, if any.
fn guard<'a>(limit: usize, frames: impl Iterator<Item = &'a [u8]>) -> Option<usize> {
    let empty = http_body_util::Empty::<bytes::Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut guarded = SizeGuarded::new(empty, limit, || {});
    frames
        .into_iter()
        .find_map(|frame| guarded.check(frame).err())
}
