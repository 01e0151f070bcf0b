//! Roster deltas and multi-part states, both ends of them (the `Watch` contract in
//! `roster.proto`). The controller side: [`diff`] two rosters endpoint by endpoint and [`encode`]
//! one published version as the messages a delta-capable stream needs (a delta against the
//! previous version when it is small, the complete state in parts of at most [`PART_ENDPOINTS`]
//! endpoints otherwise). The sidecar side: an [`Assembler`] per stream that applies what arrives
//! to what it holds and hands on complete states only, so nothing past it ever sees a delta or
//! half a roster. What it holds outlives the stream, so a reconnect can name it (`held`) and
//! be answered with an empty delta instead of the complete roster again.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};

use crate::proto::v1 as pb;
use crate::roster::{Endpoint, Roster};

/// Endpoints (or, in a report, endpoint entries) per message, in a part of a large state and
/// in a delta: about 3 KB on the wire, so no stream's buffers ever grow much past that however
/// large a pool is (tonic keeps them at their high-water mark for the life of the stream).
pub const PART_ENDPOINTS: usize = 64;

/// What changed from one roster to the next.
#[derive(Debug, PartialEq)]
pub struct RosterChange<'a> {
    /// New or changed endpoints, in address order.
    pub upserted: Vec<&'a Endpoint>,
    /// Addresses that left, in order.
    pub removed: Vec<SocketAddr>,
    /// Whether the policy differs.
    pub policy_changed: bool,
    /// Whether the Service differs.
    pub service_changed: bool,
}

impl RosterChange<'_> {
    /// Endpoint entries the delta would carry.
    pub fn len(&self) -> usize {
        self.upserted.len() + self.removed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0 && !self.policy_changed && !self.service_changed
    }
}

/// The change from `base` to `next`, both sorted by address with each address once (the
/// `Roster` invariant): one merge walk, O(endpoints).
pub fn diff<'a>(base: &Roster, next: &'a Roster) -> RosterChange<'a> {
    let mut upserted = Vec::new();
    let mut removed = Vec::new();
    let (mut old, mut new) = (
        base.endpoints.iter().peekable(),
        next.endpoints.iter().peekable(),
    );
    loop {
        match (old.peek(), new.peek()) {
            (None, None) => break,
            (Some(o), None) => {
                removed.push(o.addr);
                old.next();
            }
            (None, Some(n)) => {
                upserted.push(*n);
                new.next();
            }
            (Some(o), Some(n)) => match o.addr.cmp(&n.addr) {
                std::cmp::Ordering::Less => {
                    removed.push(o.addr);
                    old.next();
                }
                std::cmp::Ordering::Greater => {
                    upserted.push(*n);
                    new.next();
                }
                std::cmp::Ordering::Equal => {
                    if o != n {
                        upserted.push(*n);
                    }
                    old.next();
                    new.next();
                }
            },
        }
    }
    RosterChange {
        upserted,
        removed,
        policy_changed: base.policy != next.policy,
        service_changed: base.service != next.service,
    }
}

/// The delta message for `change`, from `base_version` to `version`; `None` when it would carry
/// more than [`PART_ENDPOINTS`] entries (the complete state in parts is then as cheap and keeps
/// every message small).
pub fn delta_message(
    pool: &pb::PoolRef,
    version: u64,
    base_version: u64,
    change: &RosterChange<'_>,
    next: &Roster,
    fingerprint: &[u8],
) -> Result<Option<pb::RosterUpdate>, serde_json::Error> {
    if change.len() > PART_ENDPOINTS {
        return Ok(None);
    }
    let delta = pb::RosterDelta {
        base_version,
        upserted: change
            .upserted
            .iter()
            .map(|e| pb::Endpoint::from(*e))
            .collect(),
        removed: change.removed.iter().map(|a| address(*a)).collect(),
        policy_json: if change.policy_changed {
            Some(serde_json::to_string(&next.policy)?)
        } else {
            None
        },
        service: change.service_changed.then(|| next.service.clone()),
    };
    Ok(Some(pb::RosterUpdate {
        pool: Some(pool.clone()),
        version,
        state: Some(pb::roster_update::State::Delta(delta)),
        continued: false,
        fingerprint: fingerprint.to_vec(),
        fleet: None,
    }))
}

