//! The sidecar container the injector adds, and everything it needs in the pod: its command
//! line, environment, token volume, probes. This is the one place that knows the sidecar's
//! flags; adjust here when the sidecar's command line changes.
//!
//! It is a native sidecar (Kubernetes ≥ 1.29: an init container with `restartPolicy: Always`,
//! as Istio and Linkerd inject now): it starts before the application containers, which the
//! kubelet holds until its startup probe (`/ready`: every pool listens) passes, and at
//! shutdown it gets SIGTERM only after every application container has exited, so requests
//! the application finishes during its own shutdown still have their proxy.

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, KeyToPath,
    ObjectFieldSelector, Probe, ProjectedVolumeSource, ServiceAccountTokenProjection, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::annotation::{PoolPort, SidecarOptions};
use crate::config::SidecarSettings;

/// The injected container's name; a pod that has one is not injected again.
pub const CONTAINER_NAME: &str = "rollcall-sidecar";
/// The admin port's name (the PodMonitor scrapes it by this name).
pub const ADMIN_PORT_NAME: &str = "rollcall-admin";
/// The label the injector puts on pods it changed (the PodMonitor and `kubectl rollcall
/// check --pool` find sidecars by it).
pub const INJECTED_LABEL: &str = "rollcall.dev/injected";
/// The projected-token volume, and where the sidecar finds the token.
pub const TOKEN_VOLUME: &str = "rollcall-token";
pub const TOKEN_DIR: &str = "/var/run/secrets/rollcall.dev/serviceaccount";
pub const TOKEN_FILE: &str = "/var/run/secrets/rollcall.dev/serviceaccount/token";
/// The controller CA's volume (only with `controllerCA`), and the file in it.
pub const CA_VOLUME: &str = "rollcall-controller-ca";
pub const CA_DIR: &str = "/var/run/secrets/rollcall.dev/controller-ca";
pub const CA_FILE: &str = "/var/run/secrets/rollcall.dev/controller-ca/ca.crt";

/// The sidecar's arguments and environment for `pools`.
///
/// `--shutdown-delay=0s`: see the module header (the application has exited by then).
/// The token path arrives as `ROLLCALL_TOKEN_FILE` (the sidecar re-reads it at every
/// reconnect, so the kubelet's rotation is picked up). The roster TLS CA arrives as
/// `ROLLCALL_CONTROLLER_CA_PEM` when the injector keeps the roster certificate (the default),
/// or as `--controller-ca PATH` from a ConfigMap the chart names.
pub fn command_line(
    settings: &SidecarSettings,
    pools: &[PoolPort],
    options: &SidecarOptions,
) -> (Vec<String>, Vec<EnvVar>) {
    let mut args = vec![
        format!("--controller={}", settings.controller_url),
        format!("--admin-listen={}", admin_listen(settings)),
        format!("--log-format={}", settings.log_format),
        // A native sidecar is signalled only after the application exited: nobody sends to it
        // any more, so waiting (not ready but serving) would only spend the pod's grace period.
        "--shutdown-delay=0s".to_string(),
    ];
    args.extend(
        pools
            .iter()
            .map(|p| format!("--pool={}/{}=127.0.0.1:{}", p.namespace, p.name, p.port)),
    );
    if settings.controller_ca.is_some() {
        args.push(format!("--controller-ca={CA_FILE}"));
    }
    if settings.insecure_plaintext {
        args.push("--insecure-plaintext-controller".to_string());
    }
    if let Some(threads) = options.threads {
        args.push(format!("--threads={threads}"));
    }
    if let Some(budget) = options.max_idle_connections {
        args.push(format!("--max-idle-connections={budget}"));
    }
    // The pod's annotation first, then the install's default.
    if let Some(engine) = options
        .http1_engine
        .or(settings.http1_engine.as_deref().map(str::trim))
    {
        args.push(format!("--http1-engine={engine}"));
    }
    let field = |name: &str, path: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let value = |name: &str, value: &str| EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    };
    let mut env = vec![
        field("POD_NAME", "metadata.name"),
        field("POD_NAMESPACE", "metadata.namespace"),
        value("ROLLCALL_LOG", &settings.log_level),
        value("ROLLCALL_TOKEN_FILE", TOKEN_FILE),
    ];
    if settings.controller_ca.is_none()
        && let Some(pem) = &settings.controller_ca_pem
    {
        env.push(value("ROLLCALL_CONTROLLER_CA_PEM", pem));
    }
    (args, env)
}

/// `ADDRESS:PORT`, bracketing an IPv6 address.
fn admin_listen(settings: &SidecarSettings) -> String {
    let address = settings.admin_address.as_str();
    if address.contains(':') && !address.starts_with('[') {
        format!("[{address}]:{}", settings.admin_port)
    } else {
        format!("{address}:{}", settings.admin_port)
    }
}

fn http_probe(path: &str, port: u16, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(i32::from(port)),
            ..Default::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(1),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

/// The sidecar container for `pools`.
pub fn container(
    settings: &SidecarSettings,
    pools: &[PoolPort],
    options: &SidecarOptions,
) -> Container {
    let (args, env) = command_line(settings, pools, options);
    let mut mounts = vec![VolumeMount {
        name: TOKEN_VOLUME.into(),
        mount_path: TOKEN_DIR.into(),
        read_only: Some(true),
        ..Default::default()
    }];
    if settings.controller_ca.is_some() {
        mounts.push(VolumeMount {
            name: CA_VOLUME.into(),
            mount_path: CA_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    Container {
        name: CONTAINER_NAME.into(),
        image: Some(settings.image.clone()),
        image_pull_policy: Some(settings.image_pull_policy.clone()),
        args: Some(args),
        env: Some(env),
        ports: Some(vec![ContainerPort {
            name: Some(ADMIN_PORT_NAME.into()),
            container_port: i32::from(settings.admin_port),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        // Native sidecar: runs alongside the application, stops after it.
        restart_policy: Some("Always".into()),
        // The application starts once every pool listens (up to 2 minutes).
        startup_probe: Some(http_probe("/ready", settings.admin_port, 1, 120)),
        readiness_probe: Some(http_probe("/ready", settings.admin_port, 5, 2)),
        liveness_probe: Some(http_probe("/live", settings.admin_port, 10, 3)),
        resources: Some(settings.resources.clone()),
        security_context: Some(settings.security_context.clone()),
        volume_mounts: Some(mounts),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    }
}

/// The volumes the sidecar mounts.
pub fn volumes(settings: &SidecarSettings) -> Vec<Volume> {
    let mut volumes = vec![Volume {
        name: TOKEN_VOLUME.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    audience: Some(settings.token.audience.clone()),
                    expiration_seconds: Some(settings.token.expiration_seconds),
                    path: "token".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }];
    if let Some(ca) = &settings.controller_ca {
        volumes.push(Volume {
            name: CA_VOLUME.into(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: ca.config_map.clone(),
                        items: Some(vec![KeyToPath {
                            key: ca.key.clone(),
                            path: "ca.crt".into(),
                            ..Default::default()
                        }]),
                        optional: Some(false),
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    volumes
}
