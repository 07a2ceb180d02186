//! The node's firmware settings, interrupts and indicators: `PUT …/states/boot_mode` and
//! `…/states/secure_boot` (1.76, 202), `PUT …/management/inject_nmi` (1.29, 204) and
//! `…/management/indicators[/{name}@{component}]` (1.63; like Ironic 39, served whatever the
//! requested version: its controller checks none).
//!
//! Like the power state change, each is checked here and handed to the node's conductor
//! (`Handoff`), which does it through the node's management interface under the node's lease
//! and records `boot_mode` / `secure_boot`. A management interface that cannot do it answers
//! 400 naming the driver.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_model::resources::Node;
use ferric_model::values::{BootMode, IndicatorState};
use serde_json::{Value, json};

use super::parse_bool_param;
use super::states::{accepted, conductor_error, node, refuse_leftovers, required};
use super::{base_url, json_object_body, links};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// 409 while the node is between stable states, as Ironic refuses it (a deploy or cleaning
/// may be changing the same firmware setting).
fn check_stable(node: &Node) -> Result<(), ApiError> {
    let state = node.provision_state;
    if state.is_stable() {
        return Ok(());
    }
    Err(ApiError::conflict(format!(
        "Node {} is in {} state. Since node is transitioning, the boot mode will not be set as \
         this may interfere with ongoing changes and result in erroneous modification. Try \
         again later.",
        node.uuid,
        state.as_str()
    )))
}

/// `PUT /v1/nodes/{node_ident}/states/boot_mode` `{"target": "uefi"|"bios"}`: 202.
pub async fn node_boot_mode_set(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut body = json_object_body(&body)?;
    let target = required(&mut body, "target")?;
    refuse_leftovers(&body, "a boot mode request")?;
    let mode: BootMode = target
        .as_str()
        .and_then(|name| name.parse().ok())
        .ok_or_else(|| {
            let shown = target
                .as_str()
                .map_or_else(|| target.to_string(), str::to_owned);
            ApiError::bad_request(format!(
                "Invalid boot mode {shown} requested for node. Allowed boot modes are: bios, \
                 uefi"
            ))
        })?;
    let node = node(&state, &ident).await?;
    check_stable(&node)?;
    state
        .conductor
        .set_boot_mode(node.uuid, mode)
        .await
        .map_err(conductor_error)?;
    Ok(accepted(&headers, &ident))
}

/// `PUT /v1/nodes/{node_ident}/states/secure_boot` `{"target": true|false}`: 202.
pub async fn node_secure_boot_set(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut body = json_object_body(&body)?;
    let target = required(&mut body, "target")?;
    refuse_leftovers(&body, "a secure boot request")?;
    let invalid = || {
        ApiError::bad_request(format!(
            "Invalid secure_boot {target} requested for node. Allowed secure_boot states are: \
             true, false."
        ))
    };
    // Ironic reads the target as a boolean, text included ("true", "off", …).
    let enabled = match &target {
        Value::Bool(enabled) => *enabled,
        Value::String(text) => parse_bool_param("target", text).map_err(|_| invalid())?,
        _ => return Err(invalid()),
    };
    let node = node(&state, &ident).await?;
    check_stable(&node)?;
    state
        .conductor
        .set_secure_boot(node.uuid, enabled)
        .await
        .map_err(conductor_error)?;
    Ok(accepted(&headers, &ident))
}

/// `PUT /v1/nodes/{node_ident}/management/inject_nmi` (body `{}`): 204 once the BMC took it.
pub async fn node_inject_nmi(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    if !body.iter().all(u8::is_ascii_whitespace) {
        let body = json_object_body(&body)?;
        refuse_leftovers(&body, "an NMI request (send {})")?;
    }
    let node = node(&state, &ident).await?;
    state
        .conductor
        .inject_nmi(node.uuid)
        .await
        .map_err(conductor_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `{name}@{component}` split as Ironic does, at the first `@`: 400 without one.
fn indicator_parts(indicator: &str) -> Result<(&str, &str), ApiError> {
    indicator
        .split_once('@')
        .ok_or_else(|| ApiError::bad_request(format!("Malformed indicator name \"{indicator}\"")))
}

/// `GET /v1/nodes/{node_ident}/management/indicators`: `{"indicators": [...]}`, each with its
/// `{name}@{component}` name, component, `readonly`, `states` and links.
pub async fn node_indicators(
    State(state): State<ApiState>,
    headers: HeaderMap,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    let indicators = state
        .conductor
        .indicators(node.uuid)
        .await
        .map_err(conductor_error)?;
    let base = base_url(&headers);
    let shown: Vec<Value> = indicators
        .iter()
        .map(|indicator| {
            let name = format!("{}@{}", indicator.name, indicator.component);
            json!({
                "name": name,
                "component": indicator.component,
                "readonly": indicator.readonly,
                "states": indicator.states.iter().map(|state| state.as_str()).collect::<Vec<_>>(),
                "links": links(&base, &format!("nodes/{ident}/management/indicators/{name}")),
            })
        })
        .collect();
    Ok(Json(json!({ "indicators": shown })))
}

/// `GET /v1/nodes/{node_ident}/management/indicators/{name}@{component}`: `{"state": …}`.
pub async fn node_indicator_get(
    State(state): State<ApiState>,
    Path((ident, indicator)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    let (name, component) = indicator_parts(&indicator)?;
    let shown = state
        .conductor
        .indicator_state(node.uuid, component, name)
        .await
        .map_err(conductor_error)?;
    Ok(Json(json!({ "state": shown.as_str() })))
}

/// `PUT /v1/nodes/{node_ident}/management/indicators/{name}@{component}` with
/// `{"state": "on"|"off"|"blinking"}`: 204 once the management interface has done it.
pub async fn node_indicator_set(
    State(state): State<ApiState>,
    Path((ident, indicator)): Path<(String, String)>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let mut body = json_object_body(&body)?;
    let wanted = required(&mut body, "state")?;
    refuse_leftovers(&body, "an indicator request")?;
    let wanted: IndicatorState = wanted
        .as_str()
        .and_then(|name| name.to_ascii_lowercase().parse().ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid indicator state {wanted}; valid states: {}.",
                IndicatorState::ALL.map(IndicatorState::as_str).join(", ")
            ))
        })?;
    let node = node(&state, &ident).await?;
    let (name, component) = indicator_parts(&indicator)?;
    state
        .conductor
        .set_indicator_state(node.uuid, component, name, wanted)
        .await
        .map_err(conductor_error)?;
    Ok(StatusCode::NO_CONTENT)
}
