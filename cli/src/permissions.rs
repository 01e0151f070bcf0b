//! What each Rollcall component may do, in one place: `check` asks the API server (by
//! SubjectAccessReview) whether the installed RBAC still grants it, and before an install
//! whether the installing user may create what the chart creates. A test keeps the component
//! lists equal to the rules in deploy/manifests/rollcall.yaml (the chart, rendered).

/// One permission: `verb` on `group`/`resource[/subresource]`, cluster-wide (`namespaced:
/// false` means in every namespace or of a cluster-scoped kind) or in the component's own
/// namespace, optionally of one named object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Permission {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    /// In the component's own namespace only.
    pub namespaced: bool,
    pub name: &'static str,
}

const fn cluster(verb: &'static str, group: &'static str, resource: &'static str) -> Permission {
    Permission {
        verb,
        group,
        resource,
        subresource: "",
        namespaced: false,
        name: "",
    }
}

const fn own(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    name: &'static str,
) -> Permission {
    Permission {
        verb,
        group,
        resource,
        subresource: "",
        namespaced: true,
        name,
    }
}

/// rollcall-controller: reflectors over pools, slices and Services; status by server-side
/// apply; Events (Recorder); TokenReviews and SubjectAccessReviews for sidecar authentication
/// and cross-namespace authorization; sidecars' Nodes for their zones; its Lease; the one
/// EndpointSlice through which its Service reaches the leader (no write on Pods).
pub const CONTROLLER: &[Permission] = &[
    cluster("list", "rollcall.dev", "backendpools"),
    cluster("watch", "rollcall.dev", "backendpools"),
    Permission {
        subresource: "status",
        ..cluster("patch", "rollcall.dev", "backendpools")
    },
    cluster("list", "discovery.k8s.io", "endpointslices"),
    cluster("watch", "discovery.k8s.io", "endpointslices"),
    cluster("list", "", "services"),
    cluster("watch", "", "services"),
    cluster("create", "events.k8s.io", "events"),
    cluster("patch", "events.k8s.io", "events"),
    cluster("create", "authentication.k8s.io", "tokenreviews"),
    cluster("create", "authorization.k8s.io", "subjectaccessreviews"),
    cluster("get", "", "nodes"),
    own("create", "coordination.k8s.io", "leases", ""),
    own(
        "get",
        "coordination.k8s.io",
        "leases",
        "rollcall-controller",
    ),
    own(
        "patch",
        "coordination.k8s.io",
        "leases",
        "rollcall-controller",
    ),
    own(
        "patch",
        "discovery.k8s.io",
        "endpointslices",
        "rollcall-controller",
    ),
];

/// rollcall-injector with its own certificates: its Secret, its webhook's caBundle, and the
/// controller's roster certificate it keeps by default.
pub const INJECTOR: &[Permission] = &[
    own("get", "", "secrets", "rollcall-injector-tls"),
    own("update", "", "secrets", "rollcall-injector-tls"),
    own("get", "", "secrets", "rollcall-controller-tls"),
    own("update", "", "secrets", "rollcall-controller-tls"),
    cluster(
        "get",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    )
    .named("rollcall-injector"),
    cluster(
        "patch",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    )
    .named("rollcall-injector"),
];

/// What installing the chart creates (besides granting the components' permissions, which
/// RBAC allows only to a user who holds them).
pub const INSTALL: &[Permission] = &[
    cluster(
        "create",
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ),
    cluster("create", "rbac.authorization.k8s.io", "clusterroles"),
    cluster("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
    cluster(
        "create",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    cluster("create", "", "namespaces"),
    own("create", "apps", "deployments", ""),
    own("create", "", "services", ""),
    own("create", "discovery.k8s.io", "endpointslices", ""),
    own("create", "", "serviceaccounts", ""),
    own("create", "", "secrets", ""),
    own("create", "", "configmaps", ""),
    own("create", "rbac.authorization.k8s.io", "roles", ""),
    own("create", "rbac.authorization.k8s.io", "rolebindings", ""),
    own("create", "policy", "poddisruptionbudgets", ""),
];

// === impl Permission ===

impl Permission {
    const fn named(self, name: &'static str) -> Self {
        Self { name, ..self }
    }

    /// `patch backendpools/status (rollcall.dev) in every namespace`.
    pub fn describe(&self, namespace: &str) -> String {
        let mut resource = self.resource.to_string();
        if !self.subresource.is_empty() {
            resource = format!("{resource}/{}", self.subresource);
        }
        if !self.name.is_empty() {
            resource = format!("{resource} {:?}", self.name);
        }
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        let scope = if self.namespaced {
            format!("in namespace {namespace}")
        } else {
            "cluster-wide".to_string()
        };
        format!("{} {resource} ({group}) {scope}", self.verb)
    }
}

#[cfg(test)]
mod tests;
