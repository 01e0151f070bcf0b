//! Status aggregation, pure: the roster the controller serves plus the latest report of every
//! sidecar become one `BackendPoolStatus`.
//!
//! - An endpoint is ejected when most sidecars reporting on the pool eject it (the same rule
//!   as its Events and as `Panic`: one pod, one vote, a tie is not a majority); otherwise its
//!   state is the one most of the others report (ties go to the healthier state), and an
//!   endpoint nobody else reports on counts from its EndpointSlice conditions.
//! - `ejections` lists every endpoint at least one sidecar ejects: by how many of the sidecars
//!   reporting on the pool, the most common reason, since the earliest ejection, and the latest
//!   error seen, marked as reported by a sidecar (its text is the sidecar's, not ours). The list
//!   is capped so a status object cannot grow without bound, keeping the endpoints ejected by
//!   the most sidecars, so a minority cannot hide a majority's ejection. Beside it, `summarize`
//!   yields every majority ejection, uncapped, for the Events.
//! - Conditions: `Ready` (a roster is served and some endpoint can take traffic; `False` with
//!   `RosterNotApplied` when every reporting sidecar still runs an older roster
//!   `APPLY_GRACE_MS` after the current one was published — they refused it; at once, with
//!   `RosterRefused` and the reason, when they say they refused it), `Degraded`
//!   (most sidecars eject some endpoint), `Panic` (most sidecars route in panic mode). Each
//!   keeps its `lastTransitionTime` while its status does not change.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use rollcall_api::roster::{EndpointState, Roster};

use super::tally::{EndpointTally, PoolTally, STATES};
use crate::crd::{BackendPoolStatus, Ejection, EndpointCounts, SidecarCounts};
use crate::roster::Problem;

/// At most this many entries in `status.ejections`.
pub const MAX_EJECTIONS: usize = 50;

/// What the controller serves for the pool.
#[derive(Clone, Copy, Debug)]
pub enum Served<'a> {
    Roster { version: u64, roster: &'a Roster },
    Problem(&'a Problem),
}

/// Everything the status is computed from.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub generation: Option<i64>,
    pub served: Served<'a>,
    /// The fresh reports about this pool, one per sidecar stream, as running totals.
    pub reports: &'a PoolTally,
    /// Watch streams open on this pool.
    pub connected: u32,
    /// The status currently written, to keep transition times.
    pub previous: Option<&'a BackendPoolStatus>,
    pub now: Timestamp,
}

/// How long a sidecar may take to apply and report a new roster version before it counts as not
/// having applied it (a change is reported within a report interval, 250 ms; this leaves room
/// for a reconnect).
pub const APPLY_GRACE_MS: u64 = 15_000;

/// How many reporting sidecars run a roster older than `version`, once `version` (a Unix-ms
/// publish time) is older than `APPLY_GRACE_MS`; `None` before that.
fn not_applied(reports: &PoolTally, version: u64, now: Timestamp) -> Option<u32> {
    let now_ms = u64::try_from(now.as_millisecond()).unwrap_or(0);
    if now_ms.saturating_sub(version) < APPLY_GRACE_MS || version > now_ms {
        return None;
    }
    let behind = reports.roster_versions().filter(|v| *v < version).count();
    Some(u32::try_from(behind).unwrap_or(u32::MAX))
}

/// How many counted reporters refused roster `version` (or a newer one), and the reason most
/// of them give (among equals the alphabetically first, so the message is stable).
fn refused(reports: &PoolTally, version: u64) -> Option<(u32, String)> {
    let mut reasons: BTreeMap<&str, u32> = BTreeMap::new();
    for r in reports.refusals().filter(|r| r.version >= version) {
        *reasons.entry(r.reason.as_str()).or_default() += 1;
    }
    let count = reasons.values().sum();
    let reason = reasons
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(r, _)| r.to_string())?;
    Some((count, reason))
}

