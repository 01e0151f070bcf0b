//! The whole system, assembled the way a user would on a cluster: the local API server, the
//! CRD and the example resources of `deploy/demo/` applied through it (three local backends
//! behind Service `shop/web`, and BackendPool `shop/web`), controller replicas, and sidecars in
//! controller mode, each one a Pod of ServiceAccount `shop/client` presenting a projected
//! token the API server issued (as the injector mounts it), so the controller authenticates
//! them as on a cluster. The demo and the end-to-end tests both start from here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::Value;

use super::identity::{TokenFile, create_pod};
use super::{Controller, LocalApi, ServiceProxy, Sidecar};
use crate::{Behavior, TestBackend};

/// The CRD as checked in.
pub const CRD_YAML: &str = include_str!("../../../crds/backendpool.yaml");
/// The demo's resources, as a user reads them in `deploy/demo/`.
pub const NAMESPACE_YAML: &str = include_str!("../../../deploy/demo/namespace.yaml");
pub const SERVICE_YAML: &str = include_str!("../../../deploy/demo/service.yaml");
pub const SLICES_YAML: &str = include_str!("../../../deploy/demo/endpointslices.yaml");
pub const POOL_YAML: &str = include_str!("../../../deploy/demo/backendpool.yaml");

/// The pool every stack serves.
pub const NAMESPACE: &str = "shop";
pub const POOL: &str = "web";
/// The ServiceAccount the stack's sidecar pods run as.
pub const SERVICE_ACCOUNT: &str = "client";
/// How long each sidecar's token lives (refreshed at 80%, as the kubelet does).
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// How many of each part to start.
#[derive(Clone, Debug)]
pub struct StackOptions {
    pub sidecars: usize,
    pub controllers: usize,
    /// Flags for `rollcall-devcluster`.
    pub api_flags: Vec<String>,
    /// The BackendPool to apply instead of `deploy/demo/backendpool.yaml`.
    pub pool_yaml: Option<String>,
    /// Print each step as it happens (the demo).
    pub announce: bool,
    /// Flags for every `rollcall-controller run`.
    pub controller_flags: Vec<String>,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            sidecars: 2,
            controllers: 1,
            api_flags: Vec::new(),
            pool_yaml: None,
            announce: false,
            controller_flags: Vec::new(),
        }
    }
}

/// A running system.
pub struct Stack {
    pub dir: PathBuf,
    pub api: LocalApi,
    pub backends: Vec<TestBackend>,
    pub controllers: Vec<Controller>,
    /// The controller's Service: sidecars connect here and reach the ready replica.
    pub service: ServiceProxy,
    pub sidecars: Vec<Sidecar>,
    /// Each sidecar's projected token, kept fresh while the stack runs.
    pub tokens: Vec<TokenFile>,
}

/// The BackendPool kind, without depending on the controller crate.
pub fn pool_resource() -> ApiResource {
    ApiResource {
        group: "rollcall.dev".into(),
        version: "v1alpha1".into(),
        api_version: "rollcall.dev/v1alpha1".into(),
        kind: "BackendPool".into(),
        plural: "backendpools".into(),
    }
}

/// `endpointslices.yaml` with the backends' ports filled in.
pub fn slices_yaml(backends: &[TestBackend]) -> String {
    let mut yaml = SLICES_YAML.to_string();
    for (i, backend) in backends.iter().enumerate() {
        yaml = yaml.replace(
            &format!("{{{{B{}_PORT}}}}", i + 1),
            &backend.addr().port().to_string(),
        );
    }
    yaml
}

// === impl Stack ===

