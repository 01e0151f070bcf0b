//! One pool: its status (current, Ready, not in panic, the sidecars that watch it and those
//! that report, its ejections and why), the controller's view from its metrics, and each
//! sidecar's own view (its `/endpoints` and its roster counters) where a sidecar's admin port
//! can be reached: given with `--sidecar`, or through the API server's pod proxy.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use super::Context;
use crate::fetch;
use crate::prom;
use crate::report::{Check, Report};

const CATEGORY: &str = "pool";

fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

pub async fn pool(ctx: &Context, namespace: &str, name: &str, report: &mut Report) {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "rollcall.dev",
        "v1alpha1",
        "BackendPool",
    ));
    let pools: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    let key = format!("{namespace}/{name}");
    let pool = match pools.get_opt(name).await {
        Ok(Some(pool)) => pool,
        Ok(None) => {
            report.push(
                Check::fail(CATEGORY, format!("pool {key} exists"), "not found")
                    .hint(format!("kubectl get bp -n {namespace}")),
            );
            return;
        }
        Err(e) => {
            report.push(Check::fail(
                CATEGORY,
                format!("pool {key} exists"),
                e.to_string(),
            ));
            return;
        }
    };
    report.push(Check::ok(CATEGORY, format!("pool {key} exists")));
    let status = pool.data.get("status").cloned().unwrap_or(Value::Null);
    if status.is_null() {
        report.push(
            Check::fail(
                CATEGORY,
                "the controller has written its status",
                "no status yet",
            )
            .hint("is a controller leading? see the rollcall-controller checks above"),
        );
        return;
    }
    let generation = pool.metadata.generation.unwrap_or(0);
    let observed = status["observedGeneration"].as_i64().unwrap_or(0);
    report.push(if observed == generation {
        Check::ok(CATEGORY, "its status describes the current spec")
    } else {
        Check::warn(
            CATEGORY,
            "its status describes the current spec",
            format!("status is of generation {observed}, the spec is {generation}"),
        )
    });
    match condition(&status, "Ready") {
        Some(c) if c["status"] == "True" => {
            report.push(Check::ok(CATEGORY, "it is Ready").detail(text(&c["message"]).to_string()))
        }
        Some(c) => report.push(
            Check::fail(
                CATEGORY,
                "it is Ready",
                format!("{}: {}", text(&c["reason"]), text(&c["message"])),
            )
            .hint(format!("kubectl describe bp {name} -n {namespace}")),
        ),
        None => report.push(Check::fail(CATEGORY, "it is Ready", "no Ready condition")),
    }
    if let Some(c) = condition(&status, "Panic").filter(|c| c["status"] == "True") {
        report.push(
            Check::fail(CATEGORY, "it is not in panic mode", format!("{}: {}", text(&c["reason"]), text(&c["message"])))
                .hint("too few endpoints are eligible; sidecars route to all of them, failing ones included"),
        );
    } else {
        report.push(Check::ok(CATEGORY, "it is not in panic mode"));
    }
    if let Some(c) = condition(&status, "Degraded").filter(|c| c["status"] == "True") {
        report.push(Check::warn(
            CATEGORY,
            "it is not degraded",
            format!("{}: {}", text(&c["reason"]), text(&c["message"])),
        ));
    }
    let connected = status["sidecars"]["connected"].as_u64().unwrap_or(0);
    let reporting = status["sidecars"]["reporting"].as_u64().unwrap_or(0);
    let description = "its sidecars are connected and reporting";
    report.push(if connected == 0 && reporting == 0 {
        Check::warn(CATEGORY, description, "no sidecar watches this pool").hint(format!(
            "annotate the client pods: rollcall.dev/pools: \"{key}=15001\" (in a namespace labelled rollcall.dev/inject=enabled)"
        ))
    } else if reporting < connected {
        Check::warn(CATEGORY, description, format!("{connected} connected, only {reporting} reporting"))
    } else {
        Check::ok(CATEGORY, description).detail(format!("{connected} connected, {reporting} reporting"))
    });
    let endpoints = &status["endpoints"];
    let ejections = status["ejections"].as_array().cloned().unwrap_or_default();
    let description = "no endpoint is ejected";
    if ejections.is_empty() {
        report.push(Check::ok(CATEGORY, description).detail(format!(
            "{} of {} endpoints healthy",
            endpoints["healthy"].as_u64().unwrap_or(0),
            endpoints["total"].as_u64().unwrap_or(0)
        )));
    } else {
        let lines: Vec<String> = ejections
            .iter()
            .map(|e| {
                let pod = e["pod"]
                    .as_str()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default();
                let error = e["lastError"]
                    .as_str()
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default();
                format!(
                    "{}{pod} ejected by {} of {} sidecars since {}: {}{error}",
                    text(&e["address"]),
                    e["ejectedBy"],
                    e["of"],
                    text(&e["since"]),
                    text(&e["reason"])
                )
            })
            .collect();
        report.push(
            Check::warn(CATEGORY, description, lines.join("\n"))
                .hint("the endpoints' backends are failing; see the reasons"),
        );
    }
    controller_view(ctx, report).await;
    sidecars(ctx, &key, report).await;
}

