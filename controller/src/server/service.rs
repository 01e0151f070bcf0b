//! The `rollcall.v1.Roster` service. `Watch` turns one watch receiver per requested pool into
//! a stream: the current state of every pool first (the snapshot), then every change, each
//! read from the channel when the transport can take it, so a slow reader skips to the newest
//! roster instead of queueing. A caller that accepts deltas gets each change as a delta
//! against what it holds, and large states in parts. `Report` converts each message at the edge and records it.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt, stream};
use prometheus::IntGauge;
use rollcall_api::edge;
use rollcall_api::proto::encoded::EncodedRosterUpdate;
use rollcall_api::proto::encoded::v1 as encoded;
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::{
    FleetHealth, HealthReport, HeldRoster, PoolRef, PoolState, UnavailableReason, WatchRequest,
    ZONE_METADATA,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::wrappers::WatchStream;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use super::admit::admit;
use super::gate::Admitted;
use super::grants;
use super::sessions::{PodKey, Sessions};
use super::{Caller, Limits, State};
use crate::fleet::{Fleet, Member, View};
use crate::roster::hub::Published;
use crate::status::{ReportStore, StreamId};
use crate::unix_ms;

/// What the controller says back on a `ReportChanges` stream.
pub type FeedbackStream = Pin<Box<dyn Stream<Item = Result<pb::ReportFeedback, Status>> + Send>>;

/// Feedback messages queued for one `ReportChanges` stream. A request that does not fit is
/// dropped together with the stream's history of the pool, so the next change asks again.
const FEEDBACK_QUEUE: usize = 16;

/// Roster updates as the wire carries them, encoded once per version and shared by every stream.
pub type UpdateStream = Pin<Box<dyn Stream<Item = Result<EncodedRosterUpdate, Status>> + Send>>;

#[derive(Clone, Debug)]
pub struct RosterService {
    state: State,
    limits: Limits,
}

/// Keeps the connected-sidecars gauge up while a Watch stream lives, and has the watched
/// pools' statuses recomputed when it starts and ends (their `sidecars.connected` changes).
struct Connected {
    gauge: IntGauge,
    reports: Arc<ReportStore>,
    pools: Vec<PoolRef>,
    /// The pod's Watch session, ended with the stream.
    session: Option<(Arc<Sessions>, PodKey, u64)>,
}

impl Connected {
    fn new(
        gauge: IntGauge,
        reports: Arc<ReportStore>,
        pools: Vec<PoolRef>,
        session: Option<(Arc<Sessions>, PodKey, u64)>,
    ) -> Self {
        gauge.inc();
        for p in &pools {
            reports.touch(p.clone());
        }
        Self {
            gauge,
            reports,
            pools,
            session,
        }
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        self.gauge.dec();
        if let Some((sessions, pod, id)) = self.session.take() {
            sessions.end_watch(&pod, id);
        }
        for p in self.pools.drain(..) {
            self.reports.touch(p);
        }
    }
}

/// What a replica that does not serve answers: at once and clearly, so the sidecar backs off
/// and reconnects (through the Service, to the replica that does) instead of hanging.
pub const NOT_SERVING: &str = "this rollcall-controller replica is not serving rosters (a standby, or its caches are not synced yet); reconnect";
/// What open streams end with when the controller shuts down.
pub const SHUTTING_DOWN: &str = "rollcall-controller is shutting down; reconnect";
/// What a stream ends with when the same pod opened a newer one.
pub const REPLACED: &str = "replaced by a newer stream from the same pod";

/// Who is calling: what the interceptor saw, with the identity the `gate` verified from the
/// request's headers. A request that did not pass the gate (which every served request does)
/// is refused rather than taken at its word.
fn admitted_caller<T>(req: &Request<T>) -> Result<(Caller, Admitted), Status> {
    let admitted = req
        .extensions()
        .get::<Admitted>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("the request was not admitted"))?;
    let mut caller = req
        .extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or_default();
    caller.verified = admitted.identity.clone();
    Ok((caller, admitted))
}

// === impl RosterService ===

impl RosterService {
    pub fn new(state: State, limits: Limits) -> Self {
        Self { state, limits }
    }

    fn serving(&self) -> Result<(), Status> {
        if self.state.hub.is_synced() && !*self.state.closing.borrow() {
            Ok(())
        } else {
            Err(Status::unavailable(NOT_SERVING))
        }
    }
}

#[tonic::async_trait]
impl encoded::roster_server::Roster for RosterService {
    type WatchStream = UpdateStream;

