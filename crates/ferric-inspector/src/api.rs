//! The inspection service's HTTP API: ironic-inspector v1 (`reference/ironic.md` §5.1).
//!
//! Versions 1.0–1.18 with inspector's headers on every response; no header means the latest
//! (unlike Ironic). Errors are `{"error": {"message": …}}`. Everything is unauthenticated, as
//! `noauth` ironic-inspector is: bind it to loopback or a management network.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::rules::Rule;
use crate::service::{Service, ServiceError};

pub const VERSION_HEADER: &str = "x-openstack-ironic-inspector-api-version";
pub const MINIMUM_HEADER: &str = "x-openstack-ironic-inspector-api-minimum-version";
pub const MAXIMUM_HEADER: &str = "x-openstack-ironic-inspector-api-maximum-version";
pub const MIN_VERSION: (u16, u16) = (1, 0);
pub const MAX_VERSION: (u16, u16) = (1, 18);
/// Rule creation answers 201 from this version on (200 before).
const RULE_CREATED_SINCE: u16 = 6;

fn version_text((major, minor): (u16, u16)) -> String {
    format!("{major}.{minor}")
}

/// The service's router.
pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/v1", get(v1_root))
        .route("/v1/", get(v1_root))
        .route("/v1/introspection", get(introspection_list))
        .route(
            "/v1/introspection/{node}",
            get(introspection_get).post(introspection_start),
        )
        .route("/v1/introspection/{node}/abort", post(introspection_abort))
        .route("/v1/introspection/{node}/data", get(introspection_data))
        .route("/v1/continue", post(continue_))
        .route(
            "/v1/rules",
            get(rule_list).post(rule_create).delete(rule_delete_all),
        )
        .route("/v1/rules/{uuid}", get(rule_get).delete(rule_delete))
        .fallback(not_found)
        .layer(middleware::from_fn(versions))
        .with_state(service)
}

struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": {"message": self.1}}))).into_response()
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let status = match &error {
            ServiceError::NotFound(_) => StatusCode::NOT_FOUND,
            ServiceError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ServiceError::Conflict(_) => StatusCode::CONFLICT,
            ServiceError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self(status, error.to_string())
    }
}

fn parse_version(text: &str) -> Option<(u16, u16)> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("latest") {
        return Some(MAX_VERSION);
    }
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The requested version (406 outside the range) and the three headers on every response.
async fn versions(mut request: Request, next: Next) -> Response {
    let requested = request
        .headers()
        .get(VERSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let version = match requested.as_deref() {
        None => Ok(MAX_VERSION),
        Some(text) => match parse_version(text) {
            Some(version) if (MIN_VERSION..=MAX_VERSION).contains(&version) => Ok(version),
            Some(_) => Err(ApiError(
                StatusCode::NOT_ACCEPTABLE,
                format!(
                    "Unsupported API version {text}, supported range is {} to {}",
                    version_text(MIN_VERSION),
                    version_text(MAX_VERSION)
                ),
            )),
            None => Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!("Malformed API version {text}, expected format is X.Y or latest"),
            )),
        },
    };
    let shown = version.as_ref().map_or(MAX_VERSION, |version| *version);
    let mut response = match version {
        Ok(version) => {
            request.extensions_mut().insert(Version(version));
            next.run(request).await
        }
        Err(error) => error.into_response(),
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (MINIMUM_HEADER, version_text(MIN_VERSION)),
        (MAXIMUM_HEADER, version_text(MAX_VERSION)),
        (VERSION_HEADER, version_text(shown)),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

/// The version a request negotiated.
#[derive(Debug, Clone, Copy)]
struct Version((u16, u16));

fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("127.0.0.1:5050");
    format!("http://{host}")
}

async fn not_found() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "The resource could not be found.".into(),
    )
}

async fn root(headers: HeaderMap) -> Json<Value> {
    let base = base_url(&headers);
    Json(json!({"versions": [{
        "id": version_text(MAX_VERSION),
        "status": "CURRENT",
        "links": [{"href": format!("{base}/v1"), "rel": "self"}],
    }]}))
}

async fn v1_root(headers: HeaderMap) -> Json<Value> {
    let base = base_url(&headers);
    let resources = ["introspection", "continue", "rules"].map(|name| {
        json!({"name": name, "links": [{"href": format!("{base}/v1/{name}"), "rel": "self"}]})
    });
    Json(json!({"resources": resources}))
}