impl Stack {
    /// Start everything and wait until each sidecar routes to all three backends.
    pub async fn start(dir: &Path, options: StackOptions) -> anyhow::Result<Self> {
        let say = |line: String| {
            if options.announce {
                println!("{line}");
            }
        };
        let flags: Vec<&str> = options.api_flags.iter().map(String::as_str).collect();
        let api = LocalApi::start(dir, &flags).await?;
        say(format!(
            "local Kubernetes API server (rollcall-devcluster) on {}",
            api.url
        ));
        say(format!("export KUBECONFIG={}", api.kubeconfig.display()));
        let mut backends = Vec::new();
        for _ in 0..3 {
            backends.push(TestBackend::spawn(Behavior::ok()).await?);
        }
        let pool_yaml = options.pool_yaml.as_deref().unwrap_or(POOL_YAML);
        for (file, yaml) in [
            ("crds/backendpool.yaml", CRD_YAML.to_string()),
            ("deploy/demo/namespace.yaml", NAMESPACE_YAML.to_string()),
            ("deploy/demo/service.yaml", SERVICE_YAML.to_string()),
            ("deploy/demo/endpointslices.yaml", slices_yaml(&backends)),
            ("deploy/demo/backendpool.yaml", pool_yaml.to_string()),
        ] {
            let applied = api.apply(&yaml, "rollcall-demo").await?;
            let names: Vec<String> = applied
                .iter()
                .map(|o| {
                    let kind = o
                        .types
                        .as_ref()
                        .map_or("", |t| t.kind.as_str())
                        .to_lowercase();
                    format!("{kind}/{}", o.metadata.name.as_deref().unwrap_or(""))
                })
                .collect();
            say(format!("applied {file}: {}", names.join(", ")));
        }
        let mut controllers = Vec::new();
        for i in 0..options.controllers.max(1) {
            let identity = format!("rollcall-controller-{i}");
            controllers.push(
                Controller::start(&api.kubeconfig, &identity, dir, &options.controller_flags)
                    .await?,
            );
        }
        let service =
            ServiceProxy::start(controllers.iter().map(Controller::replica).collect()).await?;
        let mut stack = Self {
            dir: dir.to_path_buf(),
            api,
            backends,
            controllers,
            service,
            sidecars: Vec::new(),
            tokens: Vec::new(),
        };
        let leader = stack.wait_leader(Duration::from_secs(30)).await?;
        say(format!(
            "rollcall-controller leading, roster gRPC on {}, metrics on http://{}/metrics",
            stack.controllers[leader].grpc, stack.controllers[leader].metrics
        ));
        let url = stack.service.url();
        for i in 0..options.sidecars {
            let pod = format!("client-{}", (b'a' + i as u8) as char);
            let who = create_pod(&stack.api.client, NAMESPACE, SERVICE_ACCOUNT, &pod).await?;
            let token = TokenFile::project(
                &stack.api.client,
                &who,
                &dir.join(format!("{pod}.token")),
                TOKEN_LIFETIME,
            )
            .await?;
            let sidecar = Sidecar::controlled(
                &url,
                &format!("{NAMESPACE}/{POOL}"),
                &pod,
                Some(&token.path),
                dir,
            )
            .await?;
            stack.tokens.push(token);
            say(format!(
                "rollcall-sidecar {pod} (pod {NAMESPACE}/{pod}, ServiceAccount {NAMESPACE}/{SERVICE_ACCOUNT}): pool {NAMESPACE}/{POOL} on {}, admin http://{}/endpoints",
                sidecar.listen, sidecar.admin
            ));
            stack.sidecars.push(sidecar);
        }
        for i in 0..stack.sidecars.len() {
            stack.wait_routing(i, 3, Duration::from_secs(30)).await?;
        }
        Ok(stack)
    }

    /// Wait until one controller replica is ready (leading, synced); returns its index.
    pub async fn wait_leader(&mut self, within: Duration) -> anyhow::Result<usize> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let mut exited = Vec::new();
            for (i, c) in self.controllers.iter_mut().enumerate() {
                if let Some(reason) = c.process.exited() {
                    exited.push(reason);
                } else if c.is_ready().await {
                    return Ok(i);
                }
            }
            // A replica a test killed is expected to be gone; all of them is a failure.
            if exited.len() == self.controllers.len() {
                bail!("every controller exited:\n{}", exited.join("\n"));
            }
            if tokio::time::Instant::now() > deadline {
                let logs: Vec<String> = self
                    .controllers
                    .iter()
                    .map(|c| format!("{}:\n{}", c.identity, c.process.log_tail(20)))
                    .collect();
                bail!(
                    "no controller became ready within {within:?}; logs:\n{}",
                    logs.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The pool's API.
    pub fn pools(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.api.client.clone(), NAMESPACE, &pool_resource())
    }

    /// Wait until sidecar `i` knows `count` endpoints of the pool.
    pub async fn wait_routing(
        &mut self,
        i: usize,
        count: usize,
        within: Duration,
    ) -> anyhow::Result<()> {
        let name = format!("{NAMESPACE}/{POOL}");
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(pool) = self.sidecars[i].pool(&name).await
                && pool.endpoints.len() == count
            {
                return Ok(());
            }
            if let Some(reason) = self.sidecars[i].process.exited() {
                bail!("{reason}");
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "sidecar {} did not route to {count} endpoints within {within:?}; its log:\n{}",
                    self.sidecars[i].process.name,
                    self.sidecars[i].process.log_tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Watch the pool until its status satisfies `done`, or fail after `within` with the last
    /// status seen.
    pub async fn wait_status(
        &self,
        within: Duration,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let config = watcher::Config::default().fields(&format!("metadata.name={POOL}"));
        let mut stream = watcher(self.pools(), config).boxed();
        let mut last = Value::Null;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let event = match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(event)) => event,
                Ok(None) | Err(_) => {
                    bail!(
                        "the pool's status did not show {what} within {within:?}; last status: {last}"
                    )
                }
            };
            match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    let status = object.data.get("status").cloned().unwrap_or(Value::Null);
                    if done(&status) {
                        return Ok(status);
                    }
                    last = status;
                }
                Ok(_) => {}
                // The watcher retries by itself; a pause keeps a failing server from spinning it.
                Err(e) => {
                    tracing::debug!(error = %e, "pool watch error (retrying)");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// Merge-patch the pool's spec (a policy edit, as `kubectl patch --type=merge` does).
    pub async fn patch_pool(&self, patch: Value) -> anyhow::Result<()> {
        self.pools()
            .patch(POOL, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("patching the pool")?;
        Ok(())
    }

    /// The addresses of the backends, as rosters and statuses name them.
    pub fn backend_address(&self, i: usize) -> String {
        self.backends[i].addr().to_string()
    }
}
