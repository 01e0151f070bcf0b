//! A whole connection through the fast engine, fed arbitrary bytes from both sides: a real
//! sidecar (`--http1-engine fast`, its own endpoint connections) on 127.0.0.1, in front of an
//! endpoint that answers every request with the input's answer bytes. The input is the answer
//! (behind a two-byte big-endian length) and then the client's bytes; the client sends them,
//! closes its side, and reads to the end. What must hold, whatever the bytes:
//!
//! - nothing in the sidecar panics (a panic in any of its tasks is counted);
//! - the exchange ends: the client's read reaches the end within `PATIENCE` (every timer the
//!   sidecar runs here is far shorter);
//! - every byte the endpoint reads is a sequence of whole, well-formed requests, the last of
//!   which may be cut short (a request cut when its client left): never a malformed head, a
//!   broken body framing, or bytes that are no request at all, which is what a smuggled or
//!   mis-framed request would look like to the endpoint. An upgrade's or CONNECT's connection is
//!   a tunnel after its head and is not read on.
//!
//! The endpoint answers the first request of each connection and then closes its side, so a
//! connection carries one exchange; a request the sidecar still writes on it before seeing the
//! close is read and checked too.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::h1::body::{BodyError, Decoder};
use crate::h1::head::{BodyLength, parse_request};
use crate::h1::read::{ReadError, Step, poll_body};
use crate::pool::{Http1Engine, Tuning};
use crate::sidecar::{self, Options, RunOptions, Sidecar};

/// The longest one exchange may take before it counts as a hang.
const PATIENCE: Duration = Duration::from_secs(20);

/// The sidecar and endpoint every input runs against, made on first use.
struct World {
    runtime: tokio::runtime::Runtime,
    listen: SocketAddr,
    answer: Arc<Mutex<Vec<u8>>>,
    /// What the endpoint read that no request could be, with the words why.
    violations: Arc<Mutex<Vec<String>>>,
    _sidecar: Sidecar,
}

static WORLD: OnceLock<World> = OnceLock::new();
/// Panics anywhere in the process since the world was made.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Run one input; `false` when it is too short to hold an answer's length.
pub fn connection(data: &[u8]) -> bool {
    let Some((length, rest)) = data.split_first_chunk::<2>() else {
        return false;
    };
    let answer_len = usize::from(u16::from_be_bytes(*length)).min(rest.len());
    let (answer, client) = rest.split_at(answer_len);
    let world = WORLD.get_or_init(World::make);
    *world.answer.lock() = answer.to_vec();
    let panics_before = PANICS.load(Ordering::SeqCst);
    let client = client.to_vec();
    let listen = world.listen;
    let ended = world
        .runtime
        .block_on(async move { tokio::time::timeout(PATIENCE, exchange(listen, &client)).await });
    assert!(
        ended.is_ok(),
        "the exchange did not end within {PATIENCE:?} (answer {:?}, client {:?})",
        String::from_utf8_lossy(answer),
        String::from_utf8_lossy(data)
    );
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        panics_before,
        "the sidecar panicked (answer {:?}, input {:?})",
        String::from_utf8_lossy(answer),
        String::from_utf8_lossy(data)
    );
    let violations = std::mem::take(&mut *world.violations.lock());
    assert!(
        violations.is_empty(),
        "the endpoint read what no request could be: {violations:?} (this input or the one \
         before it; answer {:?}, input {:?})",
        String::from_utf8_lossy(answer),
        String::from_utf8_lossy(data)
    );
    true
}

/// Send `client`, close the sending side, read to the end.
async fn exchange(listen: SocketAddr, client: &[u8]) {
    let Ok(mut stream) = TcpStream::connect(listen).await else {
        return;
    };
    let _ = stream.write_all(client).await;
    let _ = stream.shutdown().await;
    let mut sink = Vec::new();
    let _ = stream.read_to_end(&mut sink).await;
}

