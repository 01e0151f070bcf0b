//! The requests that are answered and never stored: TokenReview, SubjectAccessReview and
//! SelfSubjectAccessReview (`create` on their collections), and TokenRequest (`create` on a
//! ServiceAccount's `token` subresource).

use bytes::Bytes;
use http::Response;

use super::Call;
use super::write::{check_kind, parse_body};
use crate::catalog::ResourceType;
use crate::http::{Body, json_response};
use crate::status::ApiResult;
use crate::tokens;

/// TokenReview, SubjectAccessReview, SelfSubjectAccessReview: answered, never stored.
pub fn review(call: &Call, t: &ResourceType, body: &Bytes) -> ApiResult<Response<Body>> {
    let mut object = parse_body(call, body)?;
    check_kind(t, &mut object)?;
    let db = call.cluster.lock();
    let answer = match t.kind.as_str() {
        "TokenReview" => tokens::review(&call.cluster, &db, &object)?,
        _ => crate::rbac::review(&db, t, &object, &call.user)?,
    };
    Ok(json_response(201, &answer))
}

/// `POST serviceaccounts/{name}/token`.
pub fn token_request(call: &Call, body: &Bytes) -> ApiResult<Response<Body>> {
    let object = parse_body(call, body)?;
    let name = call.path.name.clone().unwrap_or_default();
    let db = call.cluster.lock();
    let answer = tokens::request(&call.cluster, &db, call.namespace(), &name, &object)?;
    Ok(json_response(201, &answer))
}
