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

use super::json_object_body;
use super::states::{conductor_error, node, refuse_leftovers, required};
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

/// `POST …/vmedia` `{"device_type", "image_url", "image_download_source"}`: 204 once the BMC
/// presents the image. The BMC fetches the URL itself (`image_download_source` `http`).
pub async fn node_vmedia_attach(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let mut body = json_object_body(&body)?;
    let device = device(&required(&mut body, "device_type")?)?;
    let url = required(&mut body, "image_url")?;
    let url = url
        .as_str()
        .filter(|url| url.starts_with("http://") || url.starts_with("https://"))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid image_url {url}: give the http(s) URL the BMC fetches the image from."
            ))
        })?
        .to_owned();
    match body.remove("image_download_source") {
        None | Some(Value::Null) => {}
        Some(Value::String(source)) if source == "http" => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid image_download_source {other}: Ferric supports \"http\" (the BMC \
                 fetches image_url itself); serve the image over HTTP and send that."
            )));
        }
    }
    refuse_leftovers(&body, "a virtual media request")?;
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
