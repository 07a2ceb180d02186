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

use super::body::{BodyField, BodySpec, Empty, Kind, wire_names};
use super::states::{accepted, conductor_error, node};
use super::{base_url, links};
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

/// The body of `PUT …/states/boot_mode`.
pub(crate) static BOOT_MODE_BODY: BodySpec = BodySpec::new(
    "BootModeRequest",
    &[
        BodyField::new("target", Kind::Choice(wire_names!(BootMode)))
            .required()
            .invalid(
                "Invalid boot mode {text} requested for node. Allowed boot modes are: bios, uefi",
            ),
    ],
)
.unknown("Unknown field '{name}' in a boot mode request.");

/// `PUT /v1/nodes/{node_ident}/states/boot_mode` `{"target": "uefi"|"bios"}`: 202.
pub async fn node_boot_mode_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = BOOT_MODE_BODY.parse(&body, version)?;
    let mode: BootMode = body
        .parse("target")?
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'target'."))?;
    let node = node(&state, &ident).await?;
    check_stable(&node)?;
    state
        .conductor
        .set_boot_mode(node.uuid, mode)
        .await
        .map_err(conductor_error)?;
    Ok(accepted(&headers, &ident))
}

/// The body of `PUT …/states/secure_boot`.
pub(crate) static SECURE_BOOT_BODY: BodySpec = BodySpec::new(
    "SecureBootRequest",
    &[BodyField::new("target", Kind::Flag).required().invalid(
        "Invalid secure_boot {value} requested for node. Allowed secure_boot states are: true, \
         false.",
    )],
)
.unknown("Unknown field '{name}' in a secure boot request.");

/// `PUT /v1/nodes/{node_ident}/states/secure_boot` `{"target": true|false}`: 202.
pub async fn node_secure_boot_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Ironic reads the target as a boolean, text included ("true", "off", …).
    let enabled = SECURE_BOOT_BODY
        .parse(&body, version)?
        .flag("target")
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'target'."))?;
    let node = node(&state, &ident).await?;
    check_stable(&node)?;
    state
        .conductor
        .set_secure_boot(node.uuid, enabled)
        .await
        .map_err(conductor_error)?;
    Ok(accepted(&headers, &ident))
}

/// The body of `PUT …/management/inject_nmi`: `{}`, or nothing.
pub(crate) static INJECT_NMI_BODY: BodySpec = BodySpec::new("InjectNmiRequest", &[])
    .unknown("Unknown field '{name}' in an NMI request (send {}).")
    .empty(Empty::BlankAllowed);

/// `PUT /v1/nodes/{node_ident}/management/inject_nmi` (body `{}`): 204 once the BMC took it.
pub async fn node_inject_nmi(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    INJECT_NMI_BODY.parse(&body, version)?;
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

/// The body of `PUT …/management/indicators/{name}@{component}` (the state in any case).
pub(crate) static INDICATOR_BODY: BodySpec = BodySpec::new(
    "IndicatorState",
    &[
        BodyField::new("state", Kind::ChoiceAnyCase(wire_names!(IndicatorState)))
            .required()
            .invalid("Invalid indicator state {value}; valid states: {choices}."),
    ],
)
.unknown("Unknown field '{name}' in an indicator request.");

/// `PUT /v1/nodes/{node_ident}/management/indicators/{name}@{component}` with
/// `{"state": "on"|"off"|"blinking"}`: 204 once the management interface has done it.
pub async fn node_indicator_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path((ident, indicator)): Path<(String, String)>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let wanted: IndicatorState = INDICATOR_BODY
        .parse(&body, version)?
        .parse("state")?
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'state'."))?;
    let node = node(&state, &ident).await?;
    let (name, component) = indicator_parts(&indicator)?;
    state
        .conductor
        .set_indicator_state(node.uuid, component, name, wanted)
        .await
        .map_err(conductor_error)?;
    Ok(StatusCode::NO_CONTENT)
}
