//! The injector: its webhook configuration, its replicas, the CA in the `caBundle` and the
//! serving certificate in its Secret (valid, for the Service's name, signed by a CA the API
//! server trusts, not about to expire), whether it answers, and its RBAC.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::{Context, permissions};
use crate::fetch::{self, Trust};
use crate::permissions::INJECTOR;
use crate::report::{Check, Report};
use crate::x509::{self, CertInfo};

const CATEGORY: &str = "rollcall-injector";
pub const INJECTOR_NAME: &str = "rollcall-injector";
const SECRET: &str = "rollcall-injector-tls";
/// A certificate closer to its end than this is worth a warning (self-managed ones are renewed
/// a third before, 30 days for the default 90).
const WARN_WITHIN: i64 = 14 * 86_400;

fn expiry(what: &str, cert: &CertInfo, now: i64) -> Check {
    let description = format!("{what} is valid for more than 14 days");
    let when = x509::human_until(cert.not_after, now);
    if cert.not_after <= now || cert.not_before > now {
        Check::fail(
            CATEGORY,
            description,
            format!("{} is not valid now (expires {when})", cert.subject),
        )
    } else if cert.not_after - now < WARN_WITHIN {
        Check::warn(
            CATEGORY,
            description,
            format!("{} expires {when}", cert.subject),
        )
        .hint("the injector renews it a third before its end; its log says why it has not")
    } else {
        Check::ok(CATEGORY, description).detail(format!("expires {when}"))
    }
}

pub async fn injector(ctx: &Context, report: &mut Report) {
    let ns = &ctx.options.namespace;
    let webhooks: Api<MutatingWebhookConfiguration> = Api::all(ctx.client.clone());
    let config = match webhooks.get_opt(INJECTOR_NAME).await {
        Ok(Some(config)) => config,
        Ok(None) => {
            report.push(Check::skip(
                CATEGORY,
                "the injection webhook is installed",
                "no MutatingWebhookConfiguration rollcall-injector (injector.enabled=false?): sidecars are added by hand",
            ));
            return;
        }
        Err(e) => {
            report.push(Check::skip(
                CATEGORY,
                "the injection webhook is installed",
                e.to_string(),
            ));
            return;
        }
    };
    report.push(Check::ok(CATEGORY, "the injection webhook is installed"));
    let external = config
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("cert-manager.io/inject-ca-from"));
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    if let Ok(Some(d)) = deployments.get_opt(INJECTOR_NAME).await {
        let wanted = d.spec.replicas.unwrap_or(1);
        let ready = d
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        report.push(if ready >= 1 {
            Check::ok(CATEGORY, "an injector replica is ready")
                .detail(format!("{ready} of {wanted}"))
        } else {
            Check::fail(
                CATEGORY,
                "an injector replica is ready",
                format!("0 of {wanted} replicas ready"),
            )
            .hint("with failurePolicy Ignore, pods start without the sidecar meanwhile")
        });
    }
    let Some(hook) = config.webhooks.as_ref().and_then(|w| w.first()) else {
        report.push(Check::fail(
            CATEGORY,
            "the webhook has a caBundle",
            "the configuration has no webhooks",
        ));
        return;
    };
    let bundle_pem = hook
        .client_config
        .ca_bundle
        .as_ref()
        .map(|b| b.0.clone())
        .unwrap_or_default();
    let bundle = match x509::parse_bundle(&bundle_pem) {
        Ok(bundle) => {
            report.push(
                Check::ok(CATEGORY, "the webhook has a caBundle")
                    .detail(format!("{} CA(s)", bundle.len())),
            );
            bundle
        }
        Err(e) => {
            report.push(
                Check::fail(
                    CATEGORY,
                    "the webhook has a caBundle",
                    format!("caBundle: {e}"),
                )
                .hint(if external {
                    "cert-manager's cainjector writes it: is cert-manager running?"
                } else {
                    "the injector writes it at start: is it running?"
                }),
            );
            Vec::new()
        }
    };
    if let Some(ca) = bundle.first() {
        report.push(expiry("the webhook's CA", ca, ctx.now));
    }
    let service_name = format!("{INJECTOR_NAME}.{ns}.svc");
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let serving = match secrets.get_opt(SECRET).await {
        Ok(Some(secret)) => secret
            .data
            .and_then(|d| d.get("tls.crt").map(|c| c.0.clone()))
            .ok_or_else(|| "holds no tls.crt yet".to_string())
            .and_then(|pem| x509::parse_bundle(&pem)),
        Ok(None) => Err("not found".to_string()),
        Err(e) => Err(e.to_string()),
    };
    match serving.as_ref().map(|chain| chain.first()) {
        Ok(Some(cert)) => {
            let signed = bundle.iter().any(|ca| x509::signed_by(&cert.der, &ca.der));
            let covers = cert.dns_names.contains(&service_name);
            let description =
                format!("the serving certificate is for {service_name} and signed by the caBundle");
            report.push(match (covers, signed) {
                (true, true) => Check::ok(CATEGORY, description),
                (false, _) => Check::fail(CATEGORY, description, format!("it is for {}", cert.dns_names.join(", "))),
                (true, false) => Check::fail(CATEGORY, description, "no CA in the caBundle signed it: the API server will refuse the handshake")
                    .hint("the injector rewrites the caBundle within a minute; if this stays, read its log"),
            });
            report.push(expiry("the serving certificate", cert, ctx.now));
        }
        Ok(None) | Err(_) => report.push(Check::fail(
            CATEGORY,
            "the serving certificate is in its Secret",
            format!(
                "Secret {ns}/{SECRET}: {}",
                serving
                    .as_ref()
                    .err()
                    .cloned()
                    .unwrap_or_else(|| "holds no certificate".into())
            ),
        )),
    }
    reachable(
        ctx,
        &bundle_pem,
        &service_name,
        serving.ok().and_then(|c| c.into_iter().next()),
        report,
    )
    .await;
    let user = format!("system:serviceaccount:{ns}:{INJECTOR_NAME}");
    let needed: Vec<_> = if external {
        INJECTOR
            .iter()
            .filter(|p| p.verb == "get" && p.resource == "secrets")
            .copied()
            .collect()
    } else {
        INJECTOR.to_vec()
    };
    let description = "its ServiceAccount may keep its certificate";
    match permissions(ctx, Some(&user), &needed, ns).await {
        Ok(missing) if missing.is_empty() => report.push(Check::ok(CATEGORY, description)),
        Ok(missing) => report.push(Check::fail(
            CATEGORY,
            description,
            format!("{INJECTOR_NAME} may not:\n{}", missing.join("\n")),
        )),
        Err(e) => report.push(Check::skip(
            CATEGORY,
            description,
            format!("cannot ask: {e}"),
        )),
    }
}

