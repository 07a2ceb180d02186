//! What drivers and inspection learned about nodes, and the small read-mostly resources:
//! `/v1/nodes/{node}/bios` (1.40), `/v1/nodes/{node}/firmware` (1.86),
//! `/v1/nodes/{node}/inventory` (1.81), `/v1/shards` (1.82) and `POST /v1/events` (1.54)
//! (`reference/ironic.md` §2.5, §2.7).
//!
//! BIOS settings, firmware versions and inventories are written by the conductor (from what
//! the BIOS and firmware interfaces read) and inspection through the store (`node_bios_set`,
//! `node_firmware_set`, `node_inventory_set`); the API only reads them. Events are Neutron's port
//! notifications: Ironic forwards them to the network interface; Ferric's network interfaces
//! (`noop`, `flat`) act on none, so they are checked, logged and accepted.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use ferric_model::Microversion;
use ferric_model::microversion::gate;
use ferric_model::resources::{BiosSetting, Ident};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::port_fields::normalize_mac;
use super::{base_url, db_error, json_object_body, opt_timestamp, parse_bool_param, timestamp};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// The registry fields of a setting, `?detail` and `?fields`.
const BIOS_REGISTRY_SINCE: u16 = 74;
const BIOS_REGISTRY_FIELDS: &[&str] = &[
    "attribute_type",
    "allowable_values",
    "lower_bound",
    "max_length",
    "min_length",
    "read_only",
    "reset_required",
    "unique",
    "upper_bound",
];

/// The network events Ironic accepts (`network.*` port notifications).
const EVENT_TYPES: &[&str] = &[
    "network.bind_port",
    "network.unbind_port",
    "network.delete_port",
];

fn bios_json(
    setting: &BiosSetting,
    node: &str,
    version: Microversion,
    detail: bool,
    base: &str,
) -> Value {
    let mut shown = Map::new();
    shown.insert("name".to_owned(), json!(setting.name));
    shown.insert("value".to_owned(), json!(setting.value));
    shown.insert(
        "links".to_owned(),
        super::links(base, &format!("nodes/{node}/bios/{}", setting.name)),
    );
    // Ironic shows the times in every listing, with or without `detail`.
    shown.insert("created_at".to_owned(), timestamp(setting.created_at));
    shown.insert("updated_at".to_owned(), opt_timestamp(setting.updated_at));
    if detail && version.minor() >= BIOS_REGISTRY_SINCE {
        for name in BIOS_REGISTRY_FIELDS {
            let value = setting.registry.get(*name).cloned().unwrap_or(Value::Null);
            shown.insert((*name).to_owned(), value);
        }
    }
    Value::Object(shown)
}

async fn node_uuid(state: &ApiState, ident: &str) -> Result<uuid::Uuid, ApiError> {
    Ok(state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(db_error)?
        .uuid)
}

/// `GET /v1/nodes/{node_ident}/bios` (`?detail` from 1.74).
pub async fn bios_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let mut detail = false;
    for (name, value) in &query {
        match name.as_str() {
            "detail" if version.minor() >= BIOS_REGISTRY_SINCE => {
                detail = parse_bool_param("detail", value)?;
            }
            "detail" => {
                return Err(ApiError::not_acceptable(format!(
                    "'detail' needs API version 1.{BIOS_REGISTRY_SINCE} or later; this \
                     request asked for {version}."
                )));
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unknown query parameter '{other}' for listing BIOS settings."
                )));
            }
        }
    }
    let node = node_uuid(&state, &ident).await?;
    let settings = state.store.node_bios_list(node).await.map_err(db_error)?;
    let base = base_url(&headers);
    let node = node.to_string();
    let items: Vec<Value> = settings
        .iter()
        .map(|setting| bios_json(setting, &node, version, detail, &base))
        .collect();
    Ok(Json(json!({ "bios": items })))
}

/// `GET /v1/nodes/{node_ident}/bios/{setting_name}`: `{"<name>": {…}}`, every field.
pub async fn bios_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path((ident, setting_name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let node = node_uuid(&state, &ident).await?;
    let settings = state.store.node_bios_list(node).await.map_err(db_error)?;
    let Some(setting) = settings.iter().find(|setting| setting.name == setting_name) else {
        return Err(ApiError::not_found(format!(
            "Node {node} doesn't have a BIOS setting '{setting_name}'"
        )));
    };
    let shown = bios_json(
        setting,
        &node.to_string(),
        version,
        true,
        &base_url(&headers),
    );
    Ok(Json(json!({ setting_name: shown })))
}

/// `GET /v1/nodes/{node_ident}/firmware`: `{"firmware": [{component, initial_version,
/// current_version, last_version_flashed, created_at, updated_at}]}`, and from 1.114 the
/// component's `vendor`, `model` and `serial_number`.
// TODO-correctness: the firmware interfaces do not read a component's vendor, model or serial
// number yet (Ironic fills the BMC's `model` and NICs' three from Redfish); they are null.
pub async fn firmware_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node_uuid(&state, &ident).await?;
    let components = state
        .store
        .node_firmware_list(node)
        .await
        .map_err(db_error)?;
    let items: Vec<Value> = components
        .iter()
        .map(|component| {
            let mut item = json!({
                "component": component.component,
                "initial_version": component.initial_version,
                "current_version": component.current_version,
                "last_version_flashed": component.last_version_flashed,
                "created_at": timestamp(component.created_at),
                "updated_at": opt_timestamp(component.updated_at),
            });
            if version >= gate::FIRMWARE_IDENTITY
                && let Some(fields) = item.as_object_mut()
            {
                for name in ["vendor", "model", "serial_number"] {
                    fields.insert(name.to_owned(), Value::Null);
                }
            }
            item
        })
        .collect();
    Ok(Json(json!({ "firmware": items })))
}

