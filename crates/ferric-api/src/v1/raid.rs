//! RAID requests (API 1.12): `PUT /v1/nodes/{node}/states/raid` stores the node's target RAID
//! configuration after its raid interface has checked it (the `raid.*` steps build it later),
//! and `GET /v1/drivers/{driver}/raid/logical_disk_properties` describes a logical disk.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::json_object_body;
use super::states::{conductor_error, node, update_unleased_node};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// `PUT /v1/nodes/{node}/states/raid`: the body is the target configuration
/// (`{"logical_disks": [...]}`, or `{}` to clear it); 204.
pub async fn node_raid_set(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let target = json_object_body(&body)?;
    // The node's raid interface checks it, on the node's conductor.
    let uuid = node(&state, &ident).await?.uuid;
    state
        .conductor
        .validate_raid_target(uuid, target.clone())
        .await
        .map_err(conductor_error)?;
    update_unleased_node(&state, &ident, "its target RAID configuration", |node| {
        node.target_raid_config = target.clone();
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What each property of a logical disk means (Ferric's words; the keys are Ironic's).
const LOGICAL_DISK_PROPERTIES: &[(&str, &str)] = &[
    (
        "raid_level",
        "Required. The level, as a string: 0, 1, 2, 5, 6, 1+0, 5+0 or 6+0 (software RAID: \
         0, 1, 5, 6 and 1+0).",
    ),
    (
        "size_gb",
        "Required. The volume's size in GiB, or MAX for all the space its disks have.",
    ),
    (
        "volume_name",
        "Optional. A name for the volume, unique on the node.",
    ),
    (
        "is_root_volume",
        "Optional, false by default. The volume the image is deployed onto: it becomes the \
         node's properties.root_device once built. At most one per configuration.",
    ),
    (
        "share_physical_disks",
        "Optional, false by default. Whether other volumes may use the same disks.",
    ),
    (
        "disk_type",
        "Optional. Build it only on disks of this kind: hdd or ssd.",
    ),
    (
        "interface_type",
        "Optional. Build it only on disks attached this way: sata, scsi or sas.",
    ),
    (
        "number_of_physical_disks",
        "Optional. How many disks the volume spans (default: the fewest its level needs).",
    ),
    (
        "controller",
        "Optional. Which controller builds it; software means Linux software RAID built by \
         the agent ramdisk (raid_interface agent).",
    ),
    (
        "physical_disks",
        "Optional. The disks to build it on: device names, or root device hint objects such \
         as {\"name\": \"/dev/sda\"} for software RAID.",
    ),
];

/// `GET /v1/drivers/{driver}/raid/logical_disk_properties`.
pub async fn driver_raid_properties(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(driver): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if state.conductor.drivers().get(&driver).is_none() {
        return Err(ApiError::not_found(format!(
            "Could not find the following driver(s) or hardware type(s): {driver}."
        )));
    }
    let properties: serde_json::Map<String, Value> = LOGICAL_DISK_PROPERTIES
        .iter()
        .map(|(name, meaning)| ((*name).to_owned(), json!(meaning)))
        .collect();
    Ok(Json(Value::Object(properties)))
}