/// The message that resumes a roster a caller holds from an earlier stream and that equals the
/// current one: an empty delta from `held` to `version`.
pub fn resume_message(
    pool: &pb::PoolRef,
    version: u64,
    held: u64,
    fingerprint: &[u8],
) -> pb::RosterUpdate {
    pb::RosterUpdate {
        pool: Some(pool.clone()),
        version,
        state: Some(pb::roster_update::State::Delta(pb::RosterDelta {
            base_version: held,
            ..Default::default()
        })),
        continued: false,
        fingerprint: fingerprint.to_vec(),
        fleet: None,
    }
}

/// A complete state as the messages of a delta-capable stream: itself when it is small or not a
/// roster, otherwise a first `roster` part with the policy and the first endpoints, then deltas
/// of the same version adding the rest, every part but the last marked `continued` and only
/// the last carrying the fingerprint.
pub fn parts(update: &pb::RosterUpdate) -> Vec<pb::RosterUpdate> {
    let Some(pb::roster_update::State::Roster(roster)) = &update.state else {
        return vec![update.clone()];
    };
    if roster.endpoints.len() <= PART_ENDPOINTS {
        return vec![update.clone()];
    }
    let mut chunks = roster.endpoints.chunks(PART_ENDPOINTS);
    let first = chunks.next().unwrap_or_default();
    let mut out = vec![pb::RosterUpdate {
        pool: update.pool.clone(),
        version: update.version,
        state: Some(pb::roster_update::State::Roster(pb::PoolRoster {
            endpoints: first.to_vec(),
            policy_json: roster.policy_json.clone(),
            service: roster.service.clone(),
        })),
        continued: true,
        fingerprint: Vec::new(),
        fleet: None,
    }];
    for chunk in chunks {
        out.push(pb::RosterUpdate {
            pool: update.pool.clone(),
            version: update.version,
            state: Some(pb::roster_update::State::Delta(pb::RosterDelta {
                base_version: update.version,
                upserted: chunk.to_vec(),
                ..Default::default()
            })),
            continued: true,
            fingerprint: Vec::new(),
            fleet: None,
        });
    }
    if let Some(last) = out.last_mut() {
        last.continued = false;
        last.fingerprint.clone_from(&update.fingerprint);
    }
    out
}

/// The digest of a complete roster that `fingerprint` carries: SHA-256 over a canonical byte
/// form of the roster itself (every endpoint in address order with each field length- or
/// tag-prefixed, then the policy's JSON text and the Service label), computed without building
/// its wire form, which a one-endpoint change to a large pool would otherwise pay for on every
/// publish. `policy_json` is `serde_json::to_string(&roster.policy)`. The protocol treats the
/// digest as opaque (compared for equality only), so its definition may change between
/// controller versions at the cost of one snapshot per sidecar.
pub fn fingerprint(roster: &Roster, policy_json: &str) -> Vec<u8> {
    /// Bytes gathered before they are fed to the digest in one call.
    const CHUNK: usize = 4096;
    fn text(out: &mut Vec<u8>, value: Option<&str>) {
        match value {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u64).to_be_bytes());
                out.extend_from_slice(v.as_bytes());
            }
        }
    }
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = Vec::with_capacity(CHUNK + 256);
    buf.extend_from_slice(&(roster.endpoints.len() as u64).to_be_bytes());
    for e in &roster.endpoints {
        match e.addr.ip() {
            IpAddr::V4(ip) => {
                buf.push(4);
                buf.extend_from_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                buf.push(6);
                buf.extend_from_slice(&ip.octets());
            }
        }
        buf.extend_from_slice(&e.addr.port().to_be_bytes());
        text(&mut buf, e.pod.as_deref());
        text(&mut buf, e.zone.as_deref());
        buf.push(u8::from(e.ready) | u8::from(e.serving) << 1 | u8::from(e.terminating) << 2);
        buf.extend_from_slice(&e.weight.max(1).to_be_bytes());
        if buf.len() >= CHUNK {
            digest.update(&buf);
            buf.clear();
        }
    }
    text(&mut buf, Some(policy_json));
    text(&mut buf, Some(&roster.service));
    digest.update(&buf);
    digest.finish().as_ref().to_vec()
}

fn address(a: SocketAddr) -> pb::EndpointAddress {
    pb::EndpointAddress {
        ip: a.ip().to_string(),
        port: a.port().into(),
    }
}

