//! The agent's REST API (IPA §4.1): `/`, `/v1/`, `/v1/status`, `/v1/commands` and
//! `/v1/commands/{id}`, also without the `/v1` prefix. Every commands call carries the agent
//! token as the `agent_token` query parameter; errors are `{"faultcode", "faultstring"}`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::agent::Agent;
use crate::image::held::Served;
use crate::registry::{ExecuteError, LookupError};

const MEDIA_TYPE: &str = "application/vnd.openstack.ironic-python-agent.v1+json";

/// An error answer in IPA's (WSME) shape.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    faultstring: String,
}

impl ApiError {
    fn new(status: StatusCode, faultstring: impl Into<String>) -> ApiError {
        ApiError {
            status,
            faultstring: faultstring.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let faultcode = if self.status.is_server_error() {
            "Server"
        } else {
            "Client"
        };
        (
            self.status,
            Json(json!({"faultcode": faultcode, "faultstring": self.faultstring})),
        )
            .into_response()
    }
}

/// The agent API's routes.
pub fn router(agent: Arc<Agent>) -> Router {
    let v1 = Router::new()
        .route("/status", get(status))
        .route("/status/", get(status))
        .route("/commands", get(list_commands).post(run_command))
        .route("/commands/", get(list_commands).post(run_command))
        .route("/commands/{id}", get(show_command))
        .route("/commands/{id}/", get(show_command))
        .route("/peer/{swarm}/pieces/{index}", get(peer_piece));
    Router::new()
        .route("/", get(root))
        .route("/v1", get(v1_root))
        .route("/v1/", get(v1_root))
        .nest("/v1", v1.clone())
        .merge(v1)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "Resource not found") })
        .with_state(agent)
}

async fn root() -> Json<Value> {
    let v1 = json!({"id": "v1", "links": [{"href": "/v1/", "rel": "self"}]});
    Json(json!({
        "name": "OpenStack Ironic Python Agent API",
        "description": "Ironic Python Agent is a provisioning agent for OpenStack Ironic (served by ferric-agent)",
        "versions": [v1.clone()],
        "default_version": v1,
    }))
}

async fn v1_root() -> Json<Value> {
    Json(json!({
        "id": "v1",
        "links": [{"href": "/v1/", "rel": "self"}],
        "media_types": [{"base": "application/json", "type": MEDIA_TYPE}],
        "commands": [{"href": "/v1/commands/", "rel": "self"}],
        "status": [{"href": "/v1/status/", "rel": "self"}],
    }))
}

async fn status(State(agent): State<Arc<Agent>>) -> Json<Value> {
    Json(json!({"started_at": agent.started_at(), "version": crate::AGENT_VERSION}))
}

/// Refuses a call without the right token (401), as IPA does, also before any token is known.
fn check_token(agent: &Agent, query: &HashMap<String, String>) -> Result<(), ApiError> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: invalid or missing agent token",
        )
    };
    let expected = agent.token().ok_or_else(unauthorized)?;
    let given = query.get("agent_token").ok_or_else(unauthorized)?;
    if crate::secret::constant_time_eq(expected.as_bytes(), given.as_bytes()) {
        Ok(())
    } else {
        Err(unauthorized())
    }
}

fn wait_flag(query: &HashMap<String, String>) -> Result<bool, ApiError> {
    match query.get("wait").map(|value| value.to_ascii_lowercase()) {
        None => Ok(false),
        Some(value) => match value.as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" | "" => Ok(false),
            other => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("Invalid value {other:?} for wait: use true or false"),
            )),
        },
    }
}

async fn list_commands(
    State(agent): State<Arc<Agent>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    check_token(&agent, &query)?;
    Ok(Json(json!({"commands": agent.command_results()})))
}

async fn show_command(
    State(agent): State<Arc<Agent>>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    check_token(&agent, &query)?;
    let wait = wait_flag(&query)?;
    let record = agent
        .command(&id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("Command {id} not found")))?;
    if wait {
        record.wait().await;
    }
    Ok(Json(json!(record.snapshot())))
}

/// A piece of the image this agent wrote, for another agent of its swarm (peer-assisted
/// delivery, `image/peers.rs`): the swarm's secret as a bearer token; only pieces this agent
/// verified and wrote.
async fn peer_piece(
    State(agent): State<Arc<Agent>>,
    Path((swarm, index)): Path<(String, usize)>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let Some(held) = agent.peer_swarm() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "this agent is in no image swarm",
        ));
    };
    let secret = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !held.admits(&swarm, secret.trim()) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: wrong swarm or swarm secret",
        ));
    }
    let Some(piece) = held.piece(index) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("piece {index} is not held here"),
        ));
    };
    let octets = [(axum::http::header::CONTENT_TYPE, "application/octet-stream")];
    match piece {
        Served::Kept(bytes) => Ok((octets, Vec::clone(&bytes)).into_response()),
        Served::Disk(reader) => {
            let length = [(axum::http::header::CONTENT_LENGTH, reader.len().to_string())];
            let chunks = futures_util::stream::unfold(reader, |mut reader| async move {
                let (reader, chunk) = tokio::task::spawn_blocking(move || {
                    let chunk = reader.next_chunk();
                    (reader, chunk)
                })
                .await
                .ok()?;
                chunk.map(|chunk| (chunk, reader))
            });
            Ok((octets, length, axum::body::Body::from_stream(chunks)).into_response())
        }
    }
}

async fn run_command(
    State(agent): State<Arc<Agent>>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    check_token(&agent, &query)?;
    let wait = wait_flag(&query)?;
    let bad = |message: &str| ApiError::new(StatusCode::BAD_REQUEST, message);
    let body: Value = serde_json::from_slice(&body)
        .map_err(|error| bad(&format!("Invalid JSON body: {error}")))?;
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("Missing or invalid name: the body must be {\"name\": \"<extension>.<command>\", \"params\": {...}}"))?;
    let params = body
        .get("params")
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| bad("Missing or invalid params: must be an object"))?;
    match agent.execute(name, params, wait).await {
        Ok(result) => Ok(Json(json!(result))),
        Err(ExecuteError::Busy) => Err(ApiError::new(StatusCode::CONFLICT, "Agent is busy")),
        Err(ExecuteError::Lookup(error @ LookupError::UnknownExtension(_))) => {
            Err(ApiError::new(StatusCode::NOT_FOUND, error.to_string()))
        }
        Err(error) => Err(ApiError::new(StatusCode::BAD_REQUEST, error.to_string())),
    }
}
