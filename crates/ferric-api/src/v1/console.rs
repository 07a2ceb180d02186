//! The node's serial console (issue 24, `docs/console.md`): Ironic's `GET` and `PUT
//! /v1/nodes/{node_ident}/states/console`, and Ferric's WebSocket onto the relayed console,
//! `GET /v1/nodes/{node_ident}/console/stream`.
//!
//! Enabling and disabling are handed to the node's conductor like a power change (it checks
//! the console interface under the node's lease and starts or stops the relay). The stream
//! attaches to the relay of this process's conductor: the server first sends the retained
//! tail of the output, then live output, as binary frames; text or binary frames from the
//! client are keystrokes. A caller the policy lets watch but not type
//! (`baremetal:node:console:input`, decided by the authorization middleware) is closed with
//! 1008 at its first keystroke; everyone is closed with 1000 when the console is disabled.
//!
//! Browsers cannot set headers on a WebSocket, so `auth.rs` also takes the Basic credentials as
//! `?token=` on this path, and only here (`docs/console.md`).

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_conductor::ConsoleHub;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::base_url;
use super::body::{BodyField, BodySpec, Kind};
use super::states::{conductor_error, node};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// Whether the caller of the console stream may type, as the authorization middleware found
/// (`baremetal:node:console:input`). Absent without authentication: everyone may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsoleInput(pub bool);

/// WebSocket close codes (RFC 6455 §7.4.1).
const CLOSE_NORMAL: u16 = 1000;
const CLOSE_POLICY: u16 = 1008;

/// `GET /v1/nodes/{node_ident}/states/console`: `{"console_enabled", "console_info"}`.
pub async fn node_console_get(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    if !node.console_enabled {
        return Ok(Json(
            json!({"console_enabled": false, "console_info": null}),
        ));
    }
    let info = state
        .conductor
        .console_info(node.uuid)
        .await
        .map_err(conductor_error)?;
    Ok(Json(json!({
        "console_enabled": info.is_some(),
        "console_info": info.map(|info| json!({"type": info.kind, "url": info.url})),
    })))
}

/// The body of `PUT …/states/console`.
pub(crate) static CONSOLE_BODY: BodySpec = BodySpec::new(
    "ConsoleRequest",
    &[BodyField::new("enabled", Kind::Flag)
        .required()
        .invalid("Invalid value for enabled: {value} is not a boolean (use true or false).")
        .refused("Invalid value for {name}: '{text}' is not a boolean (use true or false).")],
)
.unknown("Unknown field '{name}' in a console request.");

/// `PUT /v1/nodes/{node_ident}/states/console` `{"enabled": true|false}`: 202.
pub async fn node_console_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let enabled = CONSOLE_BODY
        .parse(&body, version)?
        .flag("enabled")
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'enabled'."))?;
    let node = node(&state, &ident).await?;
    state
        .conductor
        .set_console(node.uuid, enabled)
        .await
        .map_err(conductor_error)?;
    let mut response = StatusCode::ACCEPTED.into_response();
    let location = format!("{}/v1/nodes/{ident}/states/console", base_url(&headers));
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}

/// `GET /v1/nodes/{node_ident}/console/stream`: the console over a WebSocket.
pub async fn node_console_stream(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
    input: Option<Extension<ConsoleInput>>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let node = node(&state, &ident).await?;
    let not_enabled = || {
        ApiError::conflict(format!(
            "The console of node {} is not enabled; enable it with PUT \
             /v1/nodes/{}/states/console {{\"enabled\": true}}.",
            node.uuid, node.uuid
        ))
    };
    if !node.console_enabled {
        return Err(not_enabled());
    }
    let hub = state
        .conductor
        .local_console(node.uuid)
        .await
        .map_err(conductor_error)?
        .ok_or_else(not_enabled)?;
    let may_type = input.is_none_or(|Extension(ConsoleInput(allowed))| allowed);
    Ok(upgrade.on_upgrade(move |socket| relay(socket, hub, may_type)))
}

async fn close(mut socket: WebSocket, code: u16, reason: &'static str) {
    let frame = CloseFrame {
        code,
        reason: Utf8Bytes::from_static(reason),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

async fn relay(mut socket: WebSocket, hub: Arc<ConsoleHub>, may_type: bool) {
    let stop = hub.stopped();
    let (tail, mut live) = hub.subscribe();
    if !tail.is_empty() && socket.send(Message::Binary(tail.into())).await.is_err() {
        return;
    }
    loop {
        let typed: Bytes = tokio::select! {
            () = stop.cancelled() => {
                return close(socket, CLOSE_NORMAL, "the console was disabled").await;
            }
            output = live.recv() => {
                match output {
                    Ok(bytes) => {
                        if socket.send(Message::Binary(bytes.into())).await.is_err() {
                            return;
                        }
                    }
                    // A viewer too slow to keep up skips what it missed.
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => {
                        return close(socket, CLOSE_NORMAL, "the console was disabled").await;
                    }
                }
                continue;
            }
            message = socket.recv() => match message {
                Some(Ok(Message::Binary(bytes))) => bytes,
                Some(Ok(Message::Text(text))) => Bytes::copy_from_slice(text.as_str().as_bytes()),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
            },
        };
        if !may_type {
            return close(
                socket,
                CLOSE_POLICY,
                "read-only: your role may watch this console but not type on it",
            )
            .await;
        }
        if !hub.type_in(typed.to_vec()) {
            return close(socket, CLOSE_NORMAL, "the console was disabled").await;
        }
    }
}