/// Why a stream's messages could not be assembled; the receiver must reconnect.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeltaError {
    #[error("message names no pool")]
    NoPool,
    #[error(
        "pool {pool}: a delta to version {version} applies to {base}, but this stream holds {held}"
    )]
    WrongBase {
        pool: String,
        version: u64,
        base: u64,
        held: String,
    },
    #[error("pool {pool}: a delta names {ip:?} port {port}, which is not an endpoint address")]
    BadAddress { pool: String, ip: String, port: u32 },
    #[error("pool {pool}: a delta removes {addr}, which the roster it applies to does not hold")]
    NotHeld { pool: String, addr: SocketAddr },
}

/// What one message amounts to.
#[derive(Debug, PartialEq)]
pub enum Assembled {
    /// A part of a state whose last part is still to come: nothing to apply yet.
    Partial,
    /// The pool's complete state, to apply.
    Complete(pb::RosterUpdate),
}

/// The receiving end of one `Watch` stream: per pool the roster of the last version received,
/// the base the next delta applies to. One per stream: a new stream starts with snapshots.
#[derive(Debug, Default)]
pub struct Assembler {
    pools: HashMap<(String, String), Held>,
}

#[derive(Debug)]
struct Held {
    version: u64,
    /// More parts of `version` are to come.
    pending: bool,
    /// Of the complete roster, when the controller sent one.
    fingerprint: Vec<u8>,
    endpoints: BTreeMap<SocketAddr, pb::Endpoint>,
    policy_json: String,
    service: String,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Take one message. A complete message without parts passes through as it came; a delta
    /// or a last part comes out as the complete state it makes.
    pub fn accept(&mut self, message: pb::RosterUpdate) -> Result<Assembled, DeltaError> {
        match self.apply(&message)? {
            Step::Partial => Ok(Assembled::Partial),
            Step::Whole => Ok(Assembled::Complete(message)),
            Step::Rebuilt => {
                let key = pool_key(&message);
                let Some(held) = self.pools.get(&key) else {
                    return Err(DeltaError::NoPool);
                };
                Ok(Assembled::Complete(pb::RosterUpdate {
                    pool: message.pool,
                    version: held.version,
                    state: Some(pb::roster_update::State::Roster(pb::PoolRoster {
                        endpoints: held.endpoints.values().cloned().collect(),
                        policy_json: held.policy_json.clone(),
                        service: held.service.clone(),
                    })),
                    continued: false,
                    fingerprint: held.fingerprint.clone(),
                    fleet: None,
                }))
            }
        }
    }

    /// Like [`Self::accept`], without building the complete message: the version of the state
    /// the message completes, if it completes one. For a receiver that only counts (the fleet
    /// benchmark's simulated sidecars), so a thousand of them do not copy a large pool per change.
    pub fn track(&mut self, message: &pb::RosterUpdate) -> Result<Option<u64>, DeltaError> {
        Ok(match self.apply(message)? {
            Step::Partial => None,
            Step::Whole | Step::Rebuilt => Some(message.version),
        })
    }

