//! Which roster each pool runs: the `Watch` protocol's contract (see `roster.proto`) as a pure
//! state machine. Messages go in, one `Outcome` per message comes out (for one log line, and
//! naming the pool it changed, if any), and `pool_config()` is what the runtime should run for
//! that pool (`config()` for all of them). A roster whose policy does not
//! parse or validate is refused and the previous one kept; `unavailable` empties a pool only
//! when the pool itself is gone, otherwise the last roster stays (stale).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use rollcall_api::policy::PoolPolicy;
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{
    Endpoint, PoolRef, PoolState, Refusal, RosterUpdate, UnavailableReason,
};

use super::{PoolBinding, Running, Versions};
use crate::config::{EndpointConfig, PoolConfig, SidecarConfig};

/// The largest endpoint weight the pools accept.
const MAX_WEIGHT: u32 = 10_000;

/// Every watched pool and what it runs.
#[derive(Clone, Debug)]
pub struct Book {
    pools: BTreeMap<PoolRef, Entry>,
}

#[derive(Clone, Debug)]
struct Entry {
    listen: SocketAddr,
    endpoints: Vec<EndpointConfig>,
    policy: PoolPolicy,
    /// Version of the message the pool runs; `None` before the first one.
    version: Option<u64>,
    /// Newest version seen on the current stream; `None` until its first message.
    stream_version: Option<u64>,
    /// A version newer than `version` that was refused, and why (reported to the controller).
    refused: Option<Refusal>,
}

/// What one message did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The pool runs a new roster.
    Applied {
        pool: PoolRef,
        version: u64,
        routed: usize,
        terminating: usize,
        left_out: usize,
    },
    /// Same endpoints and policy as before (e.g. the snapshot after a reconnect).
    Unchanged { pool: PoolRef, version: u64 },
    /// Not newer than a message already seen on this stream: a redundant update.
    Superseded {
        pool: PoolRef,
        version: u64,
        seen: u64,
    },
    /// Unusable (bad policy, bad endpoint): the previous roster stays.
    Refused {
        pool: PoolRef,
        version: u64,
        error: String,
    },
    /// The pool is gone: no endpoints until it comes back.
    Gone {
        pool: PoolRef,
        version: u64,
        reason: UnavailableReason,
        message: String,
    },
    /// The controller cannot compute a roster: the last one stays.
    Stale {
        pool: PoolRef,
        reason: UnavailableReason,
        message: String,
        has_roster: bool,
    },
    /// A pool this sidecar did not ask for.
    Unrequested { pool: PoolRef },
    /// No usable pool reference.
    Malformed { error: String },
}

// === impl Book ===

impl Book {
    /// Every pool listening, none with endpoints yet.
    pub fn new(bindings: &[PoolBinding]) -> Self {
        let pools = bindings
            .iter()
            .map(|b| {
                let entry = Entry {
                    listen: b.listen,
                    endpoints: Vec::new(),
                    policy: PoolPolicy::default(),
                    version: None,
                    stream_version: None,
                    refused: None,
                };
                (b.pool.clone(), entry)
            })
            .collect();
        Self { pools }
    }

    /// A new stream begins: its first message per pool is accepted whatever its version.
    pub fn new_stream(&mut self) {
        for entry in self.pools.values_mut() {
            entry.stream_version = None;
        }
    }

    /// Take one message of the stream.
    pub fn apply(&mut self, message: pb::RosterUpdate) -> Outcome {
        let outcome = self.judge(message);
        self.note_refusal(&outcome);
        outcome
    }

    /// Remember a refusal until a roster at least as new runs, so reports can say it.
    fn note_refusal(&mut self, outcome: &Outcome) {
        let (pool, version, refusal) = match outcome {
            Outcome::Refused {
                pool,
                version,
                error,
            } => (
                pool,
                *version,
                Some(Refusal {
                    version: *version,
                    reason: error.clone(),
                }),
            ),
            Outcome::Applied { pool, version, .. }
            | Outcome::Unchanged { pool, version }
            | Outcome::Gone { pool, version, .. } => (pool, *version, None),
            _ => return,
        };
        let Some(entry) = self.pools.get_mut(pool) else {
            return;
        };
        match refusal {
            Some(refusal) => entry.refused = Some(refusal),
            None => {
                if entry.refused.as_ref().is_some_and(|r| r.version <= version) {
                    entry.refused = None;
                }
            }
        }
    }

