//! What every conformance test shares: a devcluster started in-process with a kube-rs client
//! built from the kubeconfig it writes (as any user would), raw requests that keep the status
//! code, headers and body of every answer (errors included), a line reader for watch streams,
//! the fault switches, and the project's BackendPool CRD. Waits are for events; the timeouts
//! here only turn a hang into a failure.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use http::{HeaderMap, Method, Request};
use http_body_util::BodyExt;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use rollcall_devcluster::{DevCluster, Settings};
use serde_json::{Value, json};

/// Longest any single wait may take before the test fails (generous: a loaded 2-core box).
pub const GUARD: Duration = Duration::from_secs(30);

/// The project's CRD, as `kubectl apply` would read it.
pub const CRD_YAML: &str = include_str!("../../../crds/backendpool.yaml");
pub const POOLS: &str = "/apis/rollcall.dev/v1alpha1";

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A running server and clients for its admin user: `client` as kube-rs builds it (retrying
/// 429, 503 and 504 by itself), `raw` with retries off, so tests see every answer.
pub struct Fixture {
    pub server: DevCluster,
    pub client: Client,
    pub raw: Client,
    pub kubeconfig: PathBuf,
    pub dir: tempfile::TempDir,
}

/// One answer: status code, headers and the body (JSON when it parses, else a string).
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or("")
    }

    pub fn warnings(&self) -> Vec<String> {
        self.headers
            .get_all(http::header::WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect()
    }

    /// Panics with the whole answer unless the code is `code`.
    #[track_caller]
    pub fn expect(self, code: u16) -> Value {
        assert_eq!(self.code, code, "unexpected answer: {:#}", self.body);
        self.body
    }
}

pub async fn start() -> Fixture {
    start_with(Settings::default()).await
}

pub async fn start_with(settings: Settings) -> Fixture {
    let server = DevCluster::start("127.0.0.1:0".parse().expect("address"), settings)
        .await
        .expect("devcluster starts");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = server
        .write_kubeconfig(&dir.path().join("kubeconfig"))
        .expect("kubeconfig written");
    let client = client_for(&kubeconfig).await;
    let raw = raw_client_for(&kubeconfig).await;
    Fixture {
        server,
        client,
        raw,
        kubeconfig,
        dir,
    }
}

/// A client from a kubeconfig file, the way kube-rs users build one.
pub async fn client_for(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig reads");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    Client::try_from(config).expect("client")
}

/// The same without kube-rs's retries of 429, 503 and 504.
pub async fn raw_client_for(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig reads");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("kubeconfig is usable");
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// A client (retries off) that authenticates with `token` instead of the admin's.
pub async fn client_with_token(fx: &Fixture, token: &str) -> Client {
    let text = std::fs::read_to_string(&fx.kubeconfig).expect("kubeconfig reads");
    let admin = fx.server.cluster.settings.admin_token.clone();
    let path = fx.dir.path().join(format!("kubeconfig-{}", rand_suffix()));
    std::fs::write(&path, text.replace(&admin, token)).expect("kubeconfig written");
    raw_client_for(&path).await
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub fn crd() -> Value {
    serde_saphyr::from_str(CRD_YAML).expect("the CRD parses")
}

/// A minimal valid pool.
pub fn pool(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
           "metadata": {"name": name}, "spec": spec})
}

pub fn pools_path(namespace: &str) -> String {
    format!("{POOLS}/namespaces/{namespace}/backendpools")
}