    fn apply(&mut self, message: &pb::RosterUpdate) -> Result<Step, DeltaError> {
        let Some(pool) = &message.pool else {
            return Err(DeltaError::NoPool);
        };
        let key = pool_key(message);
        let pool_name = || format!("{}/{}", pool.namespace, pool.name);
        match &message.state {
            Some(pb::roster_update::State::Roster(roster)) => {
                match keyed(&roster.endpoints, pool_name) {
                    Ok(endpoints) => {
                        let held = Held {
                            version: message.version,
                            pending: message.continued,
                            fingerprint: message.fingerprint.clone(),
                            endpoints,
                            policy_json: roster.policy_json.clone(),
                            service: roster.service.clone(),
                        };
                        self.pools.insert(key, held);
                    }
                    // A complete roster with an unusable address is the receiver's to refuse
                    // (it keeps its previous one); it is no base for a delta, nor for parts.
                    Err(error) if message.continued => {
                        self.pools.remove(&key);
                        return Err(error);
                    }
                    Err(_) => {
                        self.pools.remove(&key);
                    }
                }
                Ok(if message.continued {
                    Step::Partial
                } else {
                    Step::Whole
                })
            }
            Some(pb::roster_update::State::Delta(delta)) => {
                let held = self.pools.get_mut(&key);
                let fits = held.as_ref().is_some_and(|h| {
                    h.version == delta.base_version
                        && if h.pending {
                            message.version == h.version
                        } else {
                            message.version > h.version
                        }
                });
                let Some(held) = held.filter(|_| fits) else {
                    let held = self.pools.get(&key).map_or_else(
                        || "no roster".to_string(),
                        |h| {
                            format!(
                                "version {}{}",
                                h.version,
                                if h.pending { " in parts" } else { "" }
                            )
                        },
                    );
                    self.pools.remove(&key);
                    return Err(DeltaError::WrongBase {
                        pool: pool_name(),
                        version: message.version,
                        base: delta.base_version,
                        held,
                    });
                };
                for gone in &delta.removed {
                    let addr = parse(&gone.ip, gone.port, pool_name)?;
                    if held.endpoints.remove(&addr).is_none() {
                        return Err(DeltaError::NotHeld {
                            pool: pool_name(),
                            addr,
                        });
                    }
                }
                for e in &delta.upserted {
                    held.endpoints
                        .insert(parse(&e.ip, e.port, pool_name)?, e.clone());
                }
                if let Some(policy) = &delta.policy_json {
                    held.policy_json.clone_from(policy);
                }
                if let Some(service) = &delta.service {
                    held.service.clone_from(service);
                }
                held.version = message.version;
                held.pending = message.continued;
                held.fingerprint.clone_from(&message.fingerprint);
                Ok(if held.pending {
                    Step::Partial
                } else {
                    Step::Rebuilt
                })
            }
            // `unavailable` (or a state this version does not know): no base for deltas.
            _ => {
                self.pools.remove(&key);
                Ok(Step::Whole)
            }
        }
    }

    /// A new stream begins: what it completed stays the base for resuming (`held`), what was
    /// still in parts is dropped.
    pub fn new_stream(&mut self) {
        self.pools.retain(|_, held| !held.pending);
    }

    /// The complete rosters held, for `WatchRequest.held`: those with a fingerprint.
    pub fn held_rosters(&self) -> Vec<pb::HeldRoster> {
        self.pools
            .iter()
            .filter(|(_, h)| !h.pending && !h.fingerprint.is_empty())
            .map(|((namespace, name), h)| pb::HeldRoster {
                pool: Some(pb::PoolRef {
                    namespace: namespace.clone(),
                    name: name.clone(),
                }),
                version: h.version,
                fingerprint: h.fingerprint.clone(),
            })
            .collect()
    }

    /// How many endpoints `pool` holds on this stream.
    pub fn held(&self, pool: &pb::PoolRef) -> usize {
        self.pools
            .get(&(pool.namespace.clone(), pool.name.clone()))
            .map_or(0, |h| h.endpoints.len())
    }

    /// The endpoints `pool` holds on this stream, in address order (empty when none).
    pub fn endpoints(&self, pool: &pb::PoolRef) -> impl Iterator<Item = &pb::Endpoint> {
        self.pools
            .get(&(pool.namespace.clone(), pool.name.clone()))
            .into_iter()
            .flat_map(|h| h.endpoints.values())
    }
}

/// What a message did to the held state.
enum Step {
    Partial,
    /// A complete state as it came.
    Whole,
    /// A complete state made from what was held and a delta.
    Rebuilt,
}

fn pool_key(message: &pb::RosterUpdate) -> (String, String) {
    message
        .pool
        .as_ref()
        .map(|p| (p.namespace.clone(), p.name.clone()))
        .unwrap_or_default()
}

fn parse(ip: &str, port: u32, pool: impl Fn() -> String) -> Result<SocketAddr, DeltaError> {
    let bad = || DeltaError::BadAddress {
        pool: pool(),
        ip: ip.to_string(),
        port,
    };
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let port = u16::try_from(port).map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, port))
}

fn keyed(
    endpoints: &[pb::Endpoint],
    pool: impl Fn() -> String,
) -> Result<BTreeMap<SocketAddr, pb::Endpoint>, DeltaError> {
    endpoints
        .iter()
        .map(|e| Ok((parse(&e.ip, e.port, &pool)?, e.clone())))
        .collect()
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;
