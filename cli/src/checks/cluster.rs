//! The API server itself, and before an install: the APIs Rollcall uses, and whether the
//! installing user may create what the chart creates and grant what its roles grant.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;

use super::{Context, permissions};
use crate::permissions::{CONTROLLER, INJECTOR, INSTALL};
use crate::report::{Check, Report};

const CATEGORY: &str = "kubernetes-api";
const PRE: &str = "pre-install";
/// Native sidecars (init containers with restartPolicy: Always) are on by default from here.
const MINIMUM: (u32, u32) = (1, 29);

/// `v1.35.2+k3s1` → (1, 35).
pub fn minor_version(git_version: &str) -> Option<(u32, u32)> {
    let digits = |s: &str| {
        s.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .ok()
    };
    let mut parts = git_version.trim_start_matches('v').split('.');
    Some((digits(parts.next()?)?, digits(parts.next()?)?))
}

/// Whether the API server answers, and is new enough; false stops the run.
pub async fn api(ctx: &Context, report: &mut Report) -> bool {
    match ctx.client.apiserver_version().await {
        Ok(info) => {
            report.push(Check::ok(
                CATEGORY,
                format!("can reach the API server ({})", info.git_version),
            ));
            match minor_version(&info.git_version) {
                Some(v) if v >= MINIMUM => report.push(Check::ok(
                    CATEGORY,
                    format!("is running Kubernetes {}.{} or later", MINIMUM.0, MINIMUM.1),
                )),
                _ => report.push(
                    Check::fail(
                        CATEGORY,
                        format!("is running Kubernetes {}.{} or later", MINIMUM.0, MINIMUM.1),
                        format!("the API server is {}", info.git_version),
                    )
                    .hint("sidecars are injected as native sidecars, which need Kubernetes 1.29"),
                ),
            }
            true
        }
        Err(e) => {
            report.push(
                Check::fail(CATEGORY, "can reach the API server", e.to_string())
                    .hint("check KUBECONFIG and the current context: kubectl cluster-info"),
            );
            false
        }
    }
}

/// Whether the cluster can take Rollcall.
pub async fn pre_install(ctx: &Context, report: &mut Report) {
    let ns = &ctx.options.namespace;
    for (group_version, why) in [
        ("apiextensions.k8s.io/v1", "the BackendPool CRD"),
        ("admissionregistration.k8s.io/v1", "the injection webhook"),
        ("coordination.k8s.io/v1", "the controller's leader Lease"),
        ("discovery.k8s.io/v1", "EndpointSlices"),
        ("events.k8s.io/v1", "the pools' Events"),
        ("policy/v1", "PodDisruptionBudgets"),
    ] {
        let path = if group_version.contains('/') {
            format!("/apis/{group_version}")
        } else {
            format!("/api/{group_version}")
        };
        let description = format!("serves {group_version} ({why})");
        match super::through_api(&ctx.client, &path).await {
            Ok(_) => report.push(Check::ok(PRE, description)),
            Err(e) => report.push(Check::fail(PRE, description, e)),
        }
    }
    let steps: [(&str, &[crate::permissions::Permission]); 3] = [
        ("you may create what the chart creates", INSTALL),
        (
            "you hold every permission the controller's roles grant",
            CONTROLLER,
        ),
        (
            "you hold every permission the injector's roles grant",
            INJECTOR,
        ),
    ];
    for (description, list) in steps {
        match permissions(ctx, None, list, ns).await {
            Ok(missing) if missing.is_empty() => report.push(Check::ok(PRE, description)),
            Ok(missing) => report.push(
                Check::fail(PRE, description, format!("you may not:\n{}", missing.join("\n")))
                    .hint("install as a cluster administrator; RBAC refuses to grant what the granter lacks"),
            ),
            Err(e) => report.push(Check::skip(PRE, description, format!("cannot ask: {e}"))),
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    match crds.get_opt("backendpools.rollcall.dev").await {
        Ok(None) => report.push(Check::ok(PRE, "the BackendPool CRD is not installed yet")),
        Ok(Some(_)) => report.push(
            Check::warn(
                PRE,
                "the BackendPool CRD is not installed yet",
                "backendpools.rollcall.dev exists",
            )
            .hint("Rollcall is installed already: helm upgrade, then kubectl rollcall check"),
        ),
        Err(e) => report.push(Check::skip(
            PRE,
            "the BackendPool CRD is not installed yet",
            e.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_from_git_version() {
        assert_eq!(minor_version("v1.35.0"), Some((1, 35)));
        assert_eq!(minor_version("v1.29.4+k3s1"), Some((1, 29)));
        assert_eq!(minor_version("v1.30.0-gke.1"), Some((1, 30)));
        assert_eq!(minor_version("nonsense"), None);
        assert!(minor_version("v1.28.9").is_some_and(|v| v < MINIMUM));
    }
}
