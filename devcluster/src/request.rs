//! One API request, parsed: which resource path it names (collection, object, subresource;
//! namespaced or not), the verb the method and query make of it, and the query options the
//! handlers read. Paths follow the API server's layout, including the legacy `/watch/` prefix.

use std::collections::HashMap;

use http::Method;

use crate::status::ApiError;

/// A resource path below `/api/v1` or `/apis/{group}/{version}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Reached through the deprecated `/watch/` prefix.
    pub legacy_watch: bool,
}

/// What a path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1`, `/apis/{group}/{version}`
    GroupVersion(String, String),
    OpenApiV2,
    OpenApiV3Root,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`
    OpenApiV3(String, String),
    Health,
    /// `/_devcluster/...`: the fixture's own control endpoints.
    Control(String),
    Resource(ResourcePath),
}

/// The Kubernetes verb of a resource request (what RBAC and audit logs call it).
pub fn verb(method: &Method, path: &ResourcePath, query: &Query) -> &'static str {
    let collection = path.name.is_none();
    match *method {
        Method::GET | Method::HEAD if path.legacy_watch || query.flag("watch") => "watch",
        Method::GET | Method::HEAD if collection => "list",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if collection => "deletecollection",
        Method::DELETE => "delete",
        _ => "unknown",
    }
}

fn resource_path(group: &str, version: &str, segments: &[&str]) -> Result<ResourcePath, ApiError> {
    let (legacy_watch, segments) = match segments.first() {
        Some(&"watch") => (true, &segments[1..]),
        _ => (false, segments),
    };
    let owned = |s: &str| s.to_string();
    let mut path = ResourcePath {
        group: group.into(),
        version: version.into(),
        namespace: None,
        resource: String::new(),
        name: None,
        subresource: None,
        legacy_watch,
    };
    // `namespaces/{ns}/{resource}...`, except a Namespace's own subresources.
    let namespaced = segments.len() >= 3
        && segments[0] == "namespaces"
        && !(group.is_empty()
            && segments.len() == 3
            && matches!(segments[2], "status" | "finalize"));
    let rest = if namespaced {
        path.namespace = Some(owned(segments[1]));
        &segments[2..]
    } else {
        segments
    };
    match rest {
        [resource] => path.resource = owned(resource),
        [resource, name] => {
            path.resource = owned(resource);
            path.name = Some(owned(name));
        }
        [resource, name, sub] => {
            path.resource = owned(resource);
            path.name = Some(owned(name));
            path.subresource = Some(owned(sub));
        }
        _ => return Err(ApiError::path_not_found()),
    }
    if path.resource.is_empty() || path.name.as_deref() == Some("") {
        return Err(ApiError::path_not_found());
    }
    Ok(path)
}

/// Parse a request path.
pub fn route(path: &str) -> Result<Route, ApiError> {
    let decoded: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    Ok(match segments.as_slice() {
        ["version"] => Route::Version,
        ["api"] => Route::CoreVersions,
        ["api", version] => Route::GroupVersion(String::new(), (*version).into()),
        ["api", version, rest @ ..] => Route::Resource(resource_path("", version, rest)?),
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).into()),
        ["apis", group, version] => Route::GroupVersion((*group).into(), (*version).into()),
        ["apis", group, version, rest @ ..] => {
            Route::Resource(resource_path(group, version, rest)?)
        }
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3Root,
        ["openapi", "v3", "api", version] => Route::OpenApiV3(String::new(), (*version).into()),
        ["openapi", "v3", "apis", group, version] => {
            Route::OpenApiV3((*group).into(), (*version).into())
        }
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["_devcluster", rest @ ..] => Route::Control(rest.join("/")),
        _ => return Err(ApiError::path_not_found()),
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query-string options.
#[derive(Clone, Debug, Default)]
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn parse(query: Option<&str>) -> Self {
        Self(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A boolean option: present as `true`/`1`/empty.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True"))
    }

    pub fn number(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "invalid value for {key}: {v:?} is not an integer"
                    ))
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match route(path).unwrap() {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths_route_like_the_api_servers() {
        let r = res("/apis/rollcall.dev/v1alpha1/namespaces/shop/backendpools/web/status");
        assert_eq!(
            (
                r.group.as_str(),
                r.namespace.as_deref(),
                r.resource.as_str()
            ),
            ("rollcall.dev", Some("shop"), "backendpools")
        );
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("web"), Some("status"))
        );
        let ns = res("/api/v1/namespaces/shop");
        assert_eq!(
            (ns.resource.as_str(), ns.name.as_deref()),
            ("namespaces", Some("shop"))
        );
        let ns_status = res("/api/v1/namespaces/shop/status");
        assert_eq!(ns_status.subresource.as_deref(), Some("status"));
        assert_eq!(ns_status.namespace, None);
        let pods = res("/api/v1/namespaces/shop/pods");
        assert_eq!((pods.namespace.as_deref(), pods.name), (Some("shop"), None));
        let all = res("/apis/discovery.k8s.io/v1/endpointslices");
        assert_eq!(all.namespace, None);
        let token = res("/api/v1/namespaces/shop/serviceaccounts/app/token");
        assert_eq!(token.subresource.as_deref(), Some("token"));
        let legacy = res("/api/v1/watch/namespaces/shop/pods");
        assert!(legacy.legacy_watch);
        assert_eq!(route("/apis/apps").unwrap(), Route::Group("apps".into()));
        assert_eq!(
            route("/openapi/v3/apis/apps/v1").unwrap(),
            Route::OpenApiV3("apps".into(), "v1".into())
        );
        assert!(route("/nope").is_err());
        assert!(route("/api/v1/a/b/c/d").is_err());
    }

    #[test]
    fn verbs_follow_method_and_query() {
        let list = res("/api/v1/namespaces/shop/pods");
        let one = res("/api/v1/namespaces/shop/pods/web");
        let q = Query::parse(Some("watch=true&labelSelector=app%3Dweb"));
        assert_eq!(q.get("labelSelector"), Some("app=web"));
        assert_eq!(verb(&Method::GET, &list, &q), "watch");
        assert_eq!(verb(&Method::GET, &list, &Query::default()), "list");
        assert_eq!(verb(&Method::GET, &one, &Query::default()), "get");
        assert_eq!(
            verb(&Method::DELETE, &list, &Query::default()),
            "deletecollection"
        );
        assert_eq!(verb(&Method::PATCH, &one, &Query::default()), "patch");
    }
}