fn age_seconds(version: u64, now: Timestamp) -> u64 {
    u64::try_from(now.as_millisecond())
        .unwrap_or(0)
        .saturating_sub(version)
        / 1000
}

/// Every endpoint most reporting sidecars eject, by address, uncapped: what Events are
/// computed from (never from the capped list in the status).
pub type Majority = BTreeMap<String, MajorityEjection>;

/// One endpoint most reporting sidecars eject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MajorityEjection {
    pub pod: Option<String>,
    pub reason: String,
    pub ejected_by: u32,
    pub of: u32,
}

/// A pool's status, and every endpoint most of its sidecars eject.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aggregated {
    pub status: BackendPoolStatus,
    pub majority: Majority,
}

/// The status alone.
pub fn aggregate(input: Input<'_>) -> BackendPoolStatus {
    summarize(input).status
}

/// Whether `ejected_by` of `of` reporting sidecars is most of them.
pub fn is_majority(ejected_by: u32, of: u32) -> bool {
    of > 0 && u64::from(ejected_by) * 2 > u64::from(of)
}

/// The status, and every endpoint most sidecars eject.
pub fn summarize(input: Input<'_>) -> Aggregated {
    let mut majority = Majority::new();
    let reporting = input.reports.reporting();
    let mut status = BackendPoolStatus {
        observed_generation: input.generation,
        sidecars: Some(SidecarCounts {
            connected: input.connected,
            reporting,
        }),
        ..Default::default()
    };
    let (ready, version) = match input.served {
        Served::Problem(p) => {
            let ready = (false, p.reason.as_str().to_string(), p.message.clone());
            (ready, None)
        }
        Served::Roster { version, roster } => {
            let (counts, ejections, most) = endpoints(roster, input.reports);
            majority = most;
            let ready = if counts.total == 0 {
                (
                    false,
                    "NoEndpoints".into(),
                    "the Service has no endpoints".into(),
                )
            } else if counts.healthy + counts.probation == 0 {
                let msg = format!("none of {} endpoints is healthy", counts.total);
                (false, "NoHealthyEndpoints".into(), msg)
            } else if let Some((count, reason)) = refused(input.reports, version)
                && count == reporting
            {
                let msg = format!(
                    "every reporting sidecar ({reporting}) refused roster version {version}: \
                     {reason}; they route on the roster they had"
                );
                (false, "RosterRefused".into(), msg)
            } else if let Some(stale) = not_applied(input.reports, version, input.now)
                && reporting > 0
                && stale == reporting
            {
                let msg = format!(
                    "none of the {reporting} reporting sidecars runs roster version {version}, \
                     published {}s ago: they route on an older roster (a sidecar that cannot \
                     use a roster keeps its previous one and logs \"roster refused\" with the reason)",
                    age_seconds(version, input.now)
                );
                (false, "RosterNotApplied".into(), msg)
            } else if reporting == 0 {
                // Served, but nobody has looked: say where the count comes from.
                let msg = format!(
                    "no sidecar has reported health yet ({} connected); {} of {} endpoints ready \
                     in their EndpointSlices; roster version {version}",
                    input.connected, counts.healthy, counts.total
                );
                (true, "AwaitingReports".into(), msg)
            } else {
                let mut msg = format!(
                    "{} of {} endpoints healthy; roster version {version}",
                    counts.healthy, counts.total
                );
                if let Some((count, reason)) = refused(input.reports, version) {
                    msg.push_str(&format!(
                        "; {count} of {reporting} sidecars refused it: {reason}"
                    ));
                } else if let Some(stale) = not_applied(input.reports, version, input.now)
                    && stale > 0
                {
                    msg.push_str(&format!(
                        "; {stale} of {reporting} sidecars still run an older roster"
                    ));
                }
                (true, "RosterServed".into(), msg)
            };
            status.endpoints = Some(counts);
            status.ejections = ejections;
            (ready, Some(version))
        }
    };
    status.roster_version = version;
    let ejected = status.endpoints.as_ref().map_or(0, |c| c.ejected);
    let degraded = if ejected > 0 {
        let total = status.endpoints.as_ref().map_or(0, |c| c.total);
        let msg = format!("{ejected} of {total} endpoints ejected by most sidecars");
        (true, "EndpointsEjected".to_string(), msg)
    } else {
        (
            false,
            "NoEjections".into(),
            "no endpoint is ejected by most sidecars".into(),
        )
    };
    // Like an endpoint's state, the pool's panic is what most reporting sidecars say (a tie
    // goes to not in panic): one pod cannot set it.
    let panicking = input.reports.panicking();
    let panic = if panicking > 0 && is_majority(panicking, reporting) {
        let msg = format!("{panicking} of {reporting} sidecars route in panic mode");
        (true, "PanicMode".to_string(), msg)
    } else if panicking > 0 {
        let msg =
            format!("{panicking} of {reporting} sidecars route in panic mode: not most of them");
        (false, "NotInPanic".to_string(), msg)
    } else {
        (
            false,
            "NotInPanic".into(),
            "no sidecar routes in panic mode".into(),
        )
    };
    status.conditions = [("Ready", ready), ("Degraded", degraded), ("Panic", panic)]
        .into_iter()
        .map(|(kind, (ok, reason, message))| condition(&input, kind, ok, reason, message))
        .collect();
    Aggregated { status, majority }
}

