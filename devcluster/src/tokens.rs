//! ServiceAccount tokens: `TokenRequest` (the `serviceaccounts/{name}/token` subresource) issues
//! a signed JWT with the claims a real cluster puts in one (audiences, expiry, the
//! ServiceAccount and the Pod it is bound to), and `TokenReview` checks one the way the API
//! server's authenticator does: signature, expiry, audience, and that the ServiceAccount and
//! bound Pod still exist with the same uids. Tokens are HMAC-signed (a fixture needs no RSA
//! key); nothing outside the server verifies them.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde_json::{Value, json};

use crate::cluster::{Cluster, Db};
use crate::status::{ApiError, ApiResult};
use crate::store::Key;

/// Shortest lifetime a TokenRequest may ask for (ten minutes, as on a cluster).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// Who a valid token says its bearer is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    pub fn to_json(&self) -> Value {
        json!({"username": self.username, "uid": self.uid, "groups": self.groups, "extra": self.extra})
    }
}

use crate::meta::now_unix;

fn sign(key: &[u8], payload: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    URL_SAFE_NO_PAD.encode(hmac::sign(&key, payload.as_bytes()).as_ref())
}

fn object(db: &Db, storage: &str, namespace: &str, name: &str) -> Option<std::sync::Arc<Value>> {
    db.store.get(&Key {
        storage: storage.into(),
        namespace: namespace.into(),
        name: name.into(),
    })
}

fn uid_of(object: &Value) -> String {
    object["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

/// Answer a TokenRequest for ServiceAccount `namespace/name`.
pub fn request(
    cluster: &Cluster,
    db: &Db,
    namespace: &str,
    name: &str,
    body: &Value,
) -> ApiResult<Value> {
    let sa = object(db, "serviceaccounts", namespace, name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let spec = &body["spec"];
    let expiration = spec["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    check_expiration(name, expiration, cluster.settings.min_token_seconds)?;
    let audiences: Vec<String> = match spec["audiences"].as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => vec![cluster.settings.issuer.clone()],
    };
    let mut kubernetes = json!({
        "namespace": namespace,
        "serviceaccount": {"name": name, "uid": uid_of(&sa)},
    });
    let bound = &spec["boundObjectRef"];
    if bound.is_object() {
        let (kind, target_name, uid, node) = bound_object(db, namespace, name, bound)?;
        kubernetes[kind.to_lowercase()] = json!({"name": target_name, "uid": uid});
        if let Some(node) = node {
            kubernetes["node"] = json!({"name": node});
        }
    }
    let iat = now_unix();
    let exp = iat + expiration;
    let claims = json!({
        "aud": audiences,
        "exp": exp,
        "iat": iat,
        "nbf": iat,
        "iss": cluster.settings.issuer,
        "jti": crate::meta::new_uid(),
        "kubernetes.io": kubernetes,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
    });
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","kid":"devcluster","typ":"JWT"}"#);
    let payload = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    let token = format!(
        "{payload}.{}",
        sign(&cluster.settings.signing_key, &payload)
    );
    let expires = crate::meta::rfc3339(exp);
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": {"audiences": claims["aud"], "expirationSeconds": expiration,
                 "boundObjectRef": if bound.is_object() { bound.clone() } else { Value::Null }},
        "status": {"token": token, "expirationTimestamp": expires},
    }))
}

