//! `/v1/drivers`: the enabled hardware types, the conductors that serve them and, in detail
//! (1.30), their default and enabled interfaces (`reference/ironic.md` §2.7).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use ferric_db::ConductorFilter;
use ferric_drivers::{Drivers, HardwareType};
use ferric_model::Microversion;
use ferric_model::resources::InterfaceKind;
use serde_json::{Map, Value, json};

use super::{base_url, db_error, links, parse_bool_param};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

async fn hosts_by_driver(state: &ApiState) -> Result<Vec<(String, Vec<String>)>, ApiError> {
    let filter = ConductorFilter {
        // A conductor whose heartbeat is older no longer serves its drivers.
        alive_since: Some(state.store.now() - super::conductors::heartbeat_timeout(state)),
        ..ConductorFilter::default()
    };
    let conductors = state
        .store
        .conductor_list(&filter)
        .await
        .map_err(db_error)?;
    Ok(conductors
        .into_iter()
        .map(|conductor| (conductor.hostname, conductor.drivers))
        .collect())
}

fn driver_json(
    drivers: &Drivers,
    hardware_type: &HardwareType,
    hosts: &[(String, Vec<String>)],
    version: Microversion,
    detail: bool,
    base: &str,
) -> Value {
    let name = hardware_type.name;
    let hosts: Vec<&str> = hosts
        .iter()
        .filter(|(_, drivers)| drivers.iter().any(|driver| driver == name))
        .map(|(host, _)| host.as_str())
        .collect();
    let mut body = Map::new();
    body.insert("name".into(), name.into());
    body.insert("hosts".into(), json!(hosts));
    if version >= Microversion::new(30) {
        body.insert("type".into(), "dynamic".into());
    }
    body.insert("links".into(), links(base, &format!("drivers/{name}")));
    if version >= Microversion::new(14) {
        body.insert(
            "properties".into(),
            links(base, &format!("drivers/{name}/properties")),
        );
    }
    if detail && version >= Microversion::new(30) {
        // What this site lets nodes of the type use (`enabled_<kind>_interfaces`), as
        // Ironic lists them; a kind left without a default shows null.
        for kind in InterfaceKind::ALL {
            body.insert(
                format!("default_{kind}_interface"),
                drivers
                    .default_interface(hardware_type, kind)
                    .ok()
                    .map_or(Value::Null, Value::from),
            );
            body.insert(
                format!("enabled_{kind}_interfaces"),
                json!(drivers.interfaces().enabled_for(hardware_type, kind)),
            );
        }
    }
    Value::Object(body)
}

/// `GET /v1/drivers` (`?type=classic|dynamic`, `?detail=true` from 1.30).
pub async fn driver_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let mut detail = false;
    let mut classic_only = false;
    for (name, value) in &query {
        match name.as_str() {
            "detail" | "type" if version < Microversion::new(30) => {
                return Err(ApiError::not_acceptable(format!(
                    "The '{name}' parameter needs API version 1.30 or later; the request used \
                     {version}."
                )));
            }
            "detail" => detail = parse_bool_param("detail", value)?,
            "type" => match value.as_str() {
                "dynamic" => {}
                "classic" => classic_only = true,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "Invalid driver type '{other}'; use classic or dynamic."
                    )));
                }
            },
            "fields" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unknown parameter '{other}' for the driver list."
                )));
            }
        }
    }
    let hosts = hosts_by_driver(&state).await?;
    let base = base_url(&headers);
    let enabled = state.conductor.drivers();
    let drivers: Vec<Value> = if classic_only {
        Vec::new()
    } else {
        enabled
            .enabled()
            .iter()
            .map(|hardware_type| {
                driver_json(enabled, hardware_type, &hosts, version, detail, &base)
            })
            .collect()
    };
    Ok(Json(json!({ "drivers": drivers })))
}

pub(crate) fn hardware_type(
    state: &ApiState,
    name: &str,
) -> Result<&'static HardwareType, ApiError> {
    state
        .conductor
        .drivers()
        .get(name)
        .ok_or_else(|| ApiError::not_found(format!("Driver {name} could not be found.")))
}

/// `GET /v1/drivers/{name}`.
pub async fn driver_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let hardware_type = hardware_type(&state, &name)?;
    let hosts = hosts_by_driver(&state).await?;
    Ok(Json(driver_json(
        state.conductor.drivers(),
        hardware_type,
        &hosts,
        version,
        true,
        &base_url(&headers),
    )))
}

/// `GET /v1/drivers/{name}/properties`: the `driver_info` keys the type understands.
pub async fn driver_properties_get(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let hardware_type = hardware_type(&state, &name)?;
    let properties: Map<String, Value> = hardware_type
        .properties()
        .iter()
        .map(|(key, description)| ((*key).to_owned(), Value::from(*description)))
        .collect();
    Ok(Json(Value::Object(properties)))
}