/// The status of a pool whose spec cannot be used: everything last written stays (the
/// sidecars keep routing on their last good roster), and `Ready` turns False with reason
/// `InvalidSpec` and the message naming the field.
pub fn invalid_spec(
    previous: Option<&BackendPoolStatus>,
    generation: Option<i64>,
    message: &str,
    now: Timestamp,
) -> BackendPoolStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.observed_generation = generation;
    let input = Input {
        generation,
        served: Served::Problem(&Problem {
            reason: rollcall_api::roster::UnavailableReason::InvalidPolicy,
            message: String::new(),
        }),
        reports: &PoolTally::default(),
        connected: 0,
        previous,
        now,
    };
    let ready = condition(
        &input,
        "Ready",
        false,
        "InvalidSpec".into(),
        message.to_string(),
    );
    status.conditions.retain(|c| c.type_ != "Ready");
    status.conditions.insert(0, ready);
    status
}

fn condition(
    input: &Input<'_>,
    kind: &str,
    ok: bool,
    reason: String,
    message: String,
) -> Condition {
    let status = if ok { "True" } else { "False" }.to_string();
    let since = input
        .previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == kind))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(input.now));
    Condition {
        type_: kind.into(),
        status,
        reason,
        message,
        observed_generation: input.generation,
        last_transition_time: since,
    }
}

/// Health order for ties: the healthier state wins.
fn healthiness(s: EndpointState) -> u8 {
    match s {
        EndpointState::Healthy => 5,
        EndpointState::Unknown => 4,
        EndpointState::Probation => 3,
        EndpointState::Draining => 2,
        EndpointState::Ejected => 1,
    }
}

/// The state an endpoint counts as: ejected only when most of the `of` sidecars reporting on
/// the pool eject it; otherwise the state most of its other reporters give it (ties to the
/// healthier); with no such reporter, what its EndpointSlice conditions say.
fn state_of(
    ep: &rollcall_api::roster::Endpoint,
    counts: Option<[u32; 5]>,
    of: u32,
) -> Option<EndpointState> {
    let from_slice = || match (ep.terminating, ep.ready || ep.serving) {
        (true, _) => Some(EndpointState::Draining),
        (false, true) => Some(EndpointState::Healthy),
        (false, false) => None,
    };
    let Some(counts) = counts else {
        return from_slice();
    };
    let ejected_by = counts[STATES.len() - 1];
    if is_majority(ejected_by, of) {
        return Some(EndpointState::Ejected);
    }
    STATES
        .into_iter()
        .zip(counts)
        .filter(|(s, n)| *n > 0 && *s != EndpointState::Ejected)
        .max_by_key(|(s, n)| (*n, healthiness(*s)))
        .map(|(s, _)| s)
        .or_else(from_slice)
}