impl World {
    fn make() -> World {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let answer = Arc::new(Mutex::new(Vec::new()));
        let violations = Arc::new(Mutex::new(Vec::new()));
        let (sidecar, listen) = runtime.block_on(async {
            let endpoint = spawn_endpoint(Arc::clone(&answer), Arc::clone(&violations)).await;
            start_sidecar(endpoint).await
        });
        World {
            runtime,
            listen,
            answer,
            violations,
            _sidecar: sidecar,
        }
    }
}

/// A sidecar on the fast engine with one pool in front of `endpoint`: no health checks, no
/// ejection, no retries (each client request reaches the endpoint at most once), short timers.
async fn start_sidecar(endpoint: SocketAddr) -> (Sidecar, SocketAddr) {
    let path = std::env::temp_dir().join(format!(
        "rollcall-fuzz-connection-{}.yaml",
        std::process::id()
    ));
    let yaml = format!(
        "pools:\n- name: web\n  listen: 127.0.0.1:0\n  endpoints:\n  - address: \"{endpoint}\"\n  \
         policy: {{healthCheck: {{type: None}}, outlierDetection: {{consecutiveGatewayErrors: 0, \
         consecutive5xx: 0, errorRate: {{threshold: 0%}}}}, retries: {{attempts: 1}}, \
         timeouts: {{connect: 1s, request: 2s}}}}\n"
    );
    std::fs::write(&path, yaml).expect("write the sidecar's config");
    let tuning = Tuning {
        http1_engine: Http1Engine::Fast,
        request_body_idle: Duration::from_millis(300),
        response_body_idle: Duration::from_millis(300),
        ..Tuning::default()
    };
    let sidecar = sidecar::start_with(
        Options {
            config: path,
            admin_listen: ([127, 0, 0, 1], 0).into(),
            reload_interval: Duration::from_secs(3600),
        },
        RunOptions {
            tuning,
            ..RunOptions::default()
        },
    )
    .await
    .expect("the sidecar starts");
    let listen = sidecar.runtime.listen_addrs().await["web"];
    (sidecar, listen)
}

/// The endpoint: every connection read as a sequence of requests (`read_requests`).
async fn spawn_endpoint(
    answer: Arc<Mutex<Vec<u8>>>,
    violations: Arc<Mutex<Vec<String>>>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(read_requests(
                stream,
                Arc::clone(&answer),
                Arc::clone(&violations),
            ));
        }
    });
    addr
}

/// Read requests until the connection ends: the first is answered with the input's answer
/// and the endpoint's side closed; every one must be well-formed.
async fn read_requests(
    mut stream: TcpStream,
    answer: Arc<Mutex<Vec<u8>>>,
    violations: Arc<Mutex<Vec<String>>>,
) {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    let mut fields = Vec::new();
    let mut answered = false;
    loop {
        let head = loop {
            match parse_request(&buf, &mut fields) {
                Ok(Some(head)) => break head,
                Ok(None) => {}
                Err(error) => {
                    violations
                        .lock()
                        .push(format!("{error}: {:?}", String::from_utf8_lossy(&buf)));
                    return;
                }
            }
            match stream.read_buf(&mut buf).await {
                Ok(n) if n > 0 => {}
                // The connection ended: nothing, or a head cut short.
                _ => return,
            }
        };
        let _ = buf.split_to(head.len);
        if head.body != BodyLength::Empty {
            // The body as the fast engine reads one (`h1::read`): to its end, or refused.
            let mut decoder = Decoder::new(head.body);
            loop {
                let step =
                    std::future::poll_fn(|cx| poll_body(&mut stream, &mut buf, &mut decoder, cx))
                        .await;
                match step {
                    Step::Frame(_) => {}
                    Step::Ended(_) => break,
                    Step::Failed(ReadError::Framing(BodyError::Invalid(what))) => {
                        violations.lock().push(format!("request body: {what}"));
                        return;
                    }
                    // A body cut short: its request was cut when its client left.
                    Step::Failed(_) => return,
                }
            }
        }
        if !answered {
            answered = true;
            let answer = answer.lock().clone();
            if stream.write_all(&answer).await.is_err() || stream.shutdown().await.is_err() {
                return;
            }
        }
        if head.upgrade {
            // A tunnel's bytes, if it opened: not requests.
            return;
        }
    }
}
