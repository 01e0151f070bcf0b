//! The API server's error answers: a `metav1.Status` with the HTTP code, reason and message a
//! real kube-apiserver sends for the same failure, so clients take the same code paths here
//! (kube-rs and client-go branch on `reason`, kubectl prints `message`).

use serde_json::{Value, json};

/// One refused request, rendered as a `Status` object.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Value>>,
    /// Seconds a client should wait before retrying (`Retry-After`).
    pub retry_after: Option<u64>,
    /// The `Status`'s list metadata (the inconsistent `continue` token of an expired page).
    pub list_meta: Option<Box<Value>>,
}

/// Every handler answers with a value or an [`ApiError`].
pub type ApiResult<T> = Result<T, ApiError>;

/// What a resource is called in messages: `backendpools.rollcall.dev`, `pods`.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(group: &str, kind: &str, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": kind});
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

/// Where kube-apiserver keeps an object in etcd: `/registry/configmaps/ns/name`,
/// `/registry/rollcall.dev/backendpools/ns/name` (messages that quote storage errors show it).
fn etcd_key(t: &crate::catalog::ResourceType, key: &crate::store::Key) -> String {
    let prefix = if t.is_custom() {
        format!("{}/{}", t.group, t.resource)
    } else {
        match t.resource.as_str() {
            "services" => "services/specs".into(),
            "endpoints" => "services/endpoints".into(),
            "nodes" => "minions".into(),
            other => other.to_string(),
        }
    };
    if key.namespace.is_empty() {
        format!("/registry/{prefix}/{}", key.name)
    } else {
        format!("/registry/{prefix}/{}/{}", key.namespace, key.name)
    }
}

// === impl ApiError ===

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            list_meta: None,
        }
    }

    /// The same refusal under another code and reason (injected faults use this).
    pub fn with_code(mut self, code: u16, reason: &'static str) -> Self {
        self.code = code;
        self.reason = reason;
        self
    }

    pub fn with_list_meta(mut self, meta: Value) -> Self {
        self.list_meta = Some(Box::new(meta));
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// `pods "web" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(details(group, resource, name))
    }

    /// A path the server does not serve at all.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(details(group, resource, name))
    }

    /// A write against a stale `resourceVersion`.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
        )
        .with_details(details(group, resource, name))
    }

    /// A conflict with a free-form message (a failed precondition, server-side apply).
    pub fn conflict_with(message: impl Into<String>, details: Value) -> Self {
        Self::new(409, "Conflict", message).with_details(details)
    }

    /// A failed uid or resourceVersion precondition, as etcd3's `checkPreconditions` reports it
    /// and `InterpretUpdateError`/`InterpretDeleteError` turn it into a conflict.
    pub fn precondition_failed(
        t: &crate::catalog::ResourceType,
        key: &crate::store::Key,
        detail: String,
    ) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{}\": StorageError: invalid object, Code: 4, \
             Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {detail}",
            t.qualified(),
            key.name,
            etcd_key(t, key)
        );
        Self::new(409, "Conflict", message).with_details(details(&t.group, &t.resource, &key.name))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// An object refused by validation: `message` is the whole `Kind "name" is invalid: ...`.
    pub fn invalid(kind: &str, group: &str, name: &str, message: String, causes: Value) -> Self {
        let mut d = details(group, kind, name);
        d["causes"] = causes;
        Self::new(422, "Invalid", message).with_details(d)
    }

    pub fn method_not_allowed(verb: &str, group: &str, resource: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({verb} {})",
                qualified(group, resource)
            ),
        )
    }

    /// `negotiation.NewUnsupportedMediaTypeError`: the accepted types, not the one sent.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types \
                 include: {}",
                accepted.join(", ")
            ),
        )
    }

    pub fn not_acceptable(accepted: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!("only the following media types are accepted: {accepted}"),
        )
    }

    /// A `resourceVersion` or `continue` token older than the retained history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        );
        e.retry_after = Some(retry_after);
        e
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// The `Status` object sent as the response body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = (**details).clone();
        }
        if let Some(meta) = &self.list_meta {
            status["metadata"] = (**meta).clone();
        }
        if let Some(after) = self.retry_after {
            status["details"]["retryAfterSeconds"] = json!(after);
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// The `Status` a successful delete answers with when the kind does not return the object.
pub fn success_status(group: &str, kind: &str, name: &str, uid: &str) -> Value {
    let mut d = details(group, kind, name);
    d["uid"] = json!(uid);
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_reads_like_the_api_servers() {
        let e = ApiError::conflict("rollcall.dev", "backendpools", "web");
        assert_eq!(e.code, 409);
        assert_eq!(
            e.to_status()["message"],
            "Operation cannot be fulfilled on backendpools.rollcall.dev \"web\": the object has \
             been modified; please apply your changes to the latest version and try again"
        );
    }

    #[test]
    fn not_found_names_core_resources_without_a_group() {
        let s = ApiError::not_found("", "namespaces", "shop").to_status();
        assert_eq!(s["message"], "namespaces \"shop\" not found");
        assert_eq!(s["details"], json!({"name": "shop", "kind": "namespaces"}));
    }
}
