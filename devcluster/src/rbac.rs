//! RBAC authorisation from the stored Roles, ClusterRoles and their bindings, evaluated as the
//! API server's RBAC authorizer does (verbs, API groups, resources and `resource/subresource`,
//! resource names, non-resource URLs, `*` wildcards; `system:masters` may do anything), with
//! the bootstrap grants every cluster has for authenticated users (discovery, self reviews).
//! Enforced on ServiceAccount-token requests; answers SubjectAccessReviews the same way.

use serde_json::{Value, json};

use crate::catalog::ResourceType;
use crate::cluster::Db;
use crate::status::{ApiError, ApiResult, qualified};
use crate::tokens::User;

/// What a request wants to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// Set for non-resource requests (`/api`, `/version`).
    pub path: String,
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn subject_matches(subject: &Value, user: &User) -> bool {
    let name = subject["name"].as_str().unwrap_or("");
    match subject["kind"].as_str() {
        Some("User") => user.username == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"].as_str().unwrap_or("");
            user.username == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let verbs = strings(&rule["verbs"]);
    if !verbs.iter().any(|v| *v == "*" || *v == a.verb) {
        return false;
    }
    if !a.path.is_empty() {
        return strings(&rule["nonResourceURLs"]).iter().any(|u| {
            *u == "*" || *u == a.path || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
        });
    }
    let groups = strings(&rule["apiGroups"]);
    if !groups.iter().any(|g| *g == "*" || *g == a.group) {
        return false;
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resources = strings(&rule["resources"]);
    // `ResourceMatches`: `*`, the exact `resource[/subresource]`, or `*/subresource`; a
    // `resource/*` rule matches nothing but itself.
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!a.subresource.is_empty()
                && r.strip_prefix("*/").is_some_and(|sub| sub == a.subresource))
    });
    if !resource_ok {
        return false;
    }
    let names = strings(&rule["resourceNames"]);
    names.is_empty() || (!a.name.is_empty() && names.contains(&a.name.as_str()))
}

fn role_rules(db: &Db, role_ref: &Value, namespace: &str) -> Vec<Value> {
    let name = role_ref["name"].as_str().unwrap_or("");
    let (storage, ns) = match role_ref["kind"].as_str() {
        Some("ClusterRole") => ("clusterroles.rbac.authorization.k8s.io", ""),
        Some("Role") => ("roles.rbac.authorization.k8s.io", namespace),
        _ => return vec![],
    };
    db.store
        .get(&crate::store::Key {
            storage: storage.into(),
            namespace: ns.into(),
            name: name.into(),
        })
        .and_then(|r| r["rules"].as_array().cloned())
        .unwrap_or_default()
}

/// The grants every cluster bootstraps for authenticated users, as the RBAC reason names
/// their bindings (all are ClusterRoleBindings to Group `system:authenticated`).
fn bootstrap_allows(user: &User, a: &Attributes) -> Option<&'static str> {
    if !user.groups.iter().any(|g| g == "system:authenticated") {
        return None;
    }
    let public = ["/version", "/healthz", "/livez", "/readyz"];
    let discovery = ["/api", "/apis", "/openapi"];
    if !a.path.is_empty() && a.verb == "get" {
        if public
            .iter()
            .any(|p| a.path == *p || a.path.starts_with(&format!("{p}/")))
        {
            return Some("system:public-info-viewer");
        }
        if discovery
            .iter()
            .any(|p| a.path == *p || a.path.starts_with(&format!("{p}/")))
        {
            return Some("system:discovery");
        }
    }
    let self_review = a.verb == "create"
        && ((a.group == "authorization.k8s.io"
            && matches!(
                a.resource.as_str(),
                "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
            ))
            || (a.group == "authentication.k8s.io" && a.resource == "selfsubjectreviews"));
    self_review.then_some("system:basic-user")
}

