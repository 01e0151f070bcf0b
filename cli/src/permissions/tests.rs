//! The lists above against the RBAC the chart renders (deploy/manifests/rollcall.yaml is the
//! chart with its default values; a Python test keeps it in step with the chart).

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

fn manifests() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/manifests/rollcall.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_multiple(&text).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// (verb, group, resource, subresource, namespaced, name) of every rule bound to `account`.
fn granted(account: &str) -> BTreeSet<(String, String, String, String, bool, String)> {
    let docs = manifests();
    let mut out = BTreeSet::new();
    for binding in docs.iter().filter(|d| {
        matches!(
            d["kind"].as_str(),
            Some("RoleBinding" | "ClusterRoleBinding")
        ) && d["subjects"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["name"] == account))
    }) {
        let namespaced = binding["kind"] == "RoleBinding";
        let role = docs
            .iter()
            .find(|d| {
                d["kind"] == binding["roleRef"]["kind"]
                    && d["metadata"]["name"] == binding["roleRef"]["name"]
            })
            .unwrap();
        for rule in role["rules"].as_array().unwrap() {
            let names = strings(&rule["resourceNames"]);
            let names = if names.is_empty() {
                vec![String::new()]
            } else {
                names
            };
            for verb in strings(&rule["verbs"]) {
                for group in strings(&rule["apiGroups"]) {
                    for resource in strings(&rule["resources"]) {
                        let (resource, sub) = resource
                            .split_once('/')
                            .map_or((resource.clone(), String::new()), |(r, s)| {
                                (r.into(), s.into())
                            });
                        for name in &names {
                            out.insert((
                                verb.clone(),
                                group.clone(),
                                resource.clone(),
                                sub.clone(),
                                namespaced,
                                name.clone(),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

fn listed(list: &[Permission]) -> BTreeSet<(String, String, String, String, bool, String)> {
    list.iter()
        .map(|p| {
            (
                p.verb.into(),
                p.group.into(),
                p.resource.into(),
                p.subresource.into(),
                p.namespaced,
                p.name.into(),
            )
        })
        .collect()
}

#[test]
fn controller_list_is_what_the_chart_grants() {
    assert_eq!(listed(CONTROLLER), granted("rollcall-controller"));
}

#[test]
fn injector_list_is_what_the_chart_grants() {
    assert_eq!(listed(INJECTOR), granted("rollcall-injector"));
}

#[test]
fn descriptions_name_verb_resource_and_scope() {
    assert_eq!(
        CONTROLLER[2].describe("rollcall-system"),
        "patch backendpools/status (rollcall.dev) cluster-wide"
    );
    assert_eq!(
        CONTROLLER
            .iter()
            .find(|p| p.verb == "get" && p.resource == "leases")
            .map(|p| p.describe("rollcall-system"))
            .unwrap_or_default(),
        "get leases \"rollcall-controller\" (coordination.k8s.io) in namespace rollcall-system"
    );
}