/// `GET /v1/nodes/{node_ident}/inventory`: what inspection stored; 404 before it has.
pub async fn inventory_get(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node_uuid(&state, &ident).await?;
    match state
        .store
        .node_inventory_get(node)
        .await
        .map_err(db_error)?
    {
        Some(stored) => Ok(Json(json!({
            "inventory": stored.inventory,
            "plugin_data": stored.plugin_data,
        }))),
        None => Err(ApiError::not_found(format!(
            "Node inventory record for node {node} could not be found."
        ))),
    }
}

/// `GET /v1/shards`: `{"shards": [{"name", "count"}]}`, largest first. As Ironic does,
/// nodes in no shard are counted under the name `"None"`, and query parameters are ignored.
pub async fn shard_list(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
) -> Result<Json<Value>, ApiError> {
    let counts = state.store.node_shard_counts().await.map_err(db_error)?;
    let shards: Vec<Value> = counts
        .into_iter()
        .map(|(name, count)| {
            json!({ "name": name.unwrap_or_else(|| "None".to_owned()), "count": count })
        })
        .collect();
    Ok(Json(json!({ "shards": shards })))
}

/// `POST /v1/events` (`{"events": [{"event": "network.bind_port", …}]}`): 204. Each event
/// is checked as Ironic's schema checks it: `event`, `port_id` (a UUID), `mac_address` and
/// `status` required; `device_id` and `binding:host_id` UUIDs or null; `binding:vnic_type`
/// text or null; nothing else.
pub async fn event_post(
    ApiVersion(_version): ApiVersion,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let mut body = json_object_body(&body)?;
    let events = match body.remove("events") {
        Some(Value::Array(events)) if !events.is_empty() => events,
        Some(Value::Array(_)) => {
            return Err(ApiError::bad_request(
                "'events' is empty: send at least one event.",
            ));
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "'events' must be a list of event objects.",
            ));
        }
        None => {
            return Err(ApiError::bad_request(
                "Mandatory field missing: 'events' (a list of event objects).",
            ));
        }
    };
    if let Some(unknown) = body.keys().next() {
        return Err(ApiError::bad_request(format!(
            "Unknown field '{unknown}' in an events request; only 'events' is allowed."
        )));
    }
    for (index, event) in events.iter().enumerate() {
        check_event(index, event)?;
    }
    for event in &events {
        tracing::info!(%event, "network event received");
    }
    Ok(StatusCode::NO_CONTENT)
}

/// One network event against Ironic's schema; the message names the event by its position.
fn check_event(index: usize, event: &Value) -> Result<(), ApiError> {
    let invalid = |what: String| ApiError::bad_request(format!("Invalid event #{index}: {what}"));
    let Some(event) = event.as_object() else {
        return Err(invalid("expected an object.".to_owned()));
    };
    let kind = match event.get("event") {
        Some(Value::String(kind)) if EVENT_TYPES.contains(&kind.as_str()) => kind,
        Some(other) => {
            return Err(invalid(format!(
                "'event' is {other}; use one of {}.",
                EVENT_TYPES.join(", ")
            )));
        }
        None => return Err(invalid("'event' is missing.".to_owned())),
    };
    for key in ["port_id", "mac_address", "status"] {
        if !event.contains_key(key) {
            return Err(invalid(format!(
                "'{key}' is missing (a {kind} event needs event, port_id, mac_address and \
                 status)."
            )));
        }
    }
    for (key, value) in event {
        let text = value.as_str();
        let nullable = matches!(
            key.as_str(),
            "device_id" | "binding:host_id" | "binding:vnic_type"
        );
        let valid = match key.as_str() {
            "event" => true,
            "status" | "binding:vnic_type" => text.is_some() || (nullable && value.is_null()),
            "mac_address" => text.is_some_and(|text| normalize_mac(text).is_ok()),
            "port_id" | "device_id" | "binding:host_id" => {
                text.is_some_and(|text| Uuid::parse_str(text).is_ok())
                    || (nullable && value.is_null())
            }
            other => {
                return Err(invalid(format!(
                    "unknown field '{other}'; an event has event, port_id, mac_address, \
                     status, device_id, binding:host_id and binding:vnic_type."
                )));
            }
        };
        if !valid {
            let expected = match key.as_str() {
                "mac_address" => "a MAC address",
                "status" => "a string",
                "binding:vnic_type" => "a string or null",
                "port_id" => "a UUID",
                _ => "a UUID or null",
            };
            return Err(invalid(format!("'{key}' is {value}; expected {expected}.")));
        }
    }
    Ok(())
}