#[derive(Debug, Deserialize)]
struct StartQuery {
    manage_boot: Option<String>,
}

async fn introspection_start(
    State(service): State<Arc<Service>>,
    Path(node): Path<String>,
    Query(query): Query<StartQuery>,
) -> Result<StatusCode, ApiError> {
    let manage_boot = match query.manage_boot.as_deref().map(str::to_ascii_lowercase) {
        None => true,
        Some(text) => match text.as_str() {
            "true" | "1" | "yes" | "on" => true,
            "false" | "0" | "no" | "off" => false,
            _ => {
                return Err(ApiError(
                    StatusCode::BAD_REQUEST,
                    format!("Invalid boolean value for manage_boot: {text}"),
                ));
            }
        },
    };
    service.start(&node, manage_boot).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn introspection_get(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Path(node): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let status = service.status(&node).await?;
    Ok(Json(status.status_json(&base_url(&headers))))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    marker: Option<String>,
    limit: Option<String>,
}

async fn introspection_list(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let marker = match query.marker.as_deref() {
        None => None,
        Some(text) => Some(Uuid::parse_str(text).map_err(|_| {
            ApiError(
                StatusCode::BAD_REQUEST,
                format!("Invalid UUID value for marker: {text}"),
            )
        })?),
    };
    let limit = match query.limit.as_deref() {
        None => 1000,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|limit| *limit > 0)
            .ok_or_else(|| {
                ApiError(
                    StatusCode::BAD_REQUEST,
                    format!("Invalid limit value: {text}"),
                )
            })?,
    };
    let base = base_url(&headers);
    let items: Vec<Value> = service
        .list(marker, limit)
        .await?
        .iter()
        .map(|entry| entry.status_json(&base))
        .collect();
    Ok(Json(json!({"introspection": items})))
}

async fn introspection_abort(
    State(service): State<Arc<Service>>,
    Path(node): Path<String>,
) -> Result<StatusCode, ApiError> {
    service.abort(&node).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn introspection_data(
    State(service): State<Arc<Service>>,
    Path(node): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(service.data(&node).await?))
}

fn json_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|error| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!("Invalid JSON body: {error}"),
        )
    })
}

async fn continue_(
    State(service): State<Arc<Service>>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let payload = json_body(&body)?;
    let node = service.continue_(&payload).await?;
    Ok(Json(json!({"uuid": node})))
}

async fn rule_list(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let base = base_url(&headers);
    let rules: Vec<Value> = service
        .rule_list()
        .await?
        .iter()
        .map(|rule| {
            json!({
                "uuid": rule.uuid,
                "description": rule.description,
                "links": [{"href": format!("{base}/v1/rules/{}", rule.uuid), "rel": "self"}],
            })
        })
        .collect();
    Ok(Json(json!({"rules": rules})))
}

async fn rule_create(
    State(service): State<Arc<Service>>,
    request: Request,
) -> Result<Response, ApiError> {
    let Version((_, minor)) = request
        .extensions()
        .get::<Version>()
        .copied()
        .unwrap_or(Version(MAX_VERSION));
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .map_err(|error| ApiError(StatusCode::BAD_REQUEST, format!("Invalid body: {error}")))?;
    let rule = Rule::from_body(&json_body(&body)?)
        .map_err(|error| ApiError(StatusCode::BAD_REQUEST, error.to_string()))?;
    let rule = service.rule_create(rule).await?;
    let status = if minor >= RULE_CREATED_SINCE {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(rule.to_json())).into_response())
}

fn rule_uuid(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError(StatusCode::NOT_FOUND, format!("Rule {text} was not found")))
}

async fn rule_get(
    State(service): State<Arc<Service>>,
    Path(uuid): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(service.rule_get(rule_uuid(&uuid)?).await?.to_json()))
}

async fn rule_delete(
    State(service): State<Arc<Service>>,
    Path(uuid): Path<String>,
) -> Result<StatusCode, ApiError> {
    service.rule_delete(rule_uuid(&uuid)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn rule_delete_all(State(service): State<Arc<Service>>) -> Result<StatusCode, ApiError> {
    service.rule_delete_all().await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("1.12"), Some((1, 12)));
        assert_eq!(parse_version("latest"), Some(MAX_VERSION));
        assert_eq!(parse_version("one"), None);
    }
}
