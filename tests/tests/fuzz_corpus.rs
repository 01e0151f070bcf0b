//! Every fuzz target's committed corpus (`fuzz/corpus/<target>/`), replayed on stable: each
//! input that ever reached new code under libFuzzer, and every minimized crash once fixed,
//! stays a regression test here without nightly. The seeds the corpora started from are
//! built below from the real types; `ROLLCALL_FUZZ_WRITE_SEEDS=1` writes them out again.

use std::path::PathBuf;

use prost::Message;
use rollcall_api::proto::v1 as pb;

type Target = fn(&[u8]) -> bool;

/// The fuzz targets, as `fuzz/fuzz_targets/<name>.rs` names them, and what each calls.
const TARGETS: [(&str, Target); 8] = [
    ("policy", rollcall_api::fuzzing::policy),
    ("inbound", rollcall_api::fuzzing::inbound),
    ("report", rollcall_controller::fuzzing::report),
    ("grpc_framing", rollcall_controller::fuzzing::grpc_framing),
    ("roster_stream", rollcall_dataplane::fuzzing::roster_stream),
    ("config_file", rollcall_dataplane::fuzzing::config_file),
    ("h1_wire", rollcall_dataplane::h1::fuzzing::wire),
    (
        "h1_connection",
        rollcall_dataplane::h1::fuzzing::connection::connection,
    ),
];

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

#[test]
fn every_committed_input_passes_its_target() {
    let write = std::env::var_os("ROLLCALL_FUZZ_WRITE_SEEDS").is_some();
    for (target, run) in TARGETS {
        let seeds = seeds(target);
        assert!(!seeds.is_empty(), "{target} has no seeds");
        for (name, bytes) in &seeds {
            assert!(
                run(bytes),
                "{target}: seed {name} no longer gets past parsing"
            );
            if write {
                let dir = corpus_dir(target);
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
            }
        }
        let dir = corpus_dir(target);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (the corpus is committed)", dir.display()));
        let mut replayed = 0;
        for entry in entries {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            // A panic names the input, so a regression is one file to look at.
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(outcome.is_ok(), "{target}: {} fails", path.display());
            replayed += 1;
        }
        assert!(
            replayed >= seeds.len(),
            "{target}: {replayed} inputs in {}, fewer than its {} seeds",
            dir.display(),
            seeds.len()
        );
        eprintln!("{target}: {replayed} committed inputs replayed");
    }
}

/// The seeds of one target: small, valid instances of what it parses, so libFuzzer starts
/// from the structure instead of discovering protobuf or JSON from nothing.
fn seeds(target: &str) -> Vec<(&'static str, Vec<u8>)> {
    match target {
        "policy" => POLICIES
            .iter()
            .map(|(name, json)| (*name, json.as_bytes().to_vec()))
            .collect(),
        "inbound" => vec![
            ("watch", [vec![0], watch().encode_to_vec()].concat()),
            ("report", [vec![1], report().encode_to_vec()].concat()),
        ],
        "report" => vec![("report", report().encode_to_vec())],
        "grpc_framing" => {
            let message = report().encode_to_vec();
            let frame = |m: &[u8]| {
                let mut f = vec![0];
                f.extend_from_slice(&(m.len() as u32).to_be_bytes());
                f.extend_from_slice(m);
                f
            };
            vec![
                (
                    "two-frames",
                    [vec![255, 3], frame(&message), frame(&[])].concat(),
                ),
                ("over-limit", [vec![4, 7], frame(&message)].concat()),
            ]
        }
        "roster_stream" => {
            let messages = [(1, full()), (0, delta()), (0, unavailable())];
            let mut stream = Vec::new();
            for (flags, update) in messages {
                let bytes = [vec![flags], update.encode_to_vec()].concat();
                stream.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                stream.extend_from_slice(&bytes);
            }
            vec![("full-delta-unavailable", stream)]
        }
        "config_file" => vec![
            ("minimal", CONFIG_MINIMAL.as_bytes().to_vec()),
            ("two-pools", CONFIG_TWO_POOLS.as_bytes().to_vec()),
        ],
        "h1_wire" => H1_WIRE
            .iter()
            .map(|(name, side, bytes)| (*name, [&[*side][..], bytes.as_bytes()].concat()))
            .collect(),
        "h1_connection" => H1_CONNECTION
            .iter()
            .map(|(name, answer, client)| {
                let length = (answer.len() as u16).to_be_bytes();
                (
                    *name,
                    [&length[..], answer.as_bytes(), client.as_bytes()].concat(),
                )
            })
            .collect(),
        other => panic!("no seeds for {other}"),
    }
}

/// Client bytes (side 0) and endpoint bytes (side 1: a GET's answer, 3: a HEAD's).
const H1_WIRE: [(&str, u8, &str); 5] = [
    (
        "hop-by-hop",
        0,
        "GET http://b.example/p#f HTTP/1.1\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\nTE: trailers\r\nKeep-Alive: 5\r\nX-Forwarded-For: 1.1.1.1\r\n\r\n",
    ),
    (
        "pipelined",
        0,
        "GET /a?b=1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /c HTTP/1.0\r\n\r\n",
    ),
    (
        "chunked-request",
        0,
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
    ),
    (
        "chunked-response",
        1,
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
    ),
    (
        "head-response",
        3,
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
    ),
];