    fn judge(&mut self, message: pb::RosterUpdate) -> Outcome {
        let pool = match message.pool.clone().map(PoolRef::try_from) {
            Some(Ok(pool)) => pool,
            Some(Err(error)) => {
                return Outcome::Malformed {
                    error: error.to_string(),
                };
            }
            None => {
                return Outcome::Malformed {
                    error: "missing field pool".into(),
                };
            }
        };
        let Some(entry) = self.pools.get_mut(&pool) else {
            return Outcome::Unrequested { pool };
        };
        let version = message.version;
        if let Some(seen) = entry.stream_version
            && version <= seen
        {
            return Outcome::Superseded {
                pool,
                version,
                seen,
            };
        }
        entry.stream_version = Some(version);
        let update = match RosterUpdate::try_from(message) {
            Ok(update) => update,
            Err(error) => {
                return Outcome::Refused {
                    pool,
                    version,
                    error: error.to_string(),
                };
            }
        };
        match update.state {
            PoolState::Roster(roster) => {
                if let Err(errors) = roster.policy.validate() {
                    let error = errors
                        .iter()
                        .map(|e| format!("policy.{e}"))
                        .collect::<Vec<_>>()
                        .join("; ");
                    return Outcome::Refused {
                        pool,
                        version,
                        error,
                    };
                }
                let endpoints: Vec<EndpointConfig> = roster
                    .endpoints
                    .iter()
                    .filter_map(endpoint_config)
                    .collect();
                let unchanged = entry.version.is_some()
                    && entry.endpoints == endpoints
                    && entry.policy == roster.policy;
                entry.version = Some(version);
                if unchanged {
                    return Outcome::Unchanged { pool, version };
                }
                let terminating = endpoints.iter().filter(|e| e.terminating).count();
                let outcome = Outcome::Applied {
                    pool,
                    version,
                    routed: endpoints.len() - terminating,
                    terminating,
                    left_out: roster.endpoints.len() - endpoints.len(),
                };
                entry.endpoints = endpoints;
                entry.policy = roster.policy;
                outcome
            }
            PoolState::Unavailable { reason, message } if reason.pool_gone() => {
                entry.endpoints.clear();
                entry.version = Some(version);
                Outcome::Gone {
                    pool,
                    version,
                    reason,
                    message,
                }
            }
            PoolState::Unavailable { reason, message } => Outcome::Stale {
                pool,
                reason,
                message,
                has_roster: !entry.endpoints.is_empty(),
            },
        }
    }

    /// The configuration the runtime should run: one pool per watched pool, named
    /// `namespace/name`.
    pub fn config(&self) -> SidecarConfig {
        SidecarConfig {
            pools: self
                .pools
                .keys()
                .filter_map(|pool| self.pool_config(pool))
                .collect(),
        }
    }

    /// The configuration of one watched pool, as `config` has it: what the runtime applies
    /// after a message changed that pool alone.
    pub fn pool_config(&self, pool: &PoolRef) -> Option<PoolConfig> {
        self.pools.get(pool).map(|entry| PoolConfig {
            name: pool.to_string(),
            listen: entry.listen,
            endpoints: entry.endpoints.clone(),
            policy: entry.policy.clone(),
        })
    }

    /// The roster version `pool` runs, once it has had one.
    pub fn version_of(&self, pool: &PoolRef) -> Option<u64> {
        self.pools.get(pool).and_then(|entry| entry.version)
    }

    /// What each pool runs, for pools that have had a usable message or refused one.
    pub(crate) fn versions(&self) -> Versions {
        self.pools
            .iter()
            .filter(|(_, entry)| entry.version.is_some() || entry.refused.is_some())
            .map(|(pool, entry)| {
                let running = Running {
                    pool: pool.clone(),
                    version: entry.version.unwrap_or(0),
                    refused: entry.refused.clone(),
                };
                (pool.to_string(), running)
            })
            .collect()
    }
}

/// How an EndpointSlice endpoint is routed: `ready` and not terminating → routed;
/// terminating but `serving` (or `ready`) → kept as a last resort (`terminating: true`);
/// anything else (not ready, or terminating and no longer serving) → left out. A non-terminating
/// endpoint that claims `serving` but not `ready` is left out: its readiness probe says no.
pub fn endpoint_config(e: &Endpoint) -> Option<EndpointConfig> {
    let include = if e.terminating {
        e.serving || e.ready
    } else {
        e.ready
    };
    include.then(|| EndpointConfig {
        address: e.addr,
        zone: e.zone.clone(),
        weight: e.weight.clamp(1, MAX_WEIGHT),
        terminating: e.terminating,
    })
}

// === impl Outcome ===

impl Outcome {
    /// The pool whose configuration the runtime must apply now, when this message changed
    /// one (a new roster, or the pool is gone).
    pub fn changed(&self) -> Option<&PoolRef> {
        match self {
            Self::Applied { pool, .. } | Self::Gone { pool, .. } => Some(pool),
            _ => None,
        }
    }
}

impl Outcome {
    /// The `result` label of `rollcall_roster_updates_total`.
    pub(super) fn label(&self) -> &'static str {
        match self {
            Self::Applied { .. } => "applied",
            Self::Unchanged { .. } => "unchanged",
            Self::Superseded { .. } => "superseded",
            Self::Refused { .. } => "refused",
            Self::Gone { .. } => "gone",
            Self::Stale { .. } => "stale",
            Self::Unrequested { .. } => "unrequested",
            Self::Malformed { .. } => "malformed",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Applied { .. } => f.write_str("roster applied"),
            Self::Unchanged { .. } => f.write_str("roster unchanged"),
            Self::Superseded { .. } => f.write_str("redundant roster update ignored"),
            Self::Refused { .. } => f.write_str("roster refused; keeping the previous one"),
            Self::Gone { .. } => f.write_str("pool is gone; it has no endpoints now"),
            Self::Stale { .. } => f.write_str("controller has no roster; keeping the last one"),
            Self::Unrequested { .. } => {
                f.write_str("update for a pool this sidecar did not ask for")
            }
            Self::Malformed { .. } => f.write_str("malformed roster update ignored"),
        }
    }
}

#[cfg(test)]
#[path = "book_tests.rs"]
mod tests;
