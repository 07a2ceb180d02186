//! Node state and management requests (`reference/ironic.md` §1.3, §2.5): `/states`,
//! `/states/provision`, `/states/power`, `/management/boot_device[/supported]`, `/validate`
//! and `/maintenance`. Handlers check the request's shape and version here and hand the work
//! to the conductor; they never change provision or power state themselves.
//!
//! The conductor is reached through `ApiState.conductor`, a `ferric_conductor::Handoff` (in
//! process, or handed to the owning conductor); its refusals map to 400/403/409/503 in
//! `conductor_error` (503 also when the owner did not answer). A clean or service request naming a
//! `runbook` (1.92) loads it, requires a node trait of its name (from 1.112: one of its traits) and
//! sends its steps, sorted by `order`, as the request's steps.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_conductor::{ConductorError, ProvisionArgs};
use ferric_model::machine::VerbError;
use ferric_model::microversion::gate;
use ferric_model::resources::{Ident, InterfaceKind, Node};
use ferric_model::state::visible_provision_state;
use ferric_model::values::{BootDevice, PowerAction, StepCall};
use ferric_model::{Microversion, Verb, check_verb};
use serde_json::{Map, Value, json};

use super::body::{Body, BodyField, BodySpec, Empty, Kind, Null, wire_names};
use super::nodes::lease_holder;
use super::runbooks::RUNBOOKS_SINCE;
use super::step_lists::parse_ident;
use super::{base_url, db_error, opt_timestamp};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// What the caller sees of a conductor refusal or failure.
pub(crate) fn conductor_error(error: ConductorError) -> ApiError {
    match error {
        error @ (ConductorError::NodeLocked { .. } | ConductorError::Conflict(_)) => {
            ApiError::conflict(error.to_string())
        }
        error @ (ConductorError::NoFreeWorker { .. }
        | ConductorError::ShuttingDown
        | ConductorError::Unavailable(_)) => ApiError::service_unavailable(error.to_string()),
        error @ ConductorError::InvalidTransition { .. } => {
            ApiError::bad_request(error.to_string())
        }
        ConductorError::Invalid(message) => ApiError::bad_request(message),
        ConductorError::Forbidden(message) => ApiError::new(StatusCode::FORBIDDEN, message),
        error @ ConductorError::NodeNotFound(_) => ApiError::not_found(error.to_string()),
        ConductorError::NothingRunning(message) => ApiError::not_found(message),
        ConductorError::Driver(error) if error.is_caller_error() => {
            ApiError::bad_request(error.to_string())
        }
        // The BMC or agent failed: not our fault, and the operator needs the words.
        ConductorError::Driver(error) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
        }
        ConductorError::Storage(error) => ApiError::internal(&error),
        error @ (ConductorError::Remote(_) | ConductorError::NameTaken { .. }) => {
            ApiError::internal(&error)
        }
    }
}

/// `DELETE /v1/nodes/{node}/provision` (seed 001): abort the running deployment. 202 when
/// the abort is accepted, 403 when the running step may not be interrupted, 404 when no
/// deployment runs.
pub async fn node_deployment_abort(
    State(state): State<ApiState>,
    headers: HeaderMap,
    Path(ident): Path<String>,
) -> Result<Response, ApiError> {
    let node = node(&state, &ident).await?;
    state
        .conductor
        .abort_deployment(node.uuid)
        .await
        .map_err(conductor_error)?;
    Ok(accepted(&headers, &ident))
}

pub(crate) async fn node(state: &ApiState, ident: &str) -> Result<Node, ApiError> {
    state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(db_error)
}

pub(crate) fn accepted(headers: &HeaderMap, ident: &str) -> Response {
    let mut response = StatusCode::ACCEPTED.into_response();
    let location = format!("{}/v1/nodes/{ident}/states", base_url(headers));
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(LOCATION, location);
    }
    response
}

