//! What one endpoint change costs the controller before any sidecar hears of it: parsing the
//! changed EndpointSlice into the cache's form and computing the pool's roster from its cached
//! slices (`roster::compute`, as the controller does), and publishing the new version to
//! the hub (fingerprint, delta, addresses), for one pool of `ENDPOINTS` endpoints (default
//! 10,000) in slices of 100. Prints the median of each step over `ROUNDS` changes (default 200).
//!
//!   cargo run --release -p rollcall-controller --example roster_cost
//!   ENDPOINTS=1000 cargo run --release -p rollcall-controller --example roster_cost

use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::api::core::v1::{ObjectReference, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rollcall_api::policy::PoolPolicy;
use rollcall_api::roster::{PoolRef, PoolState};
use rollcall_controller::crd::{BackendPool, BackendPoolSpec, ServiceRef};
use rollcall_controller::roster::{CachedSlice, RosterHub, SERVICE_NAME_LABEL, compute};

const PER_SLICE: usize = 100;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Slice `i` of Service `web`; its first endpoint is ready or not.
fn slice(i: usize, first_ready: bool) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("web-{i}")),
            namespace: Some("shop".into()),
            labels: Some([(SERVICE_NAME_LABEL.to_string(), "web".to_string())].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        endpoints: Some(
            (0..PER_SLICE)
                .map(|j| Endpoint {
                    addresses: vec![format!("10.{}.{}.{}", i / 256, i % 256, j + 1)],
                    conditions: Some(EndpointConditions {
                        ready: Some(j != 0 || first_ready),
                        serving: None,
                        terminating: None,
                    }),
                    target_ref: Some(ObjectReference {
                        kind: Some("Pod".into()),
                        name: Some(format!("web-{i}-{j}-x7k2p")),
                        namespace: Some("shop".into()),
                        ..Default::default()
                    }),
                    zone: Some("zone-a".into()),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let endpoints = env_number("ENDPOINTS", 10_000).max(PER_SLICE);
    let rounds = env_number("ROUNDS", 200).max(1);
    let mut pool = BackendPool::new(
        "web",
        BackendPoolSpec {
            service: ServiceRef {
                name: "web".into(),
                port: IntOrString::String("http".into()),
            },
            policy: PoolPolicy::default(),
        },
    );
    pool.metadata.namespace = Some("shop".into());
    let service = Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let count = endpoints / PER_SLICE;
    let mut slices: Vec<CachedSlice> = (0..count)
        .map(|i| CachedSlice::from(&slice(i, true)))
        .collect();
    let hub = RosterHub::new();
    let key = PoolRef::new("shop", "web");
    let (mut computing, mut publishing) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        // Each round flips the readiness of one endpoint: a new version every time.
        let changed = round % count;
        let object = slice(changed, round % (2 * count) >= count);
        let started = Instant::now();
        slices[changed] = CachedSlice::from(&object);
        let Ok(roster) = compute(&pool, slices.iter(), Some(&service)) else {
            eprintln!("no roster");
            std::process::exit(1);
        };
        let computed = Instant::now();
        let version = hub.publish(&key, PoolState::Roster(roster), 1 + round as u64);
        let published = Instant::now();
        // The first round publishes the first version (no delta); it is not a change.
        if round > 0 && version.is_some() {
            computing.push(computed - started);
            publishing.push(published - computed);
        }
    }
    println!(
        "roster_cost: endpoints={} changes={} compute_ms={:.2} publish_ms={:.2}",
        count * PER_SLICE,
        computing.len(),
        median(computing).as_secs_f64() * 1000.0,
        median(publishing).as_secs_f64() * 1000.0,
    );
}