/// What the controller's metrics say (connected streams, reports it could not use).
async fn controller_view(ctx: &Context, report: &mut Report) {
    let text = match &ctx.options.controller_metrics {
        Some(base) => {
            match fetch::get(&format!("{}/metrics", base.trim_end_matches('/')), None).await {
                Ok(f) if f.status == 200 => Ok(f.body),
                Ok(f) => Err(format!("answered {}", f.status)),
                Err(e) => Err(e.to_string()),
            }
        }
        None => {
            let path = format!(
                "/api/v1/namespaces/{}/services/rollcall-controller:metrics/proxy/metrics",
                ctx.options.namespace
            );
            super::through_api(&ctx.client, &path).await
        }
    };
    let description = "the controller accepts the sidecars' reports";
    match text {
        Ok(text) => {
            let samples = prom::parse(&text);
            let streams =
                prom::sum(&samples, "rollcall_controller_connected_sidecars", &[]).unwrap_or(0.0);
            let invalid = prom::sum(
                &samples,
                "rollcall_controller_reports_total",
                &[("result", "invalid")],
            )
            .unwrap_or(0.0);
            report.push(if invalid > 0.0 {
                Check::warn(CATEGORY, description, format!("{invalid} reports refused as invalid (of all pools); {streams} roster streams open"))
            } else {
                Check::ok(CATEGORY, description).detail(format!("{streams} roster streams open (all pools)"))
            });
        }
        Err(e) => report.push(Check::skip(
            CATEGORY,
            description,
            format!("cannot read the controller's metrics: {e}"),
        )),
    }
}

/// Admin addresses of the sidecars that route to `key`: given, or found by label and annotation.
async fn sidecar_targets(ctx: &Context, key: &str) -> Result<Vec<(String, String)>, String> {
    if !ctx.options.sidecars.is_empty() {
        return Ok(ctx
            .options
            .sidecars
            .iter()
            .map(|u| (u.clone(), u.trim_end_matches('/').to_string()))
            .collect());
    }
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let list = pods
        .list(&ListParams::default().labels("rollcall.dev/injected=true"))
        .await
        .map_err(|e| e.to_string())?;
    let (pool_ns, pool_name) = key.split_once('/').unwrap_or(("", key));
    Ok(list
        .items
        .iter()
        .filter(|p| {
            let ns = p.metadata.namespace.as_deref().unwrap_or("");
            p.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("rollcall.dev/pools"))
                .is_some_and(|v| {
                    v.split(',')
                        .filter_map(|e| e.split_once('='))
                        .any(|(pool, _)| {
                            let pool = pool.trim();
                            pool == key || (ns == pool_ns && pool == pool_name)
                        })
                })
        })
        .map(|p| {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let name = p.metadata.name.clone().unwrap_or_default();
            (
                format!("{ns}/{name}"),
                format!("/api/v1/namespaces/{ns}/pods/{name}:15000/proxy"),
            )
        })
        .collect())
}

async fn read(ctx: &Context, base: &str, path: &str) -> Result<String, String> {
    if base.starts_with("http://") || base.starts_with("https://") {
        match fetch::get(&format!("{base}{path}"), None).await {
            Ok(f) if f.status == 200 => Ok(f.body),
            Ok(f) => Err(format!("answered {}", f.status)),
            Err(e) => Err(e.to_string()),
        }
    } else {
        super::through_api(&ctx.client, &format!("{base}{path}")).await
    }
}

/// Each sidecar's own view of the pool.
async fn sidecars(ctx: &Context, key: &str, report: &mut Report) {
    let targets = match sidecar_targets(ctx, key).await {
        Ok(t) => t,
        Err(e) => {
            report.push(Check::skip(
                CATEGORY,
                "each sidecar's view",
                format!("cannot list injected pods: {e}"),
            ));
            return;
        }
    };
    if targets.is_empty() {
        report.push(Check::skip(
            CATEGORY,
            "each sidecar's view",
            "no injected pod routes to this pool",
        ));
    }
    for (who, base) in targets {
        let description = format!("sidecar {who}");
        let metrics = match read(ctx, &base, "/metrics").await {
            Ok(text) => prom::parse(&text),
            Err(e) => {
                report.push(
                    Check::skip(
                        CATEGORY,
                        description,
                        format!("cannot reach its admin port: {e}"),
                    )
                    .hint("kubectl port-forward POD 15000, then --sidecar http://127.0.0.1:15000"),
                );
                continue;
            }
        };
        let connected =
            prom::sum(&metrics, "rollcall_controller_connected", &[]).unwrap_or(0.0) >= 1.0;
        let refused = prom::sum(
            &metrics,
            "rollcall_roster_updates_total",
            &[("result", "refused")],
        )
        .unwrap_or(0.0);
        let applied = prom::sum(
            &metrics,
            "rollcall_roster_updates_total",
            &[("result", "applied")],
        )
        .unwrap_or(0.0);
        let view = read(ctx, &base, "/endpoints")
            .await
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let endpoints: Vec<String> = view
            .as_ref()
            .and_then(|v| v["pools"].as_array())
            .and_then(|pools| pools.iter().find(|p| p["name"] == key))
            .and_then(|p| p["endpoints"].as_array())
            .map(|eps| {
                eps.iter()
                    .map(|e| {
                        let reason = e["reason"]
                            .as_str()
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default();
                        format!("{} {}{reason}", text(&e["address"]), text(&e["state"]))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let seen = if endpoints.is_empty() {
            "no endpoints".to_string()
        } else {
            endpoints.join(", ")
        };
        if !connected {
            report.push(
                Check::fail(
                    CATEGORY,
                    description,
                    format!(
                        "no roster stream to the controller; routing on its last roster: {seen}"
                    ),
                )
                .hint("see the rollcall-controller checks and the sidecar's log"),
            );
        } else if refused > 0.0 {
            report.push(
                Check::fail(CATEGORY, description, format!("refused {refused} roster update(s) ({applied} applied): it keeps its previous roster; {seen}"))
                    .hint("its log names the policy problem; a sidecar older than the controller? restart the pod"),
            );
        } else {
            report.push(Check::ok(CATEGORY, description).detail(format!(
                "connected, {applied} roster update(s) applied: {seen}"
            )));
        }
    }
}