/// `ValidateTokenRequest`'s bounds on the lifetime (the lower one is a setting here; a cluster
/// has ten minutes).
fn check_expiration(name: &str, expiration: i64, min: i64) -> ApiResult<()> {
    let detail = if expiration < min {
        if min == MIN_EXPIRATION_SECONDS {
            "may not specify a duration less than 10 minutes".to_string()
        } else {
            format!("may not specify a duration less than {min} seconds")
        }
    } else if expiration > 1 << 32 {
        "may not specify a duration larger than 2^32 seconds".to_string()
    } else {
        return Ok(());
    };
    let error = crate::admission::FieldError {
        kind: crate::admission::ErrorKind::Invalid,
        field: "spec.expirationSeconds".into(),
        value: Some(json!(expiration)),
        detail,
    };
    let status = crate::admission::invalid_status(
        "TokenRequest",
        "authentication.k8s.io",
        name,
        std::slice::from_ref(&error),
    );
    Err(ApiError::invalid(
        "TokenRequest",
        "authentication.k8s.io",
        name,
        status["message"].as_str().unwrap_or("").to_string(),
        status["details"]["causes"].clone(),
    ))
}

/// The object a token is bound to, checked as the TokenRequest REST handler does: a Pod (run
/// by this ServiceAccount), a Secret or a Node, existing, with the uid the reference names.
/// Returns its kind, name, uid and (for a Pod) its node.
fn bound_object(
    db: &Db,
    namespace: &str,
    service_account: &str,
    bound: &Value,
) -> ApiResult<(String, String, String, Option<String>)> {
    let api_version = bound["apiVersion"].as_str().unwrap_or("");
    let kind = bound["kind"].as_str().unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let target_name = bound["name"].as_str().unwrap_or("");
    let (storage, ns) = match (group, kind) {
        ("", "Pod") => ("pods", namespace),
        ("", "Secret") => ("secrets", namespace),
        ("", "Node") => ("nodes", ""),
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {group}/{version}, Kind={kind}"
            )));
        }
    };
    let target = object(db, storage, ns, target_name)
        .ok_or_else(|| ApiError::not_found("", storage, target_name))?;
    if kind == "Pod"
        && target["spec"]["serviceAccountName"]
            .as_str()
            .unwrap_or("default")
            != service_account
    {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount \"{service_account}\" to pod running with different serviceaccount name."
        )));
    }
    let uid = uid_of(&target);
    if let Some(wanted) = bound["uid"].as_str().filter(|u| !u.is_empty())
        && wanted != uid
    {
        // `errors.NewConflict` of the kind (not the resource), as upstream builds it.
        return Err(ApiError::conflict_with(
            format!(
                "Operation cannot be fulfilled on {kind} \"{target_name}\": the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
            json!({"name": target_name, "kind": kind}),
        ));
    }
    let node = (kind == "Pod")
        .then(|| target["spec"]["nodeName"].as_str().map(String::from))
        .flatten();
    Ok((kind.to_string(), target_name.to_string(), uid, node))
}