    #[tracing::instrument(skip_all, fields(sidecar))]
    async fn watch(
        &self,
        req: Request<pb::WatchRequest>,
    ) -> Result<Response<UpdateStream>, Status> {
        self.serving()?;
        let started = Instant::now();
        let (caller, admitted) = admitted_caller(&req)?;
        let request = WatchRequest::try_from(req.into_inner())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let sidecar = caller.attribute(Some(request.sidecar.clone()));
        tracing::Span::current().record("sidecar", tracing::field::display(&sidecar));
        let pools: BTreeSet<PoolRef> = request.pools.into_iter().collect();
        if pools.is_empty() {
            return Err(Status::invalid_argument(
                "a watch must name at least one pool",
            ));
        }
        if pools.len() > self.limits.max_pools_per_watch {
            return Err(Status::invalid_argument(format!(
                "a watch may name at most {} pools, got {}",
                self.limits.max_pools_per_watch,
                pools.len()
            )));
        }
        let mut allowed = BTreeSet::new();
        for pool in &pools {
            if self
                .state
                .authz
                .may_watch(caller.verified.as_ref(), pool)
                .await?
            {
                allowed.insert(pool.clone());
            }
        }
        if allowed.is_empty() {
            let who = caller.verified.as_ref().map_or_else(
                || sidecar.to_string(),
                |id| format!("ServiceAccount {}/{}", id.namespace, id.service_account),
            );
            return Err(Status::permission_denied(format!(
                "{who} may not watch {}: a pod may watch the BackendPools of its own namespace, \
                 and others only where RBAC lets its ServiceAccount get them",
                pools
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let now = unix_ms();
        let deltas = request.accepts_deltas;
        let mut snapshot = Vec::new();
        let mut receivers = Vec::new();
        for pool in &pools {
            if !allowed.contains(pool) {
                snapshot.push(forbidden(pool));
                continue;
            }
            let mut rx = self.state.hub.subscribe(pool, now);
            let mut sent = Sent::new(deltas);
            let held = request.held.iter().find(|h| &h.pool == pool);
            if let Some(p) = rx.borrow_and_update().as_ref() {
                snapshot.extend(sent.first(p, held));
            }
            receivers.push((rx, sent));
        }
        // Looked up after the snapshot is taken, so a slow API server delays its sending, not
        // what it holds; bounded by the lookup's own timeout.
        let zone = match &caller.verified {
            Some(id) => self.state.zones.zone_of(id).await,
            None => None,
        };
        tracing::debug!(
            pools = pools.len(),
            zone = zone.as_deref().unwrap_or(""),
            "watch started"
        );
        let metrics = self.state.metrics.clone();
        metrics
            .snapshot_seconds
            .observe(started.elapsed().as_secs_f64());
        // Fleet health: the pod takes part in each pool it may watch; its stream carries its
        // part of each pool's view whenever that changes.
        let mut memberships = Vec::new();
        let mut fleet_streams = Vec::new();
        if request.fleet_health
            && let Some(pod) = caller.pod(Some(&request.sidecar))
        {
            let stream_id = self.state.fleet.stream_id();
            for pool in &allowed {
                let member = Member {
                    pod: pod.clone(),
                    node: caller.verified.as_ref().and_then(|id| id.node.clone()),
                    zone: zone.clone(),
                };
                let (membership, rx) = self.state.fleet.join(pool, member, stream_id);
                memberships.push(membership);
                fleet_streams.push(fleet_messages(pool.clone(), pod.clone(), rx));
            }
        }
        // One Watch per pod: a newer one ends this one.
        let granted = grants::granted(caller.verified.as_ref(), &allowed);
        let session = caller
            .pod(Some(&request.sidecar))
            .map(|pod| (pod.clone(), self.state.sessions.begin_watch(pod, allowed)));
        let mut superseded = session.as_ref().map(|(_, s)| s.replaced.clone());
        let guard = Connected::new(
            metrics.connected_sidecars.clone(),
            self.state.reports.clone(),
            pools.into_iter().collect(),
            session.map(|(pod, s)| (self.state.sessions.clone(), pod, s.id)),
        );
        let latency = metrics.push_latency_seconds.clone();
        let rosters = receivers.into_iter().map(move |(rx, mut sent)| {
            let latency = latency.clone();
            WatchStream::from_changes(rx)
                .flat_map(move |slot| {
                    let out = slot.map_or_else(Vec::new, |p| {
                        latency.observe(p.at.elapsed().as_secs_f64());
                        sent.messages(&p)
                    });
                    stream::iter(out)
                })
                .boxed()
        });
        let changes = stream::select_all(rosters.chain(fleet_streams));
        let pushes = metrics.roster_pushes.clone();
        let state = self.state.clone();
        let closing = self.state.closing.clone();
        let replaced = superseded.clone();
        // Why the controller ended the stream itself, when it did (connection age, token).
        let ended_why: Arc<parking_lot::Mutex<Option<Status>>> = Arc::default();
        let ended = ended_why.clone();
        let withdrawn = grants::withdrawn(
            self.state.authz.clone(),
            caller.verified.clone(),
            granted,
            self.limits.grant_recheck,
        );
        let closed = async move {
            let newer = async {
                let ended = match &mut superseded {
                    Some(rx) => rx.wait_for(|r| *r).await.is_ok(),
                    None => false,
                };
                if !ended {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = state.closed() => {}
                () = newer => {}
                (status, why) = admitted.must_end() => {
                    state.metrics.streams_ended.with_label_values(&[why]).inc();
                    tracing::debug!(reason = why, "watch ended by the controller");
                    *ended.lock() = Some(status);
                }
                status = withdrawn => {
                    state.metrics.streams_ended.with_label_values(&[grants::WITHDRAWN]).inc();
                    *ended.lock() = Some(status);
                }
            }
        };
        let updates = stream::iter(snapshot)
            .chain(changes)
            .map(move |u| {
                let _alive = (&guard, &memberships);
                pushes.inc();
                Ok(u)
            })
            .take_until(closed)
            .chain(
                stream::once(async move {
                    // Only a shutdown or a newer session ends a stream with an error.
                    if let Some(status) = ended_why.lock().take() {
                        Some(Err(status))
                    } else if *closing.borrow() {
                        Some(Err(Status::unavailable(SHUTTING_DOWN)))
                    } else if replaced.as_ref().is_some_and(|r| *r.borrow()) {
                        Some(Err(Status::aborted(REPLACED)))
                    } else {
                        None
                    }
                })
                .filter_map(std::future::ready),
            );
        let mut response = Response::new(Box::pin(updates) as UpdateStream);
        if let Some(zone) = zone.and_then(|z| MetadataValue::try_from(z.as_str()).ok()) {
            response.metadata_mut().insert(ZONE_METADATA, zone);
        }
        Ok(response)
    }

    #[tracing::instrument(skip_all, fields(sidecar))]
    async fn report(
        &self,
        req: Request<Streaming<pb::HealthReport>>,
    ) -> Result<Response<pb::ReportSummary>, Status> {
        self.serving()?;
        let (caller, admitted) = admitted_caller(&req)?;
        let summary = self
            .ingest(caller, &admitted, req.into_inner(), None)
            .await?;
        Ok(Response::new(summary))
    }

    type ReportChangesStream = FeedbackStream;

    #[tracing::instrument(skip_all, fields(sidecar))]
    async fn report_changes(
        &self,
        req: Request<Streaming<pb::HealthReport>>,
    ) -> Result<Response<FeedbackStream>, Status> {
        self.serving()?;
        let (caller, admitted) = admitted_caller(&req)?;
        let (tx, rx) = mpsc::channel(FEEDBACK_QUEUE);
        let service = self.clone();
        let inbound = req.into_inner();
        let ingest = async move {
            let last = match service.ingest(caller, &admitted, inbound, Some(&tx)).await {
                Ok(summary) => Ok(pb::ReportFeedback {
                    resend: Vec::new(),
                    summary: Some(summary),
                }),
                Err(status) => Err(status),
            };
            // The sidecar may be gone already; nothing is owed to it then.
            let _ = tx.send(last).await;
        }
        .in_current_span();
        // The feedback stream drives the ingest itself, in the HTTP/2 stream's task, so the
        // ingest lives exactly as long as its stream. It ends once the ingest has ended
        // (dropping `tx`) and its last message is out; if the stream is reset or its connection
        // dies first, hyper drops it with the ingest (`OpenReport` cleans up).
        let ingest = stream::once(ingest).filter_map(|()| std::future::ready(None));
        let feedback = stream::select(ReceiverStream::new(rx), ingest);
        Ok(Response::new(Box::pin(feedback)))
    }
}

impl RosterService {
    /// Take a report stream to its end. With `feedback` it is a `ReportChanges` stream: its
    /// reports apply onto the previous ones, and a pool whose complete report is missing here
    /// is asked for again.
    async fn ingest(
        &self,
        caller: Caller,
        admitted: &Admitted,
        mut inbound: Streaming<pb::HealthReport>,
        feedback: Option<&mpsc::Sender<Result<pb::ReportFeedback, Status>>>,
    ) -> Result<pb::ReportSummary, Status> {
        let authenticated = caller.verified.is_some();
        let store = &self.state.reports;
        let pod = caller.pod(None);
        let mut open = OpenReport {
            store: store.clone(),
            sessions: self.state.sessions.clone(),
            id: store.open(caller.attribute(None), Instant::now()),
            session: pod.clone().map(|p| self.state.sessions.begin_report(p)),
            pod,
            fleet: self.state.fleet.clone(),
            votes: self.state.fleet.stream_id(),
        };
        let id = open.id;
        let mut named = caller.claimed.is_some() || authenticated;
        let mut summary = pb::ReportSummary::default();
        let result = loop {
            let newer = async {
                match &mut open.session {
                    Some(s) => s.superseded().await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                next = inbound.message() => next,
                () = self.state.closed() => break Err(Status::unavailable(SHUTTING_DOWN)),
                () = newer => break Err(Status::aborted(REPLACED)),
                (status, why) = admitted.must_end() => {
                    self.state.metrics.streams_ended.with_label_values(&[why]).inc();
                    break Err(status);
                }
            };
            let msg = match next {
                Ok(Some(msg)) => msg,
                Ok(None) => break Ok(()),
                Err(status) => break Err(status),
            };
            let report = match HealthReport::try_from(msg) {
                Ok(r) => r,
                Err(e) => {
                    self.count("invalid", &mut summary.ignored);
                    break Err(Status::invalid_argument(e.to_string()));
                }
            };
            if !named && let Some(sidecar) = report.sidecar.clone() {
                tracing::Span::current().record("sidecar", tracing::field::display(&sidecar));
                if open.pod.is_none()
                    && let Some(p) = caller.pod(Some(&sidecar))
                {
                    open.session = Some(self.state.sessions.begin_report(p.clone()));
                    open.pod = Some(p);
                }
                store.identify(id, caller.attribute(Some(sidecar)));
                named = true;
            }
            let now = Instant::now();
            // A pool the pod's Watch no longer names stops counting now, on either RPC.
            if authenticated && let Some(pod) = &open.pod {
                let sessions = &self.state.sessions;
                let dropped = store.retain(id, |p| sessions.watches(pod, p));
                if dropped > 0 {
                    tracing::debug!(
                        dropped,
                        "forgot reports on pools this pod no longer watches"
                    );
                }
            }
            if report.pools.is_empty() {
                store.heartbeat(id, now);
                self.count("accepted", &mut summary.accepted);
                continue;
            }
            for mut pool in report.pools {
                // An authenticated pod reports only on pools its current Watch names.
                let watched = !authenticated
                    || open
                        .pod
                        .as_ref()
                        .is_some_and(|p| self.state.sessions.watches(p, &pool.pool));
                // Reports are kept only for pools served with a roster, and only about its
                // endpoints.
                let published = self.state.hub.current(&pool.pool);
                match published {
                    Some(published)
                        if watched && matches!(published.update.state, PoolState::Roster(_)) =>
                    {
                        if admit(&mut pool, &published.addresses) > 0 {
                            self.count("trimmed", &mut summary.ignored);
                        }
                        if let Some(pod) = &open.pod {
                            self.state.fleet.record(pod, open.votes, &pool);
                        }
                        match feedback {
                            None => store.record(id, pool, now),
                            Some(feedback) => {
                                let name = pool.pool.clone();
                                if store.record_changes(id, pool, now) {
                                    ask_complete(feedback, store, id, name);
                                }
                            }
                        }
                        self.count("accepted", &mut summary.accepted);
                    }
                    _ => {
                        // Not watched, or not served with a roster: what the stream said of
                        // the pool before no longer counts either.
                        store.heartbeat(id, now);
                        store.forget(id, &pool.pool);
                        self.count("ignored", &mut summary.ignored);
                    }
                }
            }
        };
        drop(open);
        match result {
            Ok(()) => Ok(summary),
            Err(status) => {
                tracing::debug!(%status, "report stream failed");
                Err(status)
            }
        }
    }

    fn count(&self, result: &str, n: &mut u64) {
        *n += 1;
        self.state
            .metrics
            .reports
            .with_label_values(&[result])
            .inc();
    }
}

/// A report stream's place in the store and its pod's report session, given up however the
/// stream ends: at its end, on an error, or dropped mid-way (hyper drops a stream's future when
/// the stream is reset or its connection dies), so a gone sidecar is never counted on.
struct OpenReport {
    store: Arc<ReportStore>,
    sessions: Arc<Sessions>,
    id: StreamId,
    pod: Option<PodKey>,
    session: Option<super::sessions::Session>,
    /// Where its fleet-health verdicts count, and under which stream id.
    fleet: Arc<Fleet>,
    votes: u64,
}

impl Drop for OpenReport {
    fn drop(&mut self) {
        self.store.close(self.id);
        if let Some(pod) = &self.pod {
            self.fleet.forget_votes(pod, self.votes);
        }
        if let (Some(pod), Some(session)) = (&self.pod, &self.session) {
            self.sessions.end_report(pod, session.id);
        }
    }
}

/// What one stream has sent of one pool, so each new version goes the cheapest way the
/// caller understands: a delta when it holds the version the delta applies to, the complete
/// state (in parts) when it does not, one complete message to a caller without deltas.
struct Sent {
    deltas: bool,
    version: Option<u64>,
}

impl Sent {
    fn new(deltas: bool) -> Self {
        Self {
            deltas,
            version: None,
        }
    }

    /// The snapshot of a pool: nothing or an empty delta when the caller already holds its
    /// current roster (`held` from an earlier stream, same fingerprint), else its messages.
    fn first(&mut self, p: &Published, held: Option<&HeldRoster>) -> Vec<EncodedRosterUpdate> {
        let resumable = held.filter(|h| {
            self.deltas
                && !p.fingerprint.is_empty()
                && h.fingerprint == p.fingerprint
                && h.version <= p.update.version
        });
        let Some(held) = resumable else {
            return self.messages(p);
        };
        self.version = Some(p.update.version);
        if held.version == p.update.version {
            return Vec::new();
        }
        let pool = (&p.update.pool).into();
        vec![EncodedRosterUpdate::new(
            &rollcall_api::delta::resume_message(
                &pool,
                p.update.version,
                held.version,
                &p.fingerprint,
            ),
        )]
    }

    fn messages(&mut self, p: &Published) -> Vec<EncodedRosterUpdate> {
        let held = self.version.replace(p.update.version);
        if !self.deltas {
            return vec![p.wire().clone()];
        }
        match &p.delta {
            Some(delta) if held == Some(delta.base) => vec![delta.wire.clone()],
            _ => p.parts().to_vec(),
        }
    }
}

/// Ask a `ReportChanges` sidecar for a complete report of `pool`.
fn ask_complete(
    feedback: &mpsc::Sender<Result<pb::ReportFeedback, Status>>,
    store: &ReportStore,
    id: StreamId,
    pool: PoolRef,
) {
    let request = pb::ReportFeedback {
        resend: vec![(&pool).into()],
        summary: None,
    };
    if feedback.try_send(Ok(request)).is_err() {
        store.forget(id, &pool);
    }
}

/// One pool's fleet view as `pod`'s messages: its `FleetHealth` each time that changes.
fn fleet_messages(
    pool: PoolRef,
    pod: PodKey,
    rx: tokio::sync::watch::Receiver<Option<Arc<View>>>,
) -> Pin<Box<dyn Stream<Item = EncodedRosterUpdate> + Send>> {
    let mut last: Option<FleetHealth> = None;
    WatchStream::new(rx)
        .filter_map(move |view| {
            let message = view.and_then(|view| {
                let health = view.health_for(&pod);
                if last.as_ref() == Some(&health) {
                    return None;
                }
                let message = edge::fleet_update(&pool, view.roster_version, &health);
                last = Some(health);
                Some(EncodedRosterUpdate::new(&message))
            });
            std::future::ready(message)
        })
        .boxed()
}

fn forbidden(pool: &PoolRef) -> EncodedRosterUpdate {
    EncodedRosterUpdate::new(&pb::RosterUpdate {
        pool: Some(pool.into()),
        version: 0,
        state: Some(pb::roster_update::State::Unavailable(pb::Unavailable {
            reason: pb::unavailable::Reason::from(UnavailableReason::NotPermitted).into(),
            message: format!(
                "this sidecar may not watch {pool}: RBAC does not let its ServiceAccount get that \
                 BackendPool"
            ),
        })),
        continued: false,
        fingerprint: Vec::new(),
        fleet: None,
    })
}

#[cfg(test)]
mod tests {
    use rollcall_api::delta::{Assembled, Assembler};
    use rollcall_api::policy::PoolPolicy;
    use rollcall_api::roster::{Endpoint, Roster, RosterUpdate};

    use super::*;
    use crate::roster::hub::RosterHub;

    fn roster(weights: &[u32]) -> PoolState {
        PoolState::Roster(Roster {
            endpoints: weights
                .iter()
                .enumerate()
                .map(|(i, w)| Endpoint {
                    weight: *w,
                    ..Endpoint::serving(format!("10.0.0.{}:80", i + 1).parse().unwrap())
                })
                .collect(),
            policy: PoolPolicy::default(),
            service: "shop/web:http".into(),
        })
    }

    fn decode(m: &EncodedRosterUpdate) -> pb::RosterUpdate {
        prost::Message::decode(m.bytes().clone()).unwrap()
    }

    fn is_delta(m: &EncodedRosterUpdate) -> bool {
        matches!(decode(m).state, Some(pb::roster_update::State::Delta(_)))
    }

    #[test]
    fn each_version_goes_as_a_delta_only_to_a_stream_that_holds_its_base() {
        let hub = RosterHub::new();
        hub.mark_synced(1, []);
        let web = PoolRef::new("shop", "web");
        hub.publish(&web, roster(&[1, 1, 1]), 10).unwrap();
        let p1 = hub.current(&web).unwrap();
        let (mut current, mut behind, mut legacy) =
            (Sent::new(true), Sent::new(true), Sent::new(false));
        let mut asm = Assembler::new();
        for m in current.messages(&p1) {
            asm.accept(decode(&m)).unwrap();
        }
        behind.messages(&p1);
        legacy.messages(&p1);

        hub.publish(&web, roster(&[1, 2, 1]), 10).unwrap();
        let p2 = hub.current(&web).unwrap();
        let sent = current.messages(&p2);
        assert!(sent.len() == 1 && is_delta(&sent[0]));
        let Assembled::Complete(got) = asm.accept(decode(&sent[0])).unwrap() else {
            panic!("a delta completes the state");
        };
        assert_eq!(
            RosterUpdate::try_from(got).unwrap().state,
            roster(&[1, 2, 1])
        );
        // `behind` never took version 2 (the watch channel skipped it).
        hub.publish(&web, roster(&[1, 2, 3]), 10).unwrap();
        let p3 = hub.current(&web).unwrap();
        assert!(is_delta(&current.messages(&p3)[0]));
        let whole = behind.messages(&p3);
        assert!(whole.len() == 1 && !is_delta(&whole[0]));
        assert_eq!(whole[0], *p3.wire());
        // A caller without deltas always gets the one complete message.
        assert_eq!(legacy.messages(&p3), vec![p3.wire().clone()]);
        // Unavailable and back: no delta across it.
        hub.publish(
            &web,
            PoolState::Unavailable {
                reason: UnavailableReason::ServiceNotFound,
                message: "gone".into(),
            },
            10,
        )
        .unwrap();
        current.messages(&hub.current(&web).unwrap());
        hub.publish(&web, roster(&[1]), 10).unwrap();
        let back = current.messages(&hub.current(&web).unwrap());
        assert!(!is_delta(&back[0]));
    }

    #[test]
    fn a_caller_holding_the_current_roster_gets_no_snapshot_and_then_deltas() {
        let hub = RosterHub::new();
        hub.mark_synced(1, []);
        let web = PoolRef::new("shop", "web");
        hub.publish(&web, roster(&[1, 1]), 10).unwrap();
        let p = hub.current(&web).unwrap();
        let held = HeldRoster {
            pool: web.clone(),
            version: p.update.version,
            fingerprint: p.fingerprint.clone(),
        };
        let mut sent = Sent::new(true);
        assert!(sent.first(&p, Some(&held)).is_empty(), "it has it already");
        hub.publish(&web, roster(&[1, 2]), 10).unwrap();
        let next = sent.messages(&hub.current(&web).unwrap());
        assert!(
            next.len() == 1 && is_delta(&next[0]),
            "the next change is a delta"
        );
        // A caller without deltas cannot resume: it always gets the complete roster.
        let mut legacy = Sent::new(false);
        let p = hub.current(&web).unwrap();
        let held = HeldRoster {
            version: p.update.version,
            fingerprint: p.fingerprint.clone(),
            ..held
        };
        assert_eq!(legacy.first(&p, Some(&held)), vec![p.wire().clone()]);
    }
}
