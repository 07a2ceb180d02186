//! The lab BMC's Storage resources (DMTF `Storage`, `Drive`, `Volume`): one RAID controller
//! under the system, whose Volumes collection takes a POST (`RAIDType`, `CapacityBytes`,
//! `Links.Drives`) and a DELETE, each answered 202 with a Task in `Location` that completes at
//! the next reset (`raid.rs` holds the state).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;

use super::RedfishBmc;
use super::error::RedfishError;
use super::raid::{self, STORAGE_ID};
use super::wire::{collection, parse_object};
use crate::machine::MachineControl;

pub(crate) fn routes<M: MachineControl>() -> Router<Arc<RedfishBmc<M>>> {
    Router::new()
        .route("/redfish/v1/Systems/{id}/Storage", get(storages::<M>))
        .route(
            "/redfish/v1/Systems/{id}/Storage/{storage}",
            get(storage_get::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/Storage/{storage}/Drives/{drive}",
            get(drive_get::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/Storage/{storage}/Volumes",
            get(volumes::<M>).post(volume_create::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/Storage/{storage}/Volumes/{volume}",
            get(volume_get::<M>).delete(volume_delete::<M>),
        )
}

/// 404 unless the path names this system and its controller.
fn check<M: MachineControl>(
    bmc: &RedfishBmc<M>,
    id: &str,
    storage: &str,
    uri: &str,
) -> Result<(), RedfishError> {
    bmc.check_system(id, uri)?;
    if storage == STORAGE_ID {
        Ok(())
    } else {
        Err(RedfishError::NotFound {
            uri: uri.to_owned(),
        })
    }
}

async fn storages<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Storage");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#StorageCollection.StorageCollection",
        "Storage Collection",
        &[bmc.lock_raid().storage_uri()],
    ))
}

async fn storage_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, storage)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    check(
        &bmc,
        &id,
        &storage,
        &format!("/redfish/v1/Systems/{id}/Storage/{storage}"),
    )?;
    Ok(Json(bmc.lock_raid().storage()))
}

async fn drive_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, storage, drive)): Path<(String, String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Storage/{storage}/Drives/{drive}");
    check(&bmc, &id, &storage, &uri)?;
    bmc.lock_raid()
        .drive(&drive)
        .map(Json)
        .ok_or(RedfishError::NotFound { uri })
}

async fn volumes<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, storage)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    check(
        &bmc,
        &id,
        &storage,
        &format!("/redfish/v1/Systems/{id}/Storage/{storage}/Volumes"),
    )?;
    Ok(Json(bmc.lock_raid().volumes()))
}

async fn volume_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, storage, volume)): Path<(String, String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Storage/{storage}/Volumes/{volume}");
    check(&bmc, &id, &storage, &uri)?;
    bmc.lock_raid()
        .volume(&volume)
        .map(Json)
        .ok_or(RedfishError::NotFound { uri })
}

/// 202 with the task in `Location` and as the body.
fn accepted<M: MachineControl>(bmc: &RedfishBmc<M>, task: u64) -> Response {
    let body = bmc.lock_raid().task(task).unwrap_or(Value::Null);
    let mut response = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&raid::task_uri(task)) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

async fn volume_create<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, storage)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, RedfishError> {
    check(
        &bmc,
        &id,
        &storage,
        &format!("/redfish/v1/Systems/{id}/Storage/{storage}/Volumes"),
    )?;
    let task = bmc.lock_raid().request_create(&parse_object(&body)?)?;
    tracing::info!(system = %id, task, "RAID volume requested; built at the next reset");
    Ok(accepted(&bmc, task))
}

async fn volume_delete<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, storage, volume)): Path<(String, String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, RedfishError> {
    check(
        &bmc,
        &id,
        &storage,
        &format!("/redfish/v1/Systems/{id}/Storage/{storage}/Volumes/{volume}"),
    )?;
    let task = bmc.lock_raid().request_delete(&volume, &body)?;
    tracing::info!(system = %id, volume, task, "RAID volume delete requested; done at the next reset");
    Ok(accepted(&bmc, task))
}