/// Check a token for `audiences` (empty: the API server's own). `Ok` carries the user and the
/// audiences the token is good for; `Err` the reason it is not.
pub fn verify(
    cluster: &Cluster,
    db: &Db,
    token: &str,
    audiences: &[String],
) -> Result<(User, Vec<String>), String> {
    const INVALID: &str = "invalid bearer token";
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(INVALID.into());
    };
    if sign(&cluster.settings.signing_key, &format!("{header}.{claims}")) != signature {
        return Err(INVALID.into());
    }
    let claims: Value = URL_SAFE_NO_PAD
        .decode(claims)
        .ok()
        .and_then(|raw| serde_json::from_slice(&raw).ok())
        .ok_or_else(|| INVALID.to_string())?;
    let now = now_unix();
    // go-jose checks times with a leeway (`jwt.DefaultLeeway`, a minute on a cluster).
    let leeway = cluster.settings.token_leeway.as_secs() as i64;
    if claims["exp"].as_i64().is_none_or(|exp| now - leeway > exp) {
        return Err(format!("[{INVALID}, service account token has expired]"));
    }
    if claims["nbf"].as_i64().is_some_and(|nbf| nbf > now + leeway) {
        return Err(format!(
            "[{INVALID}, service account token is not valid yet]"
        ));
    }
    let token_audiences: Vec<String> = claims["aud"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let wanted: Vec<String> = if audiences.is_empty() {
        vec![cluster.settings.issuer.clone()]
    } else {
        audiences.to_vec()
    };
    let granted: Vec<String> = wanted
        .iter()
        .filter(|a| token_audiences.contains(a))
        .cloned()
        .collect();
    if granted.is_empty() {
        return Err(format!(
            "[{INVALID}, token audiences {token_audiences:?} is invalid for the target audiences {wanted:?}]"
        ));
    }
    let k = &claims["kubernetes.io"];
    let namespace = k["namespace"].as_str().unwrap_or("");
    let sa_name = k["serviceaccount"]["name"].as_str().unwrap_or("");
    let sa = object(db, "serviceaccounts", namespace, sa_name)
        .ok_or_else(|| format!("[{INVALID}, serviceaccounts \"{sa_name}\" not found]"))?;
    if uid_of(&sa) != k["serviceaccount"]["uid"].as_str().unwrap_or("") {
        return Err(format!(
            "[{INVALID}, service account UID ({}) does not match claim ({})]",
            uid_of(&sa),
            k["serviceaccount"]["uid"].as_str().unwrap_or("")
        ));
    }
    if let Some(secret) = k.get("secret").filter(|s| s.is_object()) {
        let secret_name = secret["name"].as_str().unwrap_or("");
        let live = object(db, "secrets", namespace, secret_name)
            .ok_or_else(|| format!("[{INVALID}, service account token has been invalidated]"))?;
        let secret_uid = secret["uid"].as_str().unwrap_or("");
        if uid_of(&live) != secret_uid {
            return Err(format!(
                "[{INVALID}, secret UID ({}) does not match service account secret ref claim ({secret_uid})]",
                uid_of(&live)
            ));
        }
    }
    let mut extra = BTreeMap::new();
    if let Some(pod) = k.get("pod").filter(|p| p.is_object()) {
        let pod_name = pod["name"].as_str().unwrap_or("");
        let live = object(db, "pods", namespace, pod_name)
            .ok_or_else(|| format!("[{INVALID}, service account token has been invalidated]"))?;
        let pod_uid = pod["uid"].as_str().unwrap_or("");
        if uid_of(&live) != pod_uid {
            return Err(format!(
                "[{INVALID}, pod UID ({}) does not match service account pod ref claim ({pod_uid})]",
                uid_of(&live)
            ));
        }
        extra.insert(
            "authentication.kubernetes.io/pod-name".into(),
            vec![pod_name.into()],
        );
        extra.insert(
            "authentication.kubernetes.io/pod-uid".into(),
            vec![pod_uid.into()],
        );
    }
    if let Some(node) = k["node"]["name"].as_str() {
        extra.insert(
            "authentication.kubernetes.io/node-name".into(),
            vec![node.into()],
        );
    }
    if let Some(jti) = claims["jti"].as_str() {
        extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={jti}")],
        );
    }
    Ok((
        User {
            username: format!("system:serviceaccount:{namespace}:{sa_name}"),
            uid: uid_of(&sa),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
            extra,
        },
        granted,
    ))
}

/// Answer a TokenReview.
pub fn review(cluster: &Cluster, db: &Db, body: &Value) -> ApiResult<Value> {
    let spec = &body["spec"];
    let token = spec["token"].as_str().unwrap_or("");
    let audiences: Vec<String> = spec["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let status = match verify(cluster, db, token, &audiences) {
        Ok((user, granted)) => {
            json!({"authenticated": true, "user": user.to_json(), "audiences": granted})
        }
        Err(error) => json!({"authenticated": false, "user": {}, "error": error}),
    };
    let mut answer = body.clone();
    answer["status"] = status;
    answer["apiVersion"] = json!("authentication.k8s.io/v1");
    answer["kind"] = json!("TokenReview");
    if answer.get("metadata").is_none() {
        answer["metadata"] = json!({});
    }
    answer["metadata"]["creationTimestamp"] = Value::Null;
    Ok(answer)
}
