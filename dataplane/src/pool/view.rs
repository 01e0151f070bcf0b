//! How a pool shows itself: the `/endpoints` view (the health machine's report of each endpoint
//! plus its live load), and one structured log line and metric update per health event.

use serde::Serialize;
use std::time::SystemTime;
use tokio::time::Instant;

use super::endpoint_set::EndpointSet;
use crate::health::machine::{EndpointReport, Event, State, wall_clock};
use crate::metrics::Metrics;

/// One pool in `/endpoints`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolView {
    pub name: String,
    pub panic: bool,
    pub endpoints: Vec<EndpointView>,
}

/// One endpoint in `/endpoints`: what the health machine knows, plus live load.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointView {
    #[serde(flatten)]
    pub health: EndpointReport,
    /// When the endpoint entered its state, RFC 3339 UTC.
    pub since: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub weight: u32,
    pub in_flight: u64,
    /// The balancer's recent error rate (over roughly the last 100 outcomes, 0–1). Above 5% it
    /// steers traffic away before the health machine has evidence enough to eject.
    pub recent_error_rate: f64,
    pub open_connections: usize,
}

pub(super) fn build(
    name: &str,
    panic: bool,
    reports: Vec<EndpointReport>,
    endpoints: &EndpointSet,
    now: Instant,
) -> PoolView {
    let wall_now = SystemTime::now();
    let mut views: Vec<EndpointView> = reports
        .into_iter()
        .map(|health| {
            let live = endpoints.get(&health.address);
            EndpointView {
                since: humantime::format_rfc3339_seconds(wall_clock(health.since, now, wall_now))
                    .to_string(),
                zone: live.and_then(|e| e.zone.as_deref().map(String::from)),
                weight: live.map_or(0, |e| e.load.weight()),
                in_flight: live.map_or(0, |e| e.load.outstanding()),
                recent_error_rate: live
                    .map_or(0.0, |e| (e.load.error_rate(now) * 1000.0).round() / 1000.0),
                open_connections: live.map_or(0, |e| e.upstream.open_connections()),
                health,
            }
        })
        .collect();
    views.sort_by_key(|v| v.health.address);
    PoolView {
        name: name.into(),
        panic,
        endpoints: views,
    }
}

/// One log line and the metric updates for a health event.
pub(super) fn log_event(pool: &str, event: &Event, metrics: &Metrics) {
    match event {
        Event::Transition {
            endpoint,
            from,
            to,
            reason,
        } => {
            let addr = endpoint.to_string();
            // One series per endpoint, for the state it is in: five per endpoint (one-hot) made
            // 25,000 series for a pool of 5,000, in the sidecar's memory and in Prometheus.
            let _ = metrics
                .endpoint_state
                .remove_label_values(&[pool, &addr, &from.to_string()]);
            metrics
                .endpoint_state
                .with_label_values(&[pool, &addr, &to.to_string()])
                .set(1);
            if *to == State::Ejected {
                metrics
                    .ejections
                    .with_label_values(&[pool, &addr, &reason.to_string()])
                    .inc();
                tracing::warn!(%pool, endpoint = %addr, %from, %to, %reason, "endpoint ejected");
            } else {
                tracing::info!(%pool, endpoint = %addr, %from, %to, %reason, "endpoint state changed");
            }
        }
        Event::PanicEntered => {
            metrics.panic.with_label_values(&[pool]).set(1);
            tracing::warn!(%pool, "panic mode: too few eligible endpoints, routing to all that are not draining");
        }
        Event::PanicExited => {
            metrics.panic.with_label_values(&[pool]).set(0);
            tracing::info!(%pool, "panic mode over");
        }
        Event::EjectionSuppressed { endpoint, reason } => {
            metrics
                .ejections_suppressed
                .with_label_values(&[pool, &endpoint.to_string()])
                .inc();
            tracing::warn!(%pool, endpoint = %endpoint, %reason, "ejection suppressed: pool at maxEjectionPercent");
        }
        Event::ProbesOverruled { endpoint } => {
            metrics.probe_overrules.with_label_values(&[pool]).inc();
            tracing::warn!(%pool, endpoint = %endpoint, "probes fail but real requests succeed: not ejecting on probes");
        }
    }
}