/// What the sidecars ejecting an endpoint say: the most common reason (among equals the
/// alphabetically first), the earliest since (Unix ms), and the latest error (among equals the
/// last reporter's), so the result is stable.
fn ejection_details(tally: &EndpointTally<'_>) -> (String, u64, Option<String>) {
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    let mut since = u64::MAX;
    let mut last_error: Option<(u64, &str)> = None;
    for e in tally.ejecting() {
        *reasons.entry(e.reason.as_str()).or_default() += 1;
        since = since.min(e.since_unix_ms);
        if let Some(error) = &e.last_error
            && last_error.is_none_or(|(at, _)| e.since_unix_ms >= at)
        {
            last_error = Some((e.since_unix_ms, error));
        }
    }
    let reason = reasons
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(r, _)| r.to_string())
        .unwrap_or_default();
    let since = if since == u64::MAX { 0 } else { since };
    (reason, since, last_error.map(|(_, e)| reported(e)))
}

/// Text a sidecar sent, marked as its word: quoted (escaped), after who said it.
pub fn reported(text: &str) -> String {
    format!("reported by a sidecar: {text:?}")
}

fn endpoints(roster: &Roster, reports: &PoolTally) -> (EndpointCounts, Vec<Ejection>, Majority) {
    let of = reports.reporting();
    let mut counts = EndpointCounts {
        total: roster.endpoints.len() as u32,
        ..Default::default()
    };
    // Every endpoint some sidecar ejects, with how many do; the details are built only for
    // those listed and those most sidecars eject.
    let mut ejecting = Vec::new();
    let mut majority = Majority::new();
    for ep in &roster.endpoints {
        let seen = reports.endpoint(&ep.addr).filter(|t| t.seen() > 0);
        match state_of(ep, seen.as_ref().map(|t| t.counts), of) {
            Some(EndpointState::Healthy | EndpointState::Unknown) => counts.healthy += 1,
            Some(EndpointState::Ejected) => counts.ejected += 1,
            Some(EndpointState::Probation) => counts.probation += 1,
            Some(EndpointState::Draining) => counts.draining += 1,
            None => {}
        }
        let Some(tally) = seen else {
            continue;
        };
        let ejected_by = tally.counts[STATES.len() - 1];
        if ejected_by == 0 {
            continue;
        }
        if is_majority(ejected_by, of) {
            let (reason, _, _) = ejection_details(&tally);
            majority.insert(
                ep.addr.to_string(),
                MajorityEjection {
                    pod: ep.pod.clone(),
                    reason,
                    ejected_by,
                    of,
                },
            );
        }
        ejecting.push((ep, tally, ejected_by));
    }
    // The cap keeps the endpoints most sidecars eject: one pod ejecting many endpoints cannot
    // push a majority's ejection out of the list. Among equals, roster (address) order.
    ejecting.sort_by_key(|(_, _, by)| std::cmp::Reverse(*by));
    ejecting.truncate(MAX_EJECTIONS);
    let ejections = ejecting
        .into_iter()
        .map(|(ep, tally, ejected_by)| {
            let (reason, since, last_error) = ejection_details(&tally);
            Ejection {
                address: ep.addr.to_string(),
                pod: ep.pod.clone(),
                zone: ep.zone.clone(),
                reason,
                since: rfc3339(since),
                ejected_by,
                of,
                last_error,
            }
        })
        .collect();
    (counts, ejections, majority)
}

fn rfc3339(unix_ms: u64) -> String {
    i64::try_from(unix_ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

#[cfg(test)]
#[path = "aggregate_tests.rs"]
mod tests;
