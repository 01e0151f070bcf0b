//! Pods and their tokens, as a cluster gives them to a sidecar: a ServiceAccount, a Pod that
//! runs as it, and a projected ServiceAccount token bound to that Pod (audience `rollcall`)
//! written to a file the sidecar reads. `TokenFile` keeps the file fresh the way the kubelet
//! does, replacing it with a new token once 80% of the old one's lifetime has passed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// The audience Rollcall's sidecar tokens are requested for.
pub const AUDIENCE: &str = "rollcall";

/// A Pod and who it runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodIdentity {
    pub namespace: String,
    pub service_account: String,
    pub pod: String,
    pub uid: String,
}

/// Create (or keep) ServiceAccount `namespace/service_account` and Pod `namespace/pod` running
/// as it.
pub async fn create_pod(
    client: &kube::Client,
    namespace: &str,
    service_account: &str,
    pod: &str,
) -> anyhow::Result<PodIdentity> {
    create_pod_on(client, namespace, service_account, pod, None).await
}

/// `create_pod`, scheduled on Node `node` (its tokens then name the node, as on Kubernetes
/// 1.30+).
pub async fn create_pod_on(
    client: &kube::Client,
    namespace: &str,
    service_account: &str,
    pod: &str,
    node: Option<&str>,
) -> anyhow::Result<PodIdentity> {
    let params = PatchParams::apply("rollcall-testkit").force();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    accounts
        .patch(
            service_account,
            &params,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": {"name": service_account, "namespace": namespace}})),
        )
        .await
        .with_context(|| format!("ServiceAccount {namespace}/{service_account}"))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut spec = json!({"serviceAccountName": service_account,
                          "containers": [{"name": "app", "image": "rollcall-demo/client"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let created = pods
        .patch(
            pod,
            &params,
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": namespace,
                             "labels": {"app.kubernetes.io/part-of": "rollcall-demo"}},
                "spec": spec,
            })),
        )
        .await
        .with_context(|| format!("Pod {namespace}/{pod}"))?;
    Ok(PodIdentity {
        namespace: namespace.into(),
        service_account: service_account.into(),
        pod: pod.into(),
        uid: created.metadata.uid.unwrap_or_default(),
    })
}

/// A token for `who`'s ServiceAccount, bound to its Pod, for `audience`, living `lifetime`.
pub async fn token(
    client: &kube::Client,
    who: &PodIdentity,
    audience: &str,
    lifetime: Duration,
) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &who.namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![audience.to_string()]),
            expiration_seconds: Some(i64::try_from(lifetime.as_secs())?),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(who.pod.clone()),
                uid: Some(who.uid.clone()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let answer: TokenRequest = accounts
        .create_subresource(
            "token",
            &who.service_account,
            &PostParams::default(),
            &request,
        )
        .await
        .with_context(|| format!("TokenRequest for {}/{}", who.namespace, who.pod))?;
    answer
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token in its status")
}

/// Write `contents` to `path` atomically (a new file renamed over the old one, as the kubelet
/// swaps a projected volume), so a reader sees the old token or the new one, never half.
pub fn write_atomically(path: &Path, contents: &str) -> anyhow::Result<()> {
    let fresh = path.with_extension("new");
    std::fs::write(&fresh, contents)?;
    std::fs::rename(&fresh, path)?;
    Ok(())
}

/// A projected token file, refreshed until dropped.
pub struct TokenFile {
    pub path: PathBuf,
    refresher: tokio::task::JoinHandle<()>,
}

impl TokenFile {
    /// Request a token for `who` (audience `rollcall`), write it to `path`, and replace it
    /// with a new one each time 80% of `lifetime` has passed.
    pub async fn project(
        client: &kube::Client,
        who: &PodIdentity,
        path: &Path,
        lifetime: Duration,
    ) -> anyhow::Result<Self> {
        write_atomically(path, &token(client, who, AUDIENCE, lifetime).await?)?;
        let (client, who, file) = (client.clone(), who.clone(), path.to_path_buf());
        let refresher = tokio::spawn(async move {
            loop {
                tokio::time::sleep(lifetime.mul_f64(0.8)).await;
                match token(&client, &who, AUDIENCE, lifetime).await {
                    Ok(t) => {
                        if let Err(e) = write_atomically(&file, &t) {
                            eprintln!("token file {}: {e:#}", file.display());
                        }
                    }
                    Err(e) => eprintln!("token refresh for {}: {e:#}", who.pod),
                }
            }
        });
        Ok(Self {
            path: path.to_path_buf(),
            refresher,
        })
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        self.refresher.abort();
    }
}
