//! The shapes every Redfish resource of the lab BMC is written in: `@odata` headers,
//! collections, the JSON object a request body must be, and the fixed paths resources link to.
//! A leaf: the resource modules use it, it uses none of them.

use axum::Json;
use serde_json::{Map, Value, json};

use super::error::RedfishError;

/// The Manager's id; the system's id is the machine's name.
pub const MANAGER_ID: &str = "BMC";

/// The virtual media collection's path under the Manager, where older BMCs put it.
pub(super) fn manager_vmedia() -> String {
    format!("/redfish/v1/Managers/{MANAGER_ID}/VirtualMedia")
}

/// The virtual media collection's path under a System, where newer BMCs put it.
pub(super) fn system_vmedia(system: &str) -> String {
    format!("/redfish/v1/Systems/{system}/VirtualMedia")
}

pub(super) fn odata(id: &str, odata_type: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("@odata.id".into(), json!(id));
    map.insert("@odata.type".into(), json!(odata_type));
    map
}

pub(super) fn with(mut map: Map<String, Value>, extra: Value) -> Json<Value> {
    if let Value::Object(extra) = extra {
        map.extend(extra);
    }
    Json(Value::Object(map))
}

pub(super) fn collection(
    id: &str,
    odata_type: &str,
    name: &str,
    members: &[String],
) -> Json<Value> {
    let members: Vec<Value> = members
        .iter()
        .map(|uri| json!({"@odata.id": uri}))
        .collect();
    with(
        odata(id, odata_type),
        json!({"Name": name, "Members@odata.count": members.len(), "Members": members}),
    )
}

pub(super) fn parse_object(body: &[u8]) -> Result<Map<String, Value>, RedfishError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(RedfishError::MalformedJson {
            detail: "expected a JSON object".into(),
        }),
        Err(error) => Err(RedfishError::MalformedJson {
            detail: error.to_string(),
        }),
    }
}
