//! The checks kubectl users rely on, through the real `kubectl` binary when it is on PATH
//! (each test says `skipped: kubectl not on PATH` and passes otherwise): applying the CRD and
//! a pool with `apply -f`, the printer-column header of `get bp`, an invalid pool refused
//! with its rule's message, server-side apply and a conflicting second manager, `get events`,
//! `describe` listing Events recorded through events.k8s.io, and `delete`. Each test has its
//! own `--cache-dir`, since kubectl caches discovery by host:port and ports are reused.
//! kubectl's generator commands (`create namespace`, `create secret`) send protobuf bodies,
//! which the fixture refuses with 415, so manifests go through `apply -f`.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

const MANIFEST: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80}
---
apiVersion: rollcall.dev/v1alpha1
kind: BackendPool
metadata:
  name: web
  namespace: shop
spec:
  service: {name: web, port: http}
";

fn kubectl_on_path() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join("kubectl").is_file()))
}

fn crd_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds/backendpool.yaml")
}

/// What a kubectl run printed.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// kubectl against `fx`, with this test's own discovery cache.
async fn kubectl(fx: &Fixture, args: &[&str]) -> Run {
    let cache = fx.dir.path().join("kube-cache");
    let output = tokio::time::timeout(
        GUARD,
        tokio::process::Command::new("kubectl")
            .args(args)
            .arg(format!("--cache-dir={}", cache.display()))
            .env("KUBECONFIG", &fx.kubeconfig)
            .env_remove("KUBECTL_KUBERC")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl finishes in time")
    .expect("kubectl runs");
    Run {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[track_caller]
fn succeeded(run: Run) -> String {
    assert!(run.ok, "kubectl failed: {}{}", run.stdout, run.stderr);
    run.stdout
}

/// A running server with the CRD and the manifest applied, or `None` without kubectl.
async fn applied() -> Option<Fixture> {
    if !kubectl_on_path() {
        eprintln!("skipped: kubectl not on PATH");
        return None;
    }
    let fx = start().await;
    let crd = crd_file();
    let out = succeeded(kubectl(&fx, &["apply", "-f", crd.to_str().expect("a UTF-8 path")]).await);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/backendpools.rollcall.dev created"
        ),
        "{out}"
    );
    let manifest = fx.dir.path().join("shop.yaml");
    std::fs::write(&manifest, MANIFEST).expect("manifest written");
    let out = succeeded(
        kubectl(
            &fx,
            &["apply", "-f", manifest.to_str().expect("a UTF-8 path")],
        )
        .await,
    );
    assert!(
        out.contains("backendpool.rollcall.dev/web created"),
        "{out}"
    );
    Some(fx)
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[tokio::test]
async fn get_bp_prints_the_printer_columns() {
    let Some(fx) = applied().await else { return };
    let out = succeeded(kubectl(&fx, &["get", "bp", "-n", "shop"]).await);
    let mut lines = out.lines();
    assert_eq!(
        words(lines.next().unwrap_or("")),
        ["NAME", "SERVICE", "HEALTHY", "EJECTED", "PANIC", "AGE"]
    );
    let row = words(lines.next().unwrap_or(""));
    assert_eq!(row[..2], ["web", "web"], "{out}");
    let wide = succeeded(
        kubectl(
            &fx,
            &[
                "get",
                "backendpools.rollcall.dev",
                "web",
                "-n",
                "shop",
                "-o",
                "jsonpath={.spec.healthCheck.interval}",
            ],
        )
        .await,
    );
    assert_eq!(wide, "2s", "defaults reach kubectl");
}

#[tokio::test]
async fn an_invalid_pool_is_refused_with_its_rules_message() {
    let Some(fx) = applied().await else { return };
    let bad = fx.dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: rollcall.dev/v1alpha1\nkind: BackendPool\nmetadata: {name: bad, namespace: shop}\nspec:\n  service: {name: web, port: HTTP}\n").expect("written");
    let run = kubectl(&fx, &["apply", "-f", bad.to_str().expect("a UTF-8 path")]).await;
    assert!(!run.ok, "{}", run.stdout);
    assert!(
        // kubectl rewords a 422 from its details: `The <kind> "<name>" is invalid: <causes>`.
        run.stderr.contains("The BackendPool \"bad\" is invalid: spec.service: Invalid value: service.port must be a port number 1-65535 or the name of a Service port (lowercase letters, digits and '-')"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn server_side_apply_conflicts_with_a_second_manager() {
    let Some(fx) = applied().await else { return };
    let pool = |port: u16| {
        format!(
            "apiVersion: rollcall.dev/v1alpha1\nkind: BackendPool\nmetadata: {{name: ssa, namespace: shop}}\nspec:\n  service: {{name: web, port: {port}}}\n"
        )
    };
    let first = fx.dir.path().join("first.yaml");
    std::fs::write(&first, pool(80)).expect("written");
    let out = succeeded(
        kubectl(
            &fx,
            &[
                "apply",
                "--server-side",
                "-f",
                first.to_str().expect("UTF-8"),
            ],
        )
        .await,
    );
    assert!(
        out.contains("backendpool.rollcall.dev/ssa serverside-applied"),
        "{out}"
    );
    let second = fx.dir.path().join("second.yaml");
    std::fs::write(&second, pool(81)).expect("written");
    let run = kubectl(
        &fx,
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            second.to_str().expect("UTF-8"),
        ],
    )
    .await;
    assert!(!run.ok);
    assert!(
        run.stderr.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.service.port"
        ),
        "{}",
        run.stderr
    );
    let forced = succeeded(
        kubectl(
            &fx,
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=other",
                "-f",
                second.to_str().expect("UTF-8"),
            ],
        )
        .await,
    );
    assert!(forced.contains("serverside-applied"), "{forced}");
    let port = succeeded(
        kubectl(
            &fx,
            &[
                "get",
                "bp",
                "ssa",
                "-n",
                "shop",
                "-o",
                "jsonpath={.spec.service.port}",
            ],
        )
        .await,
    );
    assert_eq!(port, "81");
}

#[tokio::test]
async fn events_recorded_through_events_k8s_io_show_in_get_and_describe() {
    let Some(fx) = applied().await else { return };
    let uid = succeeded(
        kubectl(
            &fx,
            &[
                "get",
                "bp",
                "web",
                "-n",
                "shop",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
        )
        .await,
    );
    let reference = ObjectReference {
        api_version: Some("rollcall.dev/v1alpha1".into()),
        kind: Some("BackendPool".into()),
        name: Some("web".into()),
        namespace: Some("shop".into()),
        uid: Some(uid),
        ..Default::default()
    };
    let recorder = Recorder::new(
        fx.client.clone(),
        Reporter {
            controller: "rollcall-controller".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Warning,
        reason: "EndpointEjected".into(),
        note: Some("10.0.0.1:80 ejected by 2 of 2 sidecars".into()),
        action: "Eject".into(),
        secondary: None,
    };
    recorder
        .publish(&event, &reference)
        .await
        .expect("recorded");
    recorder
        .publish(&event, &reference)
        .await
        .expect("recorded again");
    let events = succeeded(kubectl(&fx, &["get", "events", "-n", "shop"]).await);
    let mut lines = events.lines();
    assert_eq!(
        words(lines.next().unwrap_or("")),
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    assert!(
        events.contains("Warning")
            && events.contains("EndpointEjected")
            && events.contains("backendpool/web"),
        "{events}"
    );
    assert!(
        events.contains("10.0.0.1:80 ejected by 2 of 2 sidecars"),
        "{events}"
    );
    let described = succeeded(kubectl(&fx, &["describe", "bp", "web", "-n", "shop"]).await);
    let section = described.split("Events:").nth(1).unwrap_or("");
    assert!(
        section.contains("EndpointEjected") && section.contains("rollcall-controller"),
        "{described}"
    );
    assert!(
        section.contains("10.0.0.1:80 ejected by 2 of 2 sidecars"),
        "{described}"
    );
    assert!(
        section.contains("(x2 over"),
        "the series shows: {described}"
    );
}

#[tokio::test]
async fn delete_removes_the_pool() {
    let Some(fx) = applied().await else { return };
    let out = succeeded(kubectl(&fx, &["delete", "bp", "web", "-n", "shop"]).await);
    assert!(
        out.contains("backendpool.rollcall.dev \"web\" deleted"),
        "{out}"
    );
    let run = kubectl(&fx, &["get", "bp", "web", "-n", "shop"]).await;
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("backendpools.rollcall.dev \"web\" not found"),
        "{}",
        run.stderr
    );
    let empty = kubectl(&fx, &["get", "bp", "-n", "shop"]).await;
    assert!(
        empty.ok
            && empty
                .stderr
                .contains("No resources found in shop namespace."),
        "{}{}",
        empty.stdout,
        empty.stderr
    );
}
