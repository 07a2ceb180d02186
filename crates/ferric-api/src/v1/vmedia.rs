//! `/v1/nodes/{node_ident}/vmedia`: attach any image as the node's virtual CD, floppy or USB
//! disk (`POST`, 1.89, 204), eject (`DELETE`, 1.89, 204; `?device_types=cdrom,…` limits it)
//! and list the devices as the BMC reports them (`GET`, 1.93). The node's conductor does it
//! through the management interface under the node's lease (`ferric-conductor` `vmedia.rs`);
//! a management interface without virtual media answers 400 naming the driver.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use ferric_model::values::VmediaDevice;
use serde_json::{Value, json};

use super::body::{BodyField, BodySpec, Kind, Null, wire_names};
use super::states::{conductor_error, node};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

fn device(value: &Value) -> Result<VmediaDevice, ApiError> {
    value
        .as_str()
        .and_then(|name| name.parse().ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid device_type {value}; use one of: {}.",
                VmediaDevice::ALL.map(VmediaDevice::as_str).join(", ")
            ))
        })
}

/// The body of `POST …/vmedia`. The BMC fetches the URL itself, so `http` is the only
/// download source.
pub(crate) static VMEDIA_ATTACH_BODY: BodySpec = BodySpec::new(
    "VmediaAttachRequest",
    &[
        BodyField::new("device_type", Kind::Choice(wire_names!(VmediaDevice)))
            .required()
            .invalid("Invalid device_type {value}; use one of: {choices}."),
        BodyField::new("image_url", Kind::HttpUrl)
            .required()
            .invalid(
                "Invalid image_url {value}: give the http(s) URL the BMC fetches the image from.",
            ),
        BodyField::new("image_download_source", Kind::Choice(&["http"]))
            .null(Null::Absent)
            .invalid(
                "Invalid image_download_source {value}: Ferric supports \"http\" (the BMC \
                 fetches image_url itself); serve the image over HTTP and send that.",
            ),
    ],
)
.unknown("Unknown field '{name}' in a virtual media request.");

/// `POST …/vmedia` `{"device_type", "image_url", "image_download_source"}`: 204 once the BMC
/// presents the image. The BMC fetches the URL itself (`image_download_source` `http`).
pub async fn node_vmedia_attach(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let mut body = VMEDIA_ATTACH_BODY.parse(&body, version)?;
    let device: VmediaDevice = body
        .parse("device_type")?
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'device_type'."))?;
    let url = body
        .text("image_url")
        .ok_or_else(|| ApiError::bad_request("Mandatory field missing: 'image_url'."))?;
    let node = node(&state, &ident).await?;
    state
        .conductor
        .vmedia_attach(node.uuid, device, &url)
        .await
        .map_err(conductor_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE …/vmedia[?device_types=cdrom,floppy]`: 204 once the BMC ejected them (every kind
/// when none is named).
pub async fn node_vmedia_detach(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<StatusCode, ApiError> {
    let devices = match query.get("device_types") {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(|name| device(&Value::from(name)))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let node = node(&state, &ident).await?;
    state
        .conductor
        .vmedia_detach(node.uuid, &devices)
        .await
        .map_err(conductor_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET …/vmedia`: `{"vmedia": [{"device_type", "image_url", "inserted", "location"}]}`.
pub async fn node_vmedia_list(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    let slots = state
        .conductor
        .vmedia_list(node.uuid)
        .await
        .map_err(conductor_error)?;
    Ok(Json(json!({ "vmedia": slots })))
}
