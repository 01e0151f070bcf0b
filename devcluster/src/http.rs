//! The HTTP side: accept connections on 127.0.0.1, authenticate each request (the admin
//! token from the kubeconfig, or a ServiceAccount token the server issued), apply the fault
//! switches, route to discovery, OpenAPI, the resource handlers or the fixture's control
//! endpoints, and log what was asked and answered.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::cluster::{Authorization, Cluster};
use crate::log::Entry;
use crate::rbac::{self, Attributes};
use crate::request::{Query, Route, route, verb};
use crate::status::ApiError;
use crate::tokens::User;
use crate::{control, discovery, handlers, meta, openapi};

/// Every response body.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The largest request body the server reads (the API server's own limit is 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

pub fn json_response(code: u16, value: &Value) -> Response<Body> {
    let mut response = Response::new(full(value.to_string()));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An error answer; a status whose details name `retryAfterSeconds` also says so in
/// `Retry-After`, as the API server's `ErrorNegotiated` writes it.
pub fn error_response(e: &ApiError) -> Response<Body> {
    let status = e.to_status();
    let mut response = json_response(e.code, &status);
    if let Some(after) = status["details"]["retryAfterSeconds"]
        .as_u64()
        .filter(|s| *s > 0)
        && let Ok(v) = HeaderValue::from_str(&after.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

/// Warnings as the API server sends them: `Warning: 299 - "text"`.
pub fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
}

fn admin() -> User {
    User {
        username: "devcluster-admin".into(),
        uid: String::new(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        extra: Default::default(),
    }
}

fn anonymous() -> User {
    User {
        username: "system:anonymous".into(),
        uid: String::new(),
        groups: vec!["system:unauthenticated".into()],
        extra: Default::default(),
    }
}

/// Who is asking: `Err(401)` for a token the server does not accept.
fn authenticate(cluster: &Cluster, headers: &HeaderMap) -> Result<User, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(anonymous());
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(ApiError::unauthorized)?;
    if token == cluster.settings.admin_token {
        return Ok(admin());
    }
    let db = cluster.lock();
    crate::tokens::verify(cluster, &db, token, &[])
        .map(|(user, _)| user)
        .map_err(|_| ApiError::unauthorized())
}

/// Serve HTTPS until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    cluster: Arc<Cluster>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, _) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let cluster = cluster.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |req| {
                let cluster = cluster.clone();
                async move { Ok::<_, Infallible>(handle(cluster, req).await) }
            });
            if let Err(e) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
}

async fn read_body(body: Incoming) -> Result<Bytes, ApiError> {
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::bad_request(
            format!("Request entity too large: limit is {MAX_BODY}"),
        )
        .with_code(413, "RequestEntityTooLarge")),
        Err(e) => Err(ApiError::bad_request(format!(
            "reading the request body: {e}"
        ))),
    }
}

async fn handle(cluster: Arc<Cluster>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = Query::parse(parts.uri.query());
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut entry = Entry {
        time: meta::now_micro(),
        user: String::new(),
        verb: parts.method.as_str().to_lowercase(),
        api_group: String::new(),
        api_version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        path: path.clone(),
        code: 0,
        user_agent,
    };
    let response = match answer(&cluster, &parts, &path, &query, body, &mut entry).await {
        Ok(response) => response,
        Err(e) => error_response(&e),
    };
    entry.code = response.status().as_u16();
    if !path.starts_with("/_devcluster") {
        tracing::debug!(verb = %entry.verb, path = %path, code = entry.code, user = %entry.user, "request");
        cluster.log.record(entry);
    }
    response
}

async fn answer(
    cluster: &Arc<Cluster>,
    parts: &http::request::Parts,
    path: &str,
    query: &Query,
    body: Incoming,
    entry: &mut Entry,
) -> Result<Response<Body>, ApiError> {
    let route = route(path)?;
    if let Route::Control(what) = &route {
        let body = read_body(body).await?;
        return control::handle(cluster, &parts.method, what, query, &body);
    }
    let user = authenticate(cluster, &parts.headers)?;
    entry.user = user.username.clone();
    let public = matches!(route, Route::Version | Route::Health);
    if user.username == "system:anonymous" && !public {
        return Err(ApiError::forbidden(format!(
            "forbidden: User \"system:anonymous\" cannot get path \"{path}\""
        )));
    }
    if cluster.settings.authorization == Authorization::Rbac {
        let attributes = match &route {
            Route::Resource(rp) => Attributes {
                verb: verb(&parts.method, rp, query).to_string(),
                group: rp.group.clone(),
                resource: rp.resource.clone(),
                subresource: rp.subresource.clone().unwrap_or_default(),
                namespace: rp.namespace.clone().unwrap_or_default(),
                name: rp.name.clone().unwrap_or_default(),
                path: String::new(),
            },
            _ => Attributes {
                verb: parts.method.as_str().to_lowercase(),
                path: path.to_string(),
                ..Default::default()
            },
        };
        let db = cluster.lock();
        if !rbac::allowed(&db, &user, &attributes) {
            return Err(rbac::forbidden(&user, &attributes));
        }
    }
    match route {
        Route::Version => Ok(json_response(200, &discovery::version())),
        Route::Health => {
            let mut r = Response::new(full("ok"));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            Ok(r)
        }
        Route::CoreVersions if discovery::wants_aggregated(&parts.headers) => {
            Ok(discovery::core_aggregated(cluster))
        }
        Route::CoreVersions => Ok(json_response(200, &discovery::core_versions(parts))),
        Route::Groups => Ok(discovery::groups(cluster, &parts.headers)),
        Route::Group(group) => discovery::group(cluster, &group).map(|v| json_response(200, &v)),
        Route::GroupVersion(group, version) => {
            discovery::resources(cluster, &group, &version).map(|v| json_response(200, &v))
        }
        Route::OpenApiV2 => {
            Err(ApiError::not_acceptable("application/json").with_code(404, "NotFound"))
        }
        Route::OpenApiV3Root => Ok(json_response(200, &openapi::root(cluster))),
        Route::OpenApiV3(group, version) => {
            openapi::group_version(cluster, &group, &version).map(|v| json_response(200, &v))
        }
        Route::Control(_) => Err(ApiError::path_not_found()),
        Route::Resource(rp) => {
            let verb = verb(&parts.method, &rp, query);
            entry.verb = verb.to_string();
            entry.api_group = rp.group.clone();
            entry.api_version = rp.version.clone();
            entry.resource = rp.resource.clone();
            entry.subresource = rp.subresource.clone().unwrap_or_default();
            entry.namespace = rp.namespace.clone().unwrap_or_default();
            entry.name = rp.name.clone().unwrap_or_default();
            entry.path.clear();
            if let Some(failure) = cluster.faults.before(verb, &rp.resource).await {
                return Err(failure);
            }
            let body = read_body(body).await?;
            let call = handlers::Call {
                cluster: cluster.clone(),
                path: rp,
                query: query.clone(),
                headers: parts.headers.clone(),
                user,
                verb,
            };
            handlers::handle(call, &parts.method, body).await
        }
    }
}