/// `GET /healthz` on the webhook: directly (checking the certificate it presents), or through
/// the API server's service proxy.
async fn reachable(
    ctx: &Context,
    bundle: &[u8],
    service_name: &str,
    stored: Option<CertInfo>,
    report: &mut Report,
) {
    let description = "the webhook answers";
    if let Some(base) = &ctx.options.webhook_url {
        let url = format!("{}/healthz", base.trim_end_matches('/'));
        let trust = Trust {
            ca_pem: bundle,
            server_name: service_name,
        };
        match fetch::get(&url, Some(trust)).await {
            Ok(f) if f.status == 200 => {
                let same = stored
                    .as_ref()
                    .is_some_and(|s| f.peer_certificate.as_deref() == Some(s.der.as_slice()));
                report.push(Check::ok(CATEGORY, description).detail(format!(
                    "{url}: TLS verified against the caBundle{}",
                    if same {
                        ", serving the Secret's certificate"
                    } else {
                        ""
                    }
                )));
            }
            Ok(f) => report.push(Check::fail(
                CATEGORY,
                description,
                format!("{url} answered {}", f.status),
            )),
            Err(e) => report.push(Check::fail(CATEGORY, description, e.to_string())),
        }
        return;
    }
    let path = format!(
        "/api/v1/namespaces/{}/services/https:{INJECTOR_NAME}:443/proxy/healthz",
        ctx.options.namespace
    );
    match super::through_api(&ctx.client, &path).await {
        Ok(_) => report.push(Check::ok(CATEGORY, description).detail("through the API server")),
        Err(e) => report.push(
            Check::skip(CATEGORY, description, format!("not through the API server's service proxy: {e}"))
                .hint("kubectl -n rollcall-system port-forward svc/rollcall-injector 8443:443, then --webhook-url https://127.0.0.1:8443"),
        ),
    }
}
