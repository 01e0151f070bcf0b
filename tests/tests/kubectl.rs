//! The system through the real `kubectl` (on PATH; `.ci/run` makes sure it is): the pool's
//! printer columns carry the right values, `kubectl get bp -w` sees an ejection arrive,
//! `kubectl describe bp` and `kubectl get events` show what the controller recorded, and an
//! invalid pool is refused with its message. Skipped, saying so, where kubectl is missing.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rollcall_e2e::{PATIENCE, controller_flags, ejection, run_dir};
use rollcall_testkit::system::{Stack, StackOptions};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn kubectl_on_path() -> bool {
    std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `kubectl` against the stack, with its own discovery cache (kubectl caches by host:port).
fn kubectl(kubeconfig: &Path, dir: &Path) -> Command {
    let mut command = Command::new("kubectl");
    command
        .env("KUBECONFIG", kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("kubectl-cache"))
        .kill_on_drop(true);
    command
}

async fn run(kubeconfig: &Path, dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = kubectl(kubeconfig, dir)
        .args(args)
        .output()
        .await
        .expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_the_pool_its_ejections_and_events() {
    if !kubectl_on_path() {
        eprintln!("skipped: kubectl is not on PATH");
        return;
    }
    let dir = run_dir("kubectl");
    let options = StackOptions {
        controller_flags: controller_flags(),
        ..StackOptions::default()
    };
    let stack = Stack::start(&dir, options).await.unwrap();
    let kc = stack.api.kubeconfig.clone();
    stack
        .wait_status(PATIENCE, "3 healthy", |s| s["endpoints"]["healthy"] == 3)
        .await
        .unwrap();
    let (ok, out, err) = run(&kc, &dir, &["get", "bp", "-n", "shop"]).await;
    assert!(ok, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "SERVICE", "HEALTHY", "EJECTED", "PANIC", "AGE"],
        "{out}"
    );
    assert_eq!(&lines[1][..5], ["web", "web", "3", "0", "False"], "{out}");

    // `kubectl get bp -w` sees the ejection arrive.
    let mut watch = kubectl(&kc, &dir)
        .args(["get", "bp", "-n", "shop", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut rows = BufReader::new(watch.stdout.take().unwrap()).lines();
    let victim = stack.backend_address(1);
    stack.backends[1].kill().await;
    let seen = tokio::time::timeout(PATIENCE, async {
        while let Ok(Some(line)) = rows.next_line().await {
            let cells: Vec<&str> = line.split_whitespace().collect();
            if cells.len() >= 4 && cells[0] == "web" && cells[3] == "1" {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("kubectl get bp -w printed the ejection");
    assert!(seen.contains("web"), "{seen}");
    let _ = watch.kill().await;
    let status = stack
        .wait_status(PATIENCE, "b2 ejected", |s| ejection(s, &victim).is_some())
        .await
        .unwrap();
    assert!(ejection(&status, &victim).is_some());

    let describe = tokio::time::timeout(PATIENCE, async {
        loop {
            let (ok, out, _) = run(&kc, &dir, &["describe", "bp", "web", "-n", "shop"]).await;
            if ok && out.contains("EndpointEjected") {
                return out;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("kubectl describe bp shows the EndpointEjected Event");
    assert!(describe.contains(&victim), "{describe}");
    let (ok, events, err) = run(&kc, &dir, &["get", "events", "-n", "shop"]).await;
    assert!(ok, "{err}");
    assert!(
        events.contains("EndpointEjected") && events.contains("backendpool/web"),
        "{events}"
    );

    // An invalid pool is refused with its message.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: rollcall.dev/v1alpha1\nkind: BackendPool\nmetadata: {name: bad, namespace: shop}\n\
         spec:\n  service: {name: web, port: http}\n  healthCheck: {interval: 1s, timeout: 2s}\n",
    )
    .unwrap();
    let (ok, _, err) = run(&kc, &dir, &["apply", "-f", bad.to_str().unwrap()]).await;
    assert!(!ok, "an invalid pool was accepted");
    assert!(
        err.contains("healthCheck.timeout must be more than 0s and at most healthCheck.interval"),
        "{err}"
    );
}
