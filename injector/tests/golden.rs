//! Golden tests of the injection patch: every `golden/NAME.pod.json` is decided with
//! `golden/settings.json` (or `NAME.settings.json`) and must give exactly
//! `golden/NAME.expected.json` (with `golden/controller-ca.pem` as the CA bundle the injector
//! hands out when the settings dial `https://` without a CA ConfigMap); an injected pod, patched, must still read as a Pod with the
//! sidecar first among its init containers. `ROLLCALL_UPDATE_GOLDEN=1 cargo test -p
//! rollcall-injector --test golden` rewrites the expected files (review the diff).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use rollcall_injector::config::SidecarSettings;
use rollcall_injector::patch::{self, Decision};
use serde_json::{Value, json};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn settings_for(case: &str) -> SidecarSettings {
    let own = dir().join(format!("{case}.settings.json"));
    let path = if own.exists() {
        own
    } else {
        dir().join("settings.json")
    };
    let mut settings = SidecarSettings::load(&path).unwrap();
    // As the default install runs: the injector keeps the roster certificate and hands each
    // sidecar its CA (a fixed test CA here, so the patches stay golden).
    if settings.controller_ca.is_none() && settings.controller_url.starts_with("https://") {
        settings.controller_ca_pem =
            Some(std::fs::read_to_string(dir().join("controller-ca.pem")).unwrap());
    }
    settings
}

fn as_json(decision: &Decision) -> Value {
    match decision {
        Decision::Skip(reason) => json!({"decision": "skip", "reason": reason}),
        Decision::Refuse(message) => json!({"decision": "refuse", "message": message}),
        Decision::Inject { patch, .. } => json!({"decision": "inject", "patch": patch}),
    }
}

fn cases() -> Vec<String> {
    let mut cases: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".pod.json").map(str::to_string)
        })
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_case_gives_its_golden_answer() {
    let update = std::env::var_os("ROLLCALL_UPDATE_GOLDEN").is_some();
    let cases = cases();
    assert!(cases.len() >= 8, "golden cases missing: {cases:?}");
    let mut failed = Vec::new();
    for case in &cases {
        let text = std::fs::read_to_string(dir().join(format!("{case}.pod.json"))).unwrap();
        let pod: Pod = serde_json::from_str(&text).unwrap();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let got = as_json(&patch::decide(&pod, &namespace, &settings_for(case)));
        let expected_path = dir().join(format!("{case}.expected.json"));
        if update {
            let pretty = serde_json::to_string_pretty(&got).unwrap() + "\n";
            std::fs::write(&expected_path, pretty).unwrap();
            continue;
        }
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(&expected_path)
                .unwrap_or_else(|_| panic!("{case}: no {}", expected_path.display())),
        )
        .unwrap();
        if got != expected {
            failed.push(format!(
                "{case}:\n got      {}\n expected {}",
                serde_json::to_string(&got).unwrap(),
                serde_json::to_string(&expected).unwrap()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn injected_pods_still_read_as_pods_with_the_sidecar_first() {
    for case in cases() {
        let text = std::fs::read_to_string(dir().join(format!("{case}.pod.json"))).unwrap();
        let pod: Pod = serde_json::from_str(&text).unwrap();
        let Decision::Inject { patch, pools } = patch::decide(&pod, "shop", &settings_for(&case))
        else {
            continue;
        };
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        let operations: json_patch::Patch = serde_json::from_value(Value::Array(patch)).unwrap();
        json_patch::patch(&mut doc, &operations).unwrap();
        let patched: Pod = serde_json::from_value(doc).unwrap();
        let spec = patched.spec.unwrap();
        let first = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(first.name, "rollcall-sidecar", "{case}");
        assert_eq!(first.restart_policy.as_deref(), Some("Always"), "{case}");
        let args = first.args.clone().unwrap_or_default();
        for pool in &pools {
            let flag = format!(
                "--pool={}/{}=127.0.0.1:{}",
                pool.namespace, pool.name, pool.port
            );
            assert!(args.contains(&flag), "{case}: {flag} not in {args:?}");
        }
        assert_eq!(
            patched
                .metadata
                .labels
                .unwrap()
                .get("rollcall.dev/injected")
                .map(String::as_str),
            Some("true")
        );
        // Everything the pod had is still there.
        let original: Pod = serde_json::from_str(&text).unwrap();
        let before = original.spec.unwrap();
        assert_eq!(spec.containers, before.containers, "{case}");
        assert_eq!(
            spec.init_containers.unwrap().len(),
            before.init_containers.map_or(0, |c| c.len()) + 1
        );
    }
}