/// `describeSubject`: `ServiceAccount "name/namespace"`, `User "name"`, `Group "name"`.
fn describe_subject(subject: &Value, binding_namespace: &str) -> String {
    let kind = subject["kind"].as_str().unwrap_or("");
    let name = subject["name"].as_str().unwrap_or("");
    if kind == "ServiceAccount" {
        let ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_namespace);
        format!("{kind} \"{name}/{ns}\"")
    } else {
        format!("{kind} \"{name}\"")
    }
}

/// Whether `user` may do `a`.
pub fn allowed(db: &Db, user: &User, a: &Attributes) -> bool {
    decide(db, user, a).is_some()
}

/// `Some(reason)` when `user` may do `a`, with the reason the RBAC authorizer gives
/// (`RBAC: allowed by RoleBinding "b/ns" of Role "r" to ServiceAccount "sa/ns"`); members of
/// `system:masters` are allowed before RBAC, with no reason.
pub fn decide(db: &Db, user: &User, a: &Attributes) -> Option<String> {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Some(String::new());
    }
    if let Some(binding) = bootstrap_allows(user, a) {
        return Some(format!(
            "RBAC: allowed by ClusterRoleBinding \"{binding}\" of ClusterRole \"{binding}\" to Group \"system:authenticated\""
        ));
    }
    let bindings =
        |storage: &str, ns: Option<&str>| db.store.list(storage, ns, None).unwrap_or_default();
    for binding in bindings("clusterrolebindings.rbac.authorization.k8s.io", None) {
        let Some(subject) = strings_subjects(&binding)
            .into_iter()
            .find(|s| subject_matches(s, user))
        else {
            continue;
        };
        if role_rules(db, &binding["roleRef"], "")
            .iter()
            .any(|r| rule_allows(r, a))
        {
            return Some(format!(
                "RBAC: allowed by ClusterRoleBinding \"{}\" of {} \"{}\" to {}",
                binding["metadata"]["name"].as_str().unwrap_or(""),
                binding["roleRef"]["kind"].as_str().unwrap_or(""),
                binding["roleRef"]["name"].as_str().unwrap_or(""),
                describe_subject(&subject, "")
            ));
        }
    }
    if a.namespace.is_empty() {
        return None;
    }
    for binding in bindings("rolebindings.rbac.authorization.k8s.io", Some(&a.namespace)) {
        let Some(subject) = strings_subjects(&binding)
            .into_iter()
            .find(|s| subject_matches(s, user))
        else {
            continue;
        };
        if role_rules(db, &binding["roleRef"], &a.namespace)
            .iter()
            .any(|r| rule_allows(r, a))
        {
            return Some(format!(
                "RBAC: allowed by RoleBinding \"{}/{}\" of {} \"{}\" to {}",
                binding["metadata"]["name"].as_str().unwrap_or(""),
                a.namespace,
                binding["roleRef"]["kind"].as_str().unwrap_or(""),
                binding["roleRef"]["name"].as_str().unwrap_or(""),
                describe_subject(&subject, &a.namespace)
            ));
        }
    }
    None
}

fn strings_subjects(binding: &Value) -> Vec<Value> {
    binding["subjects"].as_array().cloned().unwrap_or_default()
}

