//! The local Kubernetes API server (`rollcall-devcluster`) as a child process, with a kube-rs
//! client from the kubeconfig it writes, `kubectl apply`-style server-side apply of YAML
//! documents, and its fault switches and request log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;
use tokio::process::Command;

use super::process::{Process, binary};

/// How long the server gets to write its kubeconfig.
const START_WITHIN: Duration = Duration::from_secs(20);

/// A running local API server.
pub struct LocalApi {
    pub process: Process,
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
    pub url: String,
}

/// A kube-rs client for the cluster a kubeconfig names.
pub async fn client_for(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let config = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .context("loading the kubeconfig")?;
    kube::Client::try_from(config).context("building a client")
}

// === impl LocalApi ===

impl LocalApi {
    /// Start `rollcall-devcluster` with `extra` flags, writing its kubeconfig and log to `dir`.
    pub async fn start(dir: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let kubeconfig = dir.join("kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let mut command = Command::new(binary("rollcall-devcluster")?);
        command
            .args(["--listen", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .args(extra)
            .env(
                "ROLLCALL_LOG",
                std::env::var("ROLLCALL_LOG").unwrap_or_else(|_| "info".into()),
            );
        let mut process = Process::spawn("devcluster", command, dir)?;
        let deadline = tokio::time::Instant::now() + START_WITHIN;
        while !kubeconfig.is_file() {
            if let Some(reason) = process.exited() {
                bail!("{reason}");
            }
            if tokio::time::Instant::now() > deadline {
                bail!("rollcall-devcluster wrote no kubeconfig within {START_WITHIN:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let client = client_for(&kubeconfig).await?;
        let url = std::fs::read_to_string(&kubeconfig)?
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: ").map(String::from))
            .unwrap_or_default();
        Ok(Self {
            process,
            kubeconfig,
            client,
            url,
        })
    }

    /// Flip a fault switch: `{"dropWatches": true}`, `{"fail": {"count": 5, "code": 500}}`,
    /// `{"pause": 2.0}`, `{"expire": true}`, `{"clear": true}`.
    pub async fn fault(&self, switch: Value) -> anyhow::Result<()> {
        let request = http::Request::post("/_devcluster/faults")
            .header("content-type", "application/json")
            .body(switch.to_string().into_bytes())?;
        self.client
            .request_text(request)
            .await
            .context("setting a fault switch")?;
        Ok(())
    }

    /// Every request the server has answered so far.
    pub async fn requests(&self) -> anyhow::Result<Vec<Value>> {
        let request = http::Request::get("/_devcluster/requests").body(Vec::new())?;
        let text = self.client.request_text(request).await?;
        Ok(serde_json::from_str(&text)?)
    }

    /// `kubectl apply --server-side` of every document in `yaml`, as `manager`.
    pub async fn apply(&self, yaml: &str, manager: &str) -> anyhow::Result<Vec<DynamicObject>> {
        apply(&self.client, yaml, manager).await
    }
}

/// Server-side apply every YAML document (force, as `kubectl apply --server-side
/// --force-conflicts` does), resolving each kind through discovery.
pub async fn apply(
    client: &kube::Client,
    yaml: &str,
    manager: &str,
) -> anyhow::Result<Vec<DynamicObject>> {
    let documents = super::parse_yaml(yaml).context("parsing YAML")?;
    let mut applied = Vec::new();
    for doc in documents.into_iter().filter(|d| d.is_object()) {
        let object: DynamicObject = serde_json::from_value(doc.clone())?;
        let types = object
            .types
            .clone()
            .context("a document without apiVersion and kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .with_context(|| format!("no {} {} is served", types.api_version, types.kind))?;
        let name = object
            .metadata
            .name
            .clone()
            .context("a document without a name")?;
        let api: Api<DynamicObject> = match (caps.scope, object.metadata.namespace.as_deref()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &resource),
            (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
        };
        let params = PatchParams::apply(manager).force();
        let result = api
            .patch(&name, &params, &Patch::Apply(&doc))
            .await
            .with_context(|| format!("applying {} {name}", types.kind))?;
        applied.push(result);
    }
    Ok(applied)
}