impl Fixture {
    /// Send one request; every answer (errors included) comes back as a [`Reply`].
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        accept: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        self.send_as(&self.raw, method, path, content_type, accept, body)
            .await
    }

    pub async fn send_as(
        &self,
        client: &Client,
        method: Method,
        path: &str,
        content_type: &str,
        accept: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, content_type);
        if let Some(accept) = accept {
            request = request.header(http::header::ACCEPT, accept);
        }
        let request = request
            .body(kube::client::Body::from(body))
            .expect("request");
        let response = tokio::time::timeout(GUARD, client.send(request))
            .await
            .expect("answered in time")
            .expect("request sent");
        let code = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = tokio::time::timeout(GUARD, response.into_body().collect())
            .await
            .expect("body in time")
            .expect("body read")
            .to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Reply {
            code,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, "application/json", None, vec![])
            .await
    }

    pub async fn get_as(&self, path: &str, accept: &str) -> Reply {
        self.send(Method::GET, path, "application/json", Some(accept), vec![])
            .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(
            Method::POST,
            path,
            "application/json",
            None,
            body.to_string().into_bytes(),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Reply {
        self.send(
            Method::PUT,
            path,
            "application/json",
            None,
            body.to_string().into_bytes(),
        )
        .await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Reply {
        self.send(
            Method::PATCH,
            path,
            content_type,
            None,
            body.to_string().into_bytes(),
        )
        .await
    }

    /// Server-side apply of `body` (JSON is YAML) by `manager`.
    pub async fn apply(&self, path: &str, manager: &str, force: bool, body: &Value) -> Reply {
        let sep = if path.contains('?') { '&' } else { '?' };
        let uri = format!("{path}{sep}fieldManager={manager}&force={force}");
        self.patch(&uri, "application/apply-patch+yaml", body).await
    }

    pub async fn delete(&self, path: &str, body: Option<&Value>) -> Reply {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        self.send(Method::DELETE, path, "application/json", None, body)
            .await
    }

    /// Flip a fault switch (`POST /_devcluster/faults`).
    pub async fn fault(&self, switch: Value) {
        self.post("/_devcluster/faults", &switch).await.expect(200);
    }

    /// The newest resourceVersion the server handed out.
    pub async fn current_rv(&self) -> u64 {
        let info = self.get("/_devcluster/info").await.expect(200);
        info["resourceVersion"].as_u64().expect("a version")
    }

    pub async fn namespace(&self, name: &str) {
        self.post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await
        .expect(201);
    }

    pub async fn install_crd(&self) -> Value {
        self.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd(),
        )
        .await
        .expect(201)
    }

    /// Create a pool in `namespace`; the stored object comes back.
    pub async fn create_pool(&self, namespace: &str, name: &str, spec: Value) -> Value {
        self.post(&pools_path(namespace), &pool(name, spec))
            .await
            .expect(201)
    }

    /// Open a watch (`query` without the leading `?watch=1&`).
    pub async fn watch(&self, path: &str, query: &str) -> Watch {
        self.watch_as(path, query, None).await
    }

    pub async fn watch_as(&self, path: &str, query: &str, accept: Option<&str>) -> Watch {
        let uri = format!("{path}?watch=1&{query}");
        let mut request = Request::builder().method(Method::GET).uri(uri);
        if let Some(accept) = accept {
            request = request.header(http::header::ACCEPT, accept);
        }
        let request = request
            .body(kube::client::Body::from(Vec::new()))
            .expect("request");
        let response = tokio::time::timeout(GUARD, self.raw.send(request))
            .await
            .expect("watch answered in time")
            .expect("watch sent");
        assert_eq!(response.status().as_u16(), 200, "watch refused");
        Watch {
            body: response.into_body(),
            buffer: Vec::new(),
        }
    }
}

/// A watch response, read one JSON line at a time.
pub struct Watch {
    body: kube::client::Body,
    buffer: Vec<u8>,
}

impl Watch {
    /// The next event, or `None` once the server ended the stream.
    pub async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(GUARD, self.next_unguarded())
            .await
            .expect("a watch event in time")
    }

    async fn next_unguarded(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).expect("a JSON event"));
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.buffer.extend_from_slice(&data);
            }
        }
    }

    /// The next event that is not a BOOKMARK.
    pub async fn next_change(&mut self) -> Option<Value> {
        loop {
            let event = self.next().await?;
            if event["type"] != "BOOKMARK" {
                return Some(event);
            }
        }
    }

    /// Read until the server ends the stream; returns what came before the end.
    pub async fn until_closed(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

/// `TYPE name` of an event, for compact assertions.
pub fn summary(event: &Value) -> String {
    format!(
        "{} {}",
        event["type"].as_str().unwrap_or("?"),
        event["object"]["metadata"]["name"].as_str().unwrap_or("?")
    )
}

pub fn rv_of(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion")
}

/// A ConfigMap body.
pub fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// Poll `check` until it yields a value (for state that changes on the server's clock).
pub async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
