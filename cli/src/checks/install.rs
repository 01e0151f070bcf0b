//! After an install: the CRD (established, the version this plugin knows, the same schema),
//! and the controller (replicas ready, a leader holding a fresh Lease, its `/readyz`, and
//! RBAC that still grants everything it calls).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde_json::Value;

use super::{Context, permissions};
use crate::fetch;
use crate::permissions::CONTROLLER;
use crate::report::{Check, Report};

const CRD: &str = "rollcall-crd";
const CONTROLLER_CATEGORY: &str = "rollcall-controller";
const CRD_NAME: &str = "backendpools.rollcall.dev";
/// The CRD this plugin was built with.
const EMBEDDED_CRD: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../crds/backendpool.yaml"
));
/// The controller's Deployment, Service and Lease (fixed names, as the chart sets them).
pub const CONTROLLER_NAME: &str = "rollcall-controller";

/// `value` with every number as a float, so `1` and `1.0` (YAML and the API server's JSON
/// disagree on which) compare equal.
fn normalized(value: &Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| value.clone(), Value::Number),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The schemas of each version, by name.
fn schemas(crd: &Value) -> Vec<(String, Value)> {
    crd["spec"]["versions"]
        .as_array()
        .map(|versions| {
            versions
                .iter()
                .map(|v| {
                    (
                        v["name"].as_str().unwrap_or("").to_string(),
                        normalized(&v["schema"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub async fn crd(ctx: &Context, report: &mut Report) {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let installed = match crds.get_opt(CRD_NAME).await {
        Ok(Some(crd)) => crd,
        Ok(None) => {
            report.push(
                Check::fail(CRD, format!("{CRD_NAME} is installed"), "not found").hint(
                    "helm install rollcall charts/rollcall -n rollcall-system --create-namespace",
                ),
            );
            return;
        }
        Err(e) => {
            report.push(Check::skip(
                CRD,
                format!("{CRD_NAME} is installed"),
                e.to_string(),
            ));
            return;
        }
    };
    report.push(Check::ok(CRD, format!("{CRD_NAME} is installed")));
    let established = installed
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    report.push(if established {
        Check::ok(CRD, "it is established")
    } else {
        Check::fail(
            CRD,
            "it is established",
            "its Established condition is not True",
        )
    });
    let served: Vec<String> = installed
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    let ours: Value = match serde_saphyr::from_str(EMBEDDED_CRD) {
        Ok(v) => v,
        Err(e) => {
            report.push(Check::skip(
                CRD,
                "its schema is this plugin's",
                format!("embedded CRD: {e}"),
            ));
            return;
        }
    };
    let wanted: Vec<String> = schemas(&ours).into_iter().map(|(n, _)| n).collect();
    if wanted.iter().all(|w| served.contains(w)) {
        report.push(Check::ok(CRD, format!("it serves {}", wanted.join(", "))));
    } else {
        report.push(Check::fail(
            CRD,
            format!("it serves {}", wanted.join(", ")),
            format!("it serves {}", served.join(", ")),
        ));
    }
    // Compared as the API server sends it: the typed CRD would not round-trip every schema field.
    let theirs: Value = super::through_api(
        &ctx.client,
        &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"),
    )
    .await
    .ok()
    .and_then(|text| serde_json::from_str(&text).ok())
    .unwrap_or_default();
    if schemas(&theirs) == schemas(&ours) {
        report.push(Check::ok(
            CRD,
            "its schema is the one this kubectl-rollcall was built with",
        ));
    } else {
        report.push(
            Check::warn(
                CRD,
                "its schema is the one this kubectl-rollcall was built with",
                "the installed CRD differs (another Rollcall version)",
            )
            .hint("upgrade the chart, or use the kubectl-rollcall of the installed version"),
        );
    }
}

/// When the Lease was last renewed and for how long, by whom.
fn lease_facts(lease: &Lease) -> Option<(String, i64, i64)> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0.as_second();
    Some((
        holder,
        renewed,
        i64::from(spec.lease_duration_seconds.unwrap_or(0)),
    ))
}

pub async fn controller(ctx: &Context, report: &mut Report) {
    let ns = &ctx.options.namespace;
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    match deployments.get_opt(CONTROLLER_NAME).await {
        Ok(Some(d)) => {
            let wanted = d.spec.replicas.unwrap_or(1);
            let ready = d
                .status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0);
            let description = "a controller replica is ready";
            if ready >= 1 {
                report.push(Check::ok(CONTROLLER_CATEGORY, description).detail(format!(
                    "{ready} of {wanted} ready (a standby is ready when it can take over; the Service reaches the leader through the EndpointSlice rollcall-controller)"
                )));
            } else {
                report.push(
                    Check::fail(CONTROLLER_CATEGORY, description, format!("0 of {wanted} replicas ready"))
                        .hint(format!("kubectl -n {ns} describe pods -l app.kubernetes.io/name=rollcall-controller")),
                );
            }
        }
        Ok(None) => report.push(
            Check::fail(
                CONTROLLER_CATEGORY,
                "the controller is deployed",
                format!("no Deployment {ns}/{CONTROLLER_NAME}"),
            )
            .hint("helm install rollcall charts/rollcall -n rollcall-system --create-namespace"),
        ),
        Err(e) => report.push(Check::skip(
            CONTROLLER_CATEGORY,
            "the controller is deployed",
            e.to_string(),
        )),
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), ns);
    let description = "a controller leads (holds a fresh Lease)";
    match leases.get_opt(CONTROLLER_NAME).await {
        Ok(Some(lease)) => match lease_facts(&lease) {
            Some((holder, renewed, duration)) if renewed + duration >= ctx.now => {
                report.push(Check::ok(CONTROLLER_CATEGORY, description).detail(format!(
                    "{holder} leads, renewed {}s ago",
                    ctx.now - renewed
                )));
            }
            Some((holder, renewed, duration)) => report.push(
                Check::fail(
                    CONTROLLER_CATEGORY,
                    description,
                    format!(
                        "no controller is leading: {holder} last renewed the Lease {}s ago (it is valid for {duration}s)",
                        ctx.now - renewed
                    ),
                )
                .hint(format!("the controller is down or cannot reach the API server: kubectl -n {ns} logs deploy/{CONTROLLER_NAME}")),
            ),
            None => report.push(
                Check::fail(CONTROLLER_CATEGORY, description, "no controller holds the Lease")
                    .hint(format!("kubectl -n {ns} logs deploy/{CONTROLLER_NAME}")),
            ),
        },
        Ok(None) => report.push(
            Check::fail(CONTROLLER_CATEGORY, description, format!("no Lease {ns}/{CONTROLLER_NAME}: no controller ever led"))
                .hint(format!("kubectl -n {ns} logs deploy/{CONTROLLER_NAME}")),
        ),
        Err(e) => report.push(Check::skip(CONTROLLER_CATEGORY, description, e.to_string())),
    }
    readyz(ctx, report).await;
    let user = format!("system:serviceaccount:{ns}:{CONTROLLER_NAME}");
    let description = "its ServiceAccount may make every call the controller makes";
    match permissions(ctx, Some(&user), CONTROLLER, ns).await {
        Ok(missing) if missing.is_empty() => report.push(Check::ok(CONTROLLER_CATEGORY, description)),
        Ok(missing) => report.push(
            Check::fail(CONTROLLER_CATEGORY, description, format!("{CONTROLLER_NAME} may not:\n{}", missing.join("\n")))
                .hint("restore the chart's RBAC: helm upgrade rollcall charts/rollcall (or re-apply deploy/manifests)"),
        ),
        Err(e) => report.push(Check::skip(CONTROLLER_CATEGORY, description, format!("cannot ask (SubjectAccessReview): {e}"))),
    }
}

/// The leader's `/readyz`, directly or through the API server's service proxy.
async fn readyz(ctx: &Context, report: &mut Report) {
    let description = "the controller answers /readyz";
    if let Some(base) = &ctx.options.controller_metrics {
        let url = format!("{}/readyz", base.trim_end_matches('/'));
        match fetch::get(&url, None).await {
            Ok(f) if f.status == 200 => report.push(Check::ok(CONTROLLER_CATEGORY, description)),
            Ok(f) => report.push(Check::fail(
                CONTROLLER_CATEGORY,
                description,
                format!("{url} answered {}: {}", f.status, f.body.trim()),
            )),
            Err(e) => report.push(Check::fail(CONTROLLER_CATEGORY, description, e.to_string())),
        }
        return;
    }
    let path = format!(
        "/api/v1/namespaces/{}/services/{CONTROLLER_NAME}:metrics/proxy/readyz",
        ctx.options.namespace
    );
    match super::through_api(&ctx.client, &path).await {
        Ok(_) => report.push(Check::ok(CONTROLLER_CATEGORY, description)),
        Err(e) => report.push(
            Check::skip(CONTROLLER_CATEGORY, description, format!("not through the API server's service proxy: {e}"))
                .hint("kubectl -n rollcall-system port-forward svc/rollcall-controller 9300, then --controller-metrics http://127.0.0.1:9300"),
        ),
    }
}