/// The 403 a refused request gets.
pub fn forbidden(user: &User, a: &Attributes) -> ApiError {
    if !a.path.is_empty() {
        return ApiError::forbidden(format!(
            "forbidden: User \"{}\" cannot {} path \"{}\"",
            user.username, a.verb, a.path
        ));
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let what = if a.name.is_empty() {
        qualified(&a.group, &a.resource)
    } else {
        format!("{} \"{}\"", qualified(&a.group, &a.resource), a.name)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    // `StatusDetails` fields are `omitempty`.
    let mut details = json!({"kind": a.resource});
    for (key, value) in [("name", &a.name), ("group", &a.group)] {
        if !value.is_empty() {
            details[key] = json!(value);
        }
    }
    ApiError::forbidden(format!(
        "{what} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.username, a.verb, a.group
    ))
    .with_details(details)
}

/// Answer a SubjectAccessReview or SelfSubjectAccessReview.
pub fn review(db: &Db, t: &ResourceType, body: &Value, requester: &User) -> ApiResult<Value> {
    let spec = &body["spec"];
    let user = if t.kind == "SelfSubjectAccessReview" {
        requester.clone()
    } else {
        User {
            username: spec["user"].as_str().unwrap_or("").to_string(),
            uid: spec["uid"].as_str().unwrap_or("").to_string(),
            groups: strings(&spec["groups"])
                .into_iter()
                .map(String::from)
                .collect(),
            extra: Default::default(),
        }
    };
    let r = &spec["resourceAttributes"];
    let n = &spec["nonResourceAttributes"];
    let a = if n.is_object() {
        Attributes {
            verb: n["verb"].as_str().unwrap_or("").into(),
            path: n["path"].as_str().unwrap_or("").into(),
            ..Default::default()
        }
    } else if r.is_object() {
        Attributes {
            verb: r["verb"].as_str().unwrap_or("").into(),
            group: r["group"].as_str().unwrap_or("").into(),
            resource: r["resource"].as_str().unwrap_or("").into(),
            subresource: r["subresource"].as_str().unwrap_or("").into(),
            namespace: r["namespace"].as_str().unwrap_or("").into(),
            name: r["name"].as_str().unwrap_or("").into(),
            path: String::new(),
        }
    } else {
        return Err(ApiError::invalid(
            &t.kind,
            &t.group,
            "",
            format!(
                "{} \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
                t.qualified_kind()
            ),
            json!([{"reason": "FieldValueInvalid", "field": "spec.resourceAttributes"}]),
        ));
    };
    let decision = decide(db, &user, &a);
    let mut answer = body.clone();
    answer["apiVersion"] = json!(t.api_version());
    answer["kind"] = json!(t.kind);
    answer["metadata"] = json!({"creationTimestamp": null});
    answer["status"] = match decision {
        Some(reason) if !reason.is_empty() => json!({"allowed": true, "reason": reason}),
        Some(_) => json!({"allowed": true}),
        None => json!({"allowed": false}),
    };
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            path: String::new(),
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let rule = json!({"verbs": ["get", "list", "watch"], "apiGroups": ["rollcall.dev"],
                          "resources": ["backendpools", "backendpools/status"]});
        assert!(rule_allows(
            &rule,
            &attrs("list", "rollcall.dev", "backendpools", "", "", "")
        ));
        assert!(rule_allows(
            &rule,
            &attrs("get", "rollcall.dev", "backendpools", "status", "a", "x")
        ));
        assert!(!rule_allows(
            &rule,
            &attrs("patch", "rollcall.dev", "backendpools", "", "a", "x")
        ));
        assert!(!rule_allows(
            &rule,
            &attrs("get", "", "backendpools", "", "a", "x")
        ));
        let named = json!({"verbs": ["update"], "apiGroups": ["coordination.k8s.io"],
                           "resources": ["leases"], "resourceNames": ["rollcall"]});
        assert!(rule_allows(
            &named,
            &attrs(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "s",
                "rollcall"
            )
        ));
        assert!(!rule_allows(
            &named,
            &attrs("update", "coordination.k8s.io", "leases", "", "s", "other")
        ));
        let wildcard = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/status"]});
        assert!(rule_allows(
            &wildcard,
            &attrs("patch", "apps", "deployments", "status", "s", "d")
        ));
        assert!(!rule_allows(
            &wildcard,
            &attrs("patch", "apps", "deployments", "", "s", "d")
        ));
    }

    #[test]
    fn refusals_read_like_the_api_servers() {
        let user = User {
            username: "system:serviceaccount:shop:app".into(),
            uid: String::new(),
            groups: vec![],
            extra: Default::default(),
        };
        let e = forbidden(&user, &attrs("list", "", "pods", "", "shop", ""));
        assert_eq!(
            e.message,
            "pods is forbidden: User \"system:serviceaccount:shop:app\" cannot list resource \"pods\" in API group \"\" in the namespace \"shop\""
        );
        let e = forbidden(
            &user,
            &attrs("create", "", "serviceaccounts", "token", "", "app"),
        );
        assert!(e.message.ends_with("cannot create resource \"serviceaccounts/token\" in API group \"\" at the cluster scope"));
    }
}
