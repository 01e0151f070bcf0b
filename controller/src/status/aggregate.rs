//! Status aggregation, pure: the roster the controller serves plus the latest report of every
//! sidecar become one `BackendPoolStatus`.
//!
//! - An endpoint's state is the one most sidecars report for it (ties go to the healthier
//!   state); an endpoint nobody reports on counts from its EndpointSlice conditions.
//! - `ejections` lists every endpoint at least one sidecar ejects: by how many of the sidecars
//!   reporting on the pool, the most common reason, since the earliest ejection, and the latest
//!   error seen. The list is capped so a status object cannot grow without bound, keeping the
//!   endpoints ejected by the most sidecars, so a minority cannot hide a majority's ejection.
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

use super::tally::{PoolTally, STATES};
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

pub fn aggregate(input: Input<'_>) -> BackendPoolStatus {
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
            let (counts, ejections) = endpoints(roster, input.reports);
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
    let panic = if panicking > 0 && panicking * 2 > reporting {
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
    status
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

fn endpoints(roster: &Roster, reports: &PoolTally) -> (EndpointCounts, Vec<Ejection>) {
    let of = reports.reporting();
    let mut counts = EndpointCounts {
        total: roster.endpoints.len() as u32,
        ..Default::default()
    };
    // Every endpoint some sidecar ejects, with how many do; the details are built only for
    // those listed.
    let mut ejecting = Vec::new();
    for ep in &roster.endpoints {
        let seen = reports.endpoint(&ep.addr).filter(|t| t.seen() > 0);
        let state = match &seen {
            None => match (ep.terminating, ep.ready || ep.serving) {
                (true, _) => Some(EndpointState::Draining),
                (false, true) => Some(EndpointState::Healthy),
                (false, false) => None,
            },
            Some(tally) => STATES
                .into_iter()
                .zip(tally.counts)
                .filter(|(_, n)| *n > 0)
                .max_by_key(|(s, n)| (*n, healthiness(*s)))
                .map(|(s, _)| s),
        };
        match state {
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
        if ejected_by > 0 {
            ejecting.push((ep, tally, ejected_by));
        }
    }
    // The cap keeps the endpoints most sidecars eject: one pod ejecting many endpoints cannot
    // push a majority's ejection out of the list. Among equals, roster (address) order.
    ejecting.sort_by_key(|(_, _, by)| std::cmp::Reverse(*by));
    ejecting.truncate(MAX_EJECTIONS);
    let mut ejections = Vec::with_capacity(ejecting.len());
    for (ep, tally, ejected_by) in ejecting {
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        let mut since = u64::MAX;
        let mut last_error: Option<(u64, &str)> = None;
        for e in tally.ejecting() {
            *reasons.entry(e.reason.as_str()).or_default() += 1;
            since = since.min(e.since_unix_ms);
            // The latest error; among equals the last reporter's, so the result is stable.
            if let Some(error) = &e.last_error
                && last_error.is_none_or(|(at, _)| e.since_unix_ms >= at)
            {
                last_error = Some((e.since_unix_ms, error));
            }
        }
        // Most common; among equals the alphabetically first, so the result is stable.
        let reason = reasons
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(r, _)| r.to_string())
            .unwrap_or_default();
        ejections.push(Ejection {
            address: ep.addr.to_string(),
            pod: ep.pod.clone(),
            zone: ep.zone.clone(),
            reason,
            since: rfc3339(if since == u64::MAX { 0 } else { since }),
            ejected_by,
            of,
            last_error: last_error.map(|(_, e)| e.to_string()),
        });
    }
    (counts, ejections)
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
