//! The checks, by what they look at: `cluster` (before an install), `install` (the CRD and
//! the controller), `webhook` (the injector), `pool` (one BackendPool and its sidecars). Each
//! returns `Check`s; a check that cannot be carried out (no permission to look, nothing to
//! reach) is skipped with the reason, never counted as a pass.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::permissions::Permission;
use crate::report::Report;

pub mod cluster;
pub mod install;
pub mod pool;
pub mod webhook;

/// What the user asked for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Rollcall's namespace.
    pub namespace: String,
    /// Before an install: whether the cluster can take Rollcall.
    pub pre: bool,
    /// One pool to look at, `(namespace, name)`.
    pub pool: Option<(String, String)>,
    /// The controller's metrics port, e.g. after `kubectl port-forward` (else the API
    /// server's service proxy).
    pub controller_metrics: Option<String>,
    /// The webhook's address, e.g. after `kubectl port-forward` (else the service proxy).
    pub webhook_url: Option<String>,
    /// Sidecar admin addresses to read (else the API server's pod proxy).
    pub sidecars: Vec<String>,
}

/// What every check gets.
pub struct Context {
    pub client: Client,
    pub options: Options,
    /// Unix seconds, once for the whole run.
    pub now: i64,
}

/// Run what `options` ask for.
pub async fn run(ctx: &Context) -> Report {
    let mut report = Report::default();
    let reachable = cluster::api(ctx, &mut report).await;
    if !reachable {
        return report;
    }
    if ctx.options.pre {
        cluster::pre_install(ctx, &mut report).await;
        return report;
    }
    install::crd(ctx, &mut report).await;
    install::controller(ctx, &mut report).await;
    webhook::injector(ctx, &mut report).await;
    if let Some((namespace, name)) = &ctx.options.pool {
        pool::pool(ctx, namespace, name, &mut report).await;
    }
    report
}

fn attributes(p: &Permission, namespace: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some(p.verb.into()),
        group: Some(p.group.into()),
        resource: Some(p.resource.into()),
        subresource: (!p.subresource.is_empty()).then(|| p.subresource.into()),
        namespace: p.namespaced.then(|| namespace.into()),
        name: (!p.name.is_empty()).then(|| p.name.into()),
        ..Default::default()
    }
}

/// Whether `user` (or, with `None`, whoever runs this) may do `p`; `Err` when the review
/// itself could not be made.
pub async fn may(
    client: &Client,
    user: Option<&str>,
    p: &Permission,
    namespace: &str,
) -> Result<(bool, String), String> {
    let status = match user {
        None => {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(attributes(p, namespace)),
                    ..Default::default()
                },
                ..Default::default()
            };
            Api::<SelfSubjectAccessReview>::all(client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| e.to_string())?
                .status
        }
        Some(user) => {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.into()),
                    groups: Some(vec![
                        "system:serviceaccounts".into(),
                        "system:authenticated".into(),
                    ]),
                    resource_attributes: Some(attributes(p, namespace)),
                    ..Default::default()
                },
                ..Default::default()
            };
            Api::<SubjectAccessReview>::all(client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| e.to_string())?
                .status
        }
    };
    let status = status.ok_or("the review came back without a status")?;
    Ok((status.allowed, status.reason.unwrap_or_default()))
}

/// GET `path` through the API server (a service or pod proxy); `Err` with why not.
pub async fn through_api(client: &Client, path: &str) -> Result<String, String> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 5s".into()),
    }
}

/// Checks on many permissions as one: passed, or every missing one named.
pub async fn permissions(
    ctx: &Context,
    user: Option<&str>,
    list: &[Permission],
    namespace: &str,
) -> Result<Vec<String>, String> {
    let mut missing = Vec::new();
    for p in list {
        let (allowed, reason) = may(&ctx.client, user, p, namespace).await?;
        if !allowed {
            let why = if reason.is_empty() {
                String::new()
            } else {
                format!(" ({reason})")
            };
            missing.push(format!("{}{why}", p.describe(namespace)));
        }
    }
    Ok(missing)
}