/// `GET /v1/nodes/{node}/states`.
pub async fn node_states_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    let shown = |state| visible_provision_state(state, version).map(|state| state.as_str());
    let mut body = json!({
        "console_enabled": node.console_enabled,
        "last_error": node.last_error,
        "power_state": node.power_state.map(|power| power.as_str()),
        "provision_state": shown(node.provision_state),
        "provision_updated_at": opt_timestamp(node.provision_updated_at),
        "target_power_state": node.target_power_state.map(|power| power.as_str()),
        "target_provision_state": node.target_provision_state.and_then(shown),
    });
    if version >= Microversion::new(12) {
        body["raid_config"] = Value::Object(node.raid_config.clone());
        body["target_raid_config"] = Value::Object(node.target_raid_config.clone());
    }
    if version >= Microversion::new(75) {
        body["boot_mode"] = json!(node.boot_mode);
        body["secure_boot"] = json!(node.secure_boot);
    }
    Ok(Json(body))
}

/// A step list the body declared (`clean_steps`, …), each step read by [`parse_step`].
fn steps_field(
    body: &mut Body,
    name: &str,
    deploy: bool,
) -> Result<Option<Vec<StepCall>>, ApiError> {
    let Some(Value::Array(items)) = body.take(name) else {
        return Ok(None);
    };
    items
        .into_iter()
        .map(|item| parse_step(name, item, deploy))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// One step object (`interface`, `step`, `args`, and `priority` for deploy steps).
fn parse_step(field: &str, item: Value, deploy: bool) -> Result<StepCall, ApiError> {
    let bad = |why: String| ApiError::bad_request(format!("Invalid {field}: {why}"));
    let Value::Object(mut object) = item else {
        return Err(bad("each step must be an object.".to_owned()));
    };
    let interface = object
        .remove("interface")
        .and_then(|value| value.as_str().and_then(InterfaceKind::from_name))
        .ok_or_else(|| bad("each step needs an \"interface\" naming a driver interface.".into()))?;
    let step = object
        .remove("step")
        .and_then(|value| value.as_str().map(str::to_owned))
        .filter(|step| !step.trim().is_empty())
        .ok_or_else(|| bad("each step needs a non-empty \"step\" name.".into()))?;
    let args = match object.remove("args") {
        Some(Value::Object(args)) => args,
        None if !deploy => Map::new(),
        None => return Err(bad("deploy steps need \"args\" (an object).".into())),
        Some(_) => return Err(bad("\"args\" must be an object.".into())),
    };
    let priority = match object.remove("priority") {
        Some(value) => value
            .as_u64()
            .and_then(|priority| u32::try_from(priority).ok())
            .ok_or_else(|| bad("\"priority\" must be a non-negative integer.".into()))?,
        None if deploy => return Err(bad("deploy steps need a \"priority\".".into())),
        None => 0,
    };
    for key in object.keys() {
        if !matches!(
            key.as_str(),
            "order" | "execute_on_child_nodes" | "limit_child_node_execution"
        ) {
            return Err(bad(format!("unknown step field \"{key}\".")));
        }
    }
    Ok(StepCall {
        interface,
        step,
        args,
        priority,
    })
}

fn too_old(what: &str, needed: u16, version: Microversion) -> ApiError {
    ApiError::not_acceptable(format!(
        "{what} needs API version 1.{needed} or later; the request used {version}."
    ))
}

fn only_with(field: &str, verbs: &str) -> ApiError {
    ApiError::bad_request(format!("\"{field}\" can only be used with {verbs}."))
}

const STEPS_INVALID: &str = "Invalid {name}: it must be a list of step objects.";

/// The body of `PUT …/states/provision` (§1.3); which fields a verb takes is
/// [`provision_request`]'s to check.
pub(crate) static PROVISION_BODY: BodySpec = BodySpec::new(
    "ProvisionRequest",
    &[
        BodyField::new("target", Kind::Choice(wire_names!(Verb)))
            .required()
            .invalid("'target' must be a string.")
            .refused("Invalid provision target '{text}'; valid targets: {choices}."),
        BodyField::new("configdrive", Kind::TextOrObject)
            .null(Null::Value)
            .invalid("Invalid configdrive: a URL or base64 text (a JSON object from API 1.56).")
            .describe("A URL or base64 text; a JSON object (meta_data, user_data, …) from 1.56."),
        BodyField::new("deploy_steps", Kind::Steps)
            .since(69)
            .invalid(STEPS_INVALID),
        BodyField::new("clean_steps", Kind::Steps).invalid(STEPS_INVALID),
        BodyField::new("service_steps", Kind::Steps).invalid(STEPS_INVALID),
        // Its version depends on the verb: checked by `provision_request`.
        BodyField::new("disable_ramdisk", Kind::Bool)
            .invalid("'disable_ramdisk' must be a boolean.")
            .describe("For clean (from 1.70) and service (from 1.108)."),
        BodyField::new("rescue_password", Kind::Text)
            .null(Null::Value)
            .invalid("A non-empty rescue_password is required for the rescue target."),
        BodyField::new("runbook", Kind::Text)
            .null(Null::Absent)
            .since(RUNBOOKS_SINCE)
            .invalid("Invalid runbook {value}: name a runbook by its name or UUID.")
            .describe("A runbook's name or UUID, instead of clean_steps/service_steps."),
    ],
);

/// Turns the body of `PUT …/states/provision` into a verb and its arguments (§1.3): the shape
/// is [`PROVISION_BODY`]'s, the rules here are which verb takes which field.
fn provision_request(
    body: &[u8],
    version: Microversion,
) -> Result<(Verb, ProvisionArgs, Option<String>), ApiError> {
    let mut body = PROVISION_BODY.parse_naming_unknown(body, version, |body, unknown| {
        let request = match body.parse::<Verb>("target") {
            Ok(Some(verb)) => format!("a provision request for '{}'", verb.event()),
            _ => "a provision request".to_owned(),
        };
        ApiError::bad_request(format!("Unknown field '{unknown}' in {request}."))
    })?;
    let verb: Verb = body
        .parse("target")?
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'target'."))?;
    let mut args = ProvisionArgs::default();

    if let Some(configdrive) = body.take("configdrive") {
        let allowed = matches!(verb, Verb::Active | Verb::Deploy)
            || (verb == Verb::Rebuild && version >= Microversion::new(35));
        if !allowed {
            return Err(only_with("configdrive", "active, deploy or rebuild"));
        }
        if let Value::Object(built) = &configdrive {
            if version < Microversion::new(56) {
                return Err(ApiError::bad_request(
                    "Invalid configdrive: a URL or base64 text (a JSON object from API 1.56).",
                ));
            }
            if version.minor() < 59 && built.contains_key("vendor_data") {
                return Err(ApiError::bad_request(format!(
                    "Providing vendor_data in configdrive needs API version 1.59 or later; this \
                     request asked for {version}."
                )));
            }
        }
        if !configdrive.is_null() {
            args.configdrive = Some(configdrive);
        }
    }
    if body.has("deploy_steps") {
        if !matches!(verb, Verb::Active | Verb::Deploy | Verb::Rebuild) {
            return Err(only_with("deploy_steps", "active, deploy or rebuild"));
        }
        args.deploy_steps = steps_field(&mut body, "deploy_steps", true)?;
    }
    if body.has("clean_steps") && verb != Verb::Clean {
        return Err(only_with("clean_steps", "clean"));
    }
    if body.has("service_steps") && verb != Verb::Service {
        return Err(only_with("service_steps", "service"));
    }
    args.clean_steps = steps_field(&mut body, "clean_steps", false)?;
    args.service_steps = steps_field(&mut body, "service_steps", false)?;
    if let Some(disable_ramdisk) = body.flag("disable_ramdisk") {
        let needed = if verb == Verb::Service { 108 } else { 70 };
        if version < Microversion::new(needed) {
            return Err(too_old("disable_ramdisk", needed, version));
        }
        if !matches!(verb, Verb::Clean | Verb::Service) {
            return Err(only_with("disable_ramdisk", "clean or service"));
        }
        args.disable_ramdisk = Some(disable_ramdisk);
    }
    let runbook = body.text("runbook");
    if runbook.is_some() {
        if !matches!(verb, Verb::Clean | Verb::Service) {
            return Err(ApiError::bad_request(
                "\"runbooks\" is only valid when setting target provision state to any of \
                 ['clean', 'service']",
            ));
        }
        let (field, given) = if verb == Verb::Clean {
            ("clean_steps", args.clean_steps.is_some())
        } else {
            ("service_steps", args.service_steps.is_some())
        };
        if given {
            return Err(ApiError::bad_request(format!(
                "Please provide either \"{field}\" or a runbook, but not both."
            )));
        }
    }
    if body.has("rescue_password") {
        if verb != Verb::Rescue {
            return Err(only_with("rescue_password", "rescue"));
        }
        args.rescue_password = body.text("rescue_password");
    }
    if verb == Verb::Rescue
        && args
            .rescue_password
            .as_deref()
            .is_none_or(|password| password.trim().is_empty())
    {
        return Err(ApiError::bad_request(
            "A non-empty rescue_password is required for the rescue target.",
        ));
    }
    if verb == Verb::Clean && args.clean_steps.is_none() && runbook.is_none() {
        return Err(ApiError::bad_request(
            "\"clean_steps\" is required when setting target provision state to clean",
        ));
    }
    if verb == Verb::Service && args.service_steps.is_none() && runbook.is_none() {
        return Err(ApiError::bad_request(
            "\"service_steps\" is required when setting target provision state to service",
        ));
    }
    Ok((verb, args, runbook))
}

/// A `runbook` named in a clean or service request (1.92): it must exist and be approved for
/// the node (Ironic's rule: the node has one of the runbook's traits from 1.112, a trait named
/// like the runbook before); its steps, in `order`, become the request's steps and its
/// `disable_ramdisk` the request's.
async fn apply_runbook(
    state: &ApiState,
    node: &Node,
    verb: Verb,
    ident: &str,
    args: &mut ProvisionArgs,
    version: Microversion,
) -> Result<(), ApiError> {
    let runbook = state
        .store
        .runbook_get(&parse_ident(ident)?)
        .await
        .map_err(db_error)?;
    if version >= gate::RUNBOOK_TRAITS {
        if runbook.traits.is_empty() {
            return Err(ApiError::bad_request(format!(
                "Runbook {} has no traits configured. Please ask an administrator to add traits \
                 to the runbook.",
                runbook.uuid
            )));
        }
        if !runbook.traits.iter().any(|name| node.traits.contains(name)) {
            return Err(ApiError::bad_request(format!(
                "This runbook has not been approved for use on this node {}. The node does not \
                 have any of the runbook's traits {:?}. Please ask an administrator to add a \
                 matching trait to your node.",
                node.uuid, runbook.traits
            )));
        }
    } else if !node.traits.contains(&runbook.name) {
        return Err(ApiError::bad_request(format!(
            "This runbook has not been approved for use on this node {}. Please ask an \
             administrator to add it to your node traits.",
            node.uuid
        )));
    }
    let steps = runbook
        .ordered_steps()
        .into_iter()
        .map(|step| {
            InterfaceKind::from_name(&step.interface)
                .map(|interface| StepCall {
                    interface,
                    step: step.step,
                    args: step.args,
                    priority: 0,
                })
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Runbook {} names the unknown interface '{}'; fix the runbook.",
                        runbook.name, step.interface
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if verb == Verb::Clean {
        args.clean_steps = Some(steps);
    } else {
        args.service_steps = Some(steps);
    }
    args.disable_ramdisk = Some(runbook.disable_ramdisk);
    Ok(())
}

/// `PUT /v1/nodes/{node}/states/provision`: 202 once the conductor has recorded the request.
pub async fn node_provision_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (verb, mut args, runbook) = provision_request(&body, version)?;
    let node = node(&state, &ident).await?;
    // Ironic replays the request against the state machine before any RPC; a refused edge is
    // 409 while a conductor holds the node (it may be about to move), else 400.
    if let Err(error) = check_verb(verb, node.provision_state, version) {
        return Err(match error {
            VerbError::VersionTooOld { .. } => {
                ApiError::not_acceptable(error.message_for_node(&ident))
            }
            VerbError::NotAllowedInState {
                verb,
                state: current,
            } => match lease_holder(&state.store, node.uuid).await? {
                Some(holder) => conductor_error(ConductorError::NodeLocked {
                    node: node.uuid,
                    holder,
                }),
                // Ironic's sentence exactly, naming the node by UUID: clients and scripts
                // match on it.
                None => ApiError::bad_request(format!(
                    "The requested action \"{verb}\" can not be performed on node \"{}\" \
                     while it is in state \"{current}\".",
                    node.uuid
                )),
            },
        });
    }
    if let Some(runbook) = runbook {
        apply_runbook(&state, &node, verb, &runbook, &mut args, version).await?;
    }
    if matches!(verb, Verb::Active | Verb::Deploy | Verb::Rebuild) && node.maintenance {
        return Err(ApiError::bad_request(format!(
            "The node {ident} is in maintenance mode; clear maintenance before deploying it."
        )));
    }
    state
        .conductor
        .provision(&node, verb, args)
        .await
        .map_err(conductor_error)?;
    Ok(accepted(&headers, &ident))
}

/// The body of `PUT …/states/power`.
pub(crate) static POWER_BODY: BodySpec = BodySpec::new(
    "PowerRequest",
    &[
        BodyField::new("target", Kind::Choice(wire_names!(PowerAction)))
            .required()
            .invalid("Invalid power target {value}; valid targets: {choices}."),
        BodyField::new("timeout", Kind::Integer { min: 1 })
            .null(Null::Absent)
            .since(27)
            .too_new(
                "Soft power actions and timeouts needs API version 1.{since} or later; the \
                 request used {version}.",
            )
            .invalid("'timeout' must be a whole number of seconds.")
            .refused("Invalid timeout value {value}; it must be at least 1 second."),
    ],
)
.unknown("Unknown field '{name}' in a power request.");

/// `PUT /v1/nodes/{node}/states/power`: 202; the node shows `target_power_state` meanwhile.
pub async fn node_power_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = POWER_BODY.parse(&body, version)?;
    let action: PowerAction = body
        .parse("target")?
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'target'."))?;
    let timeout = body
        .integer("timeout")
        .map(|seconds| std::time::Duration::from_secs(seconds.unsigned_abs()));
    if action.is_soft() && version < Microversion::new(27) {
        return Err(too_old("Soft power actions and timeouts", 27, version));
    }
    let node = node(&state, &ident).await?;
    state
        .conductor
        .set_power(node.uuid, action, timeout)
        .await
        .map_err(conductor_error)?;
    Ok(accepted(&headers, &ident))
}

/// `GET /v1/nodes/{node}/management/boot_device`.
pub async fn node_boot_device_get(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    let setting = state
        .conductor
        .get_boot_device(node.uuid)
        .await
        .map_err(conductor_error)?;
    Ok(Json(json!({
        "boot_device": setting.device.map(BootDevice::as_str),
        "persistent": setting.persistent,
    })))
}

/// The body of `PUT …/management/boot_device`.
pub(crate) static BOOT_DEVICE_BODY: BodySpec = BodySpec::new(
    "BootDeviceRequest",
    &[
        BodyField::new("boot_device", Kind::Choice(wire_names!(BootDevice)))
            .required()
            .invalid("Invalid boot device {value}; valid devices: {choices}."),
        BodyField::new("persistent", Kind::Flag)
            .null(Null::Absent)
            .invalid("'persistent' must be a boolean.")
            .refused("Invalid value for {name}: '{text}' is not a boolean (use true or false)."),
    ],
)
.unknown("Unknown field '{name}' in a boot device request.");

/// `PUT /v1/nodes/{node}/management/boot_device`: 204 once the BMC has it.
pub async fn node_boot_device_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let body = BOOT_DEVICE_BODY.parse(&body, version)?;
    let device: BootDevice = body
        .parse("boot_device")?
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'boot_device'."))?;
    let persistent = body.flag("persistent").unwrap_or(false);
    let node = node(&state, &ident).await?;
    state
        .conductor
        .set_boot_device(node.uuid, device, persistent)
        .await
        .map_err(conductor_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/nodes/{node}/management/boot_device/supported`.
pub async fn node_boot_device_supported(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    let devices = state
        .conductor
        .supported_boot_devices(node.uuid)
        .await
        .map_err(conductor_error)?;
    Ok(Json(json!({
        "supported_boot_devices": devices.iter().map(|device| device.as_str()).collect::<Vec<_>>(),
    })))
}

/// `GET /v1/nodes/{node}/validate`: every interface but vendor, `reason` only when false.
pub async fn node_validate(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    let answers = state
        .conductor
        .validate(node.uuid)
        .await
        .map_err(conductor_error)?;
    let mut body = Map::new();
    for (kind, answer) in answers {
        if kind == InterfaceKind::Vendor {
            continue;
        }
        let mut entry = Map::new();
        entry.insert("result".into(), answer.result.into());
        if let Some(reason) = answer.reason {
            entry.insert("reason".into(), reason.into());
        }
        body.insert(kind.as_str().into(), Value::Object(entry));
    }
    Ok(Json(Value::Object(body)))
}

/// Changes fields of a node no conductor holds (409 while one does), reading it again when the
/// conductor wrote it between the read and the write; `what` names the change for the 409
/// after three such races. `change` may refuse the request.
pub(crate) async fn update_unleased_node(
    state: &ApiState,
    ident: &str,
    what: &str,
    mut change: impl FnMut(&mut Node) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    for _ in 0..3 {
        let mut node = node(state, ident).await?;
        let expected = node.version;
        change(&mut node)?;
        if let Some(holder) = lease_holder(&state.store, node.uuid).await? {
            return Err(conductor_error(ConductorError::NodeLocked {
                node: node.uuid,
                holder,
            }));
        }
        match state.store.node_update(&node, expected).await {
            Ok(_) => return Ok(()),
            // The conductor wrote the node between our read and write: read again.
            Err(ferric_db::Error::StaleRevision { .. }) => {}
            Err(error) => return Err(db_error(error)),
        }
    }
    Err(ApiError::conflict(format!(
        "Node {ident} kept changing while {what} was set; retry."
    )))
}

async fn set_maintenance(
    state: &ApiState,
    ident: &str,
    on: bool,
    reason: Option<String>,
) -> Result<(), ApiError> {
    update_unleased_node(state, ident, "its maintenance flag", |node| {
        node.maintenance = on;
        node.maintenance_reason = if on { reason.clone() } else { None };
        if !on {
            node.fault = None;
        }
        Ok(())
    })
    .await
}

/// The body of `PUT /v1/nodes/{node}/maintenance` (which may be left out).
pub(crate) static MAINTENANCE_BODY: BodySpec = BodySpec::new(
    "MaintenanceRequest",
    &[BodyField::new("reason", Kind::Text)
        .null(Null::Absent)
        .invalid("'reason' must be a string.")],
)
.unknown("Unknown field '{name}' in a maintenance request.")
.empty(Empty::Allowed);

/// `PUT /v1/nodes/{node}/maintenance`: `{"reason": …}` optional; 202.
pub async fn node_maintenance_set(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let reason = MAINTENANCE_BODY.parse(&body, version)?.text("reason");
    set_maintenance(&state, &ident, true, reason).await?;
    Ok(StatusCode::ACCEPTED)
}

/// `DELETE /v1/nodes/{node}/maintenance`: clears maintenance, its reason and `fault`; 202.
pub async fn node_maintenance_unset(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_maintenance(&state, &ident, false, None).await?;
    Ok(StatusCode::ACCEPTED)
}