/// An endpoint's answer and a client's bytes, for a whole connection through the fast engine.
const H1_CONNECTION: [(&str, &str, &str); 6] = [
    (
        "keep-alive-pipelined",
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /c HTTP/1.0\r\n\r\n",
    ),
    (
        "chunked-both-ways",
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-t\r\n\r\n3;e=1\r\nabc\r\n0\r\nx-t: 1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
    ),
    (
        "interim-then-until-close",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\nuntil the close",
        "PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    ),
    (
        "smuggling-shapes",
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    ),
    (
        "answer-cut-short",
        "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npart",
        "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ),
    (
        "upgrade",
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\ntunnel bytes",
    ),
];

const POLICIES: [(&str, &str); 3] = [
    ("empty", "{}"),
    (
        "probes",
        r#"{"healthCheck":{"type":"HTTP","path":"/healthz","interval":"1s","timeout":"500ms","jitter":"10%","healthyThreshold":2,"unhealthyThreshold":3}}"#,
    ),
    (
        "everything",
        r#"{"protocol":"HTTP1","loadBalancer":{"algorithm":"RingHash","hashHeader":"x-user","zoneAware":{"enabled":true,"minHealthy":"70%"}},"healthCheck":{"type":"TCP","interval":"2s","timeout":"1s"},"outlierDetection":{"consecutiveGatewayErrors":5,"baseEjectionTime":"30s","maxEjectionPercent":50,"errorRate":{"threshold":"20%","window":"10s","minRequests":20},"probation":{"successes":5,"trafficShare":"10%"}},"panicThreshold":"50%","slowStart":{"window":"30s"},"draining":{"timeout":"20s"},"retries":{"attempts":3,"perTryTimeout":"1s","budget":{"percent":20,"minPerSecond":10},"retryOn":["connect-failure","5xx"]},"timeouts":{"connect":"1s","request":"15s"}}"#,
    ),
];

const CONFIG_MINIMAL: &str =
    "pools:\n- name: web\n  listen: 127.0.0.1:15001\n  endpoints:\n  - address: 127.0.0.1:8080\n";

const CONFIG_TWO_POOLS: &str = r#"
pools:
- name: web
  listen: 127.0.0.1:15001
  endpoints:
  - {address: "127.0.0.1:8080", weight: 3}
  - {address: "127.0.0.1:8081", terminating: true}
  policy: {healthCheck: {interval: 1s, timeout: 500ms}}
- name: api
  listen: "[::1]:15002"
  endpoints:
  - address: "[::1]:9090"
"#;

fn pool_ref(name: &str) -> Option<pb::PoolRef> {
    Some(pb::PoolRef {
        namespace: "shop".into(),
        name: name.into(),
    })
}

fn sidecar() -> Option<pb::SidecarIdentity> {
    Some(pb::SidecarIdentity {
        pod: "front-1".into(),
        namespace: "shop".into(),
        instance: "a1b2".into(),
    })
}

fn watch() -> pb::WatchRequest {
    pb::WatchRequest {
        fleet_health: false,
        sidecar: sidecar(),
        pools: vec![pool_ref("web").unwrap(), pool_ref("api").unwrap()],
        accepts_deltas: true,
        held: vec![pb::HeldRoster {
            pool: pool_ref("web"),
            version: 7,
            fingerprint: vec![1; 16],
        }],
    }
}

fn report() -> pb::HealthReport {
    let endpoint = |i: u8, state: pb::EndpointState, reason: &str| pb::EndpointHealth {
        probe: 0,
        ip: format!("10.0.0.{i}"),
        port: 8080,
        state: state.into(),
        reason: reason.into(),
        since_unix_ms: 1_700_000_000_000,
        times_ejected: u32::from(i),
        last_error: "connect: connection refused".into(),
        ejection_suppressed: false,
    };
    pb::HealthReport {
        sidecar: sidecar(),
        pools: vec![pb::PoolHealth {
            pool: pool_ref("web"),
            roster_version: 7,
            panic: false,
            endpoints: vec![
                endpoint(1, pb::EndpointState::Healthy, ""),
                endpoint(2, pb::EndpointState::Ejected, "ConsecutiveGatewayErrors"),
                endpoint(9, pb::EndpointState::Probation, ""),
            ],
            removed: vec![pb::EndpointAddress {
                ip: "10.0.0.3".into(),
                port: 8080,
            }],
            complete: true,
            ..Default::default()
        }],
    }
}

fn endpoint(i: u8) -> pb::Endpoint {
    pb::Endpoint {
        ip: format!("10.0.0.{i}"),
        port: 8080,
        pod: format!("web-{i}"),
        zone: "zone-a".into(),
        ready: true,
        serving: true,
        terminating: false,
        weight: 1,
    }
}

fn full() -> pb::RosterUpdate {
    pb::RosterUpdate {
        fleet: None,
        pool: pool_ref("web"),
        version: 1,
        state: Some(pb::roster_update::State::Roster(pb::PoolRoster {
            endpoints: (1..=3).map(endpoint).collect(),
            policy_json: POLICIES[1].1.into(),
            service: "shop/web:80".into(),
        })),
        continued: false,
        fingerprint: Vec::new(),
    }
}

fn delta() -> pb::RosterUpdate {
    pb::RosterUpdate {
        version: 2,
        state: Some(pb::roster_update::State::Delta(pb::RosterDelta {
            base_version: 1,
            upserted: vec![endpoint(4)],
            removed: vec![pb::EndpointAddress {
                ip: "10.0.0.1".into(),
                port: 8080,
            }],
            ..Default::default()
        })),
        ..full()
    }
}

fn unavailable() -> pb::RosterUpdate {
    pb::RosterUpdate {
        pool: pool_ref("api"),
        version: 1,
        state: Some(pb::roster_update::State::Unavailable(pb::Unavailable {
            reason: pb::unavailable::Reason::PoolNotFound.into(),
            message: "no such pool".into(),
        })),
        ..full()
    }
}
