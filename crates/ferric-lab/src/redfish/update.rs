//! The lab BMC's UpdateService (`SimpleUpdate` of the BIOS or the BMC) and TaskService (the
//! tasks those updates run as, `firmware.rs`, and the RAID controller's, `raid-N`, `raid.rs`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::RedfishBmc;
use super::error::RedfishError;
use super::firmware::{self, Component};
use super::raid;
use super::wire::{MANAGER_ID, collection, odata, parse_object, with};
use crate::machine::MachineControl;

pub(crate) fn routes<M: MachineControl>() -> Router<Arc<RedfishBmc<M>>> {
    Router::new()
        .route("/redfish/v1/UpdateService", get(update_service))
        .route(
            "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
            post(simple_update::<M>),
        )
        .route("/redfish/v1/TaskService", get(task_service))
        .route("/redfish/v1/TaskService/Tasks", get(tasks::<M>))
        .route("/redfish/v1/TaskService/Tasks/{task}", get(task_get::<M>))
}

async fn update_service() -> Json<Value> {
    with(
        odata(
            "/redfish/v1/UpdateService",
            "#UpdateService.v1_8_0.UpdateService",
        ),
        json!({
            "Id": "UpdateService",
            "Name": "Update Service",
            "ServiceEnabled": true,
            "Actions": {
                "#UpdateService.SimpleUpdate": {
                    "target": "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                    "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"],
                },
            },
        }),
    )
}

/// `SimpleUpdate`: `ImageURI` and `Targets` (the system for its BIOS, the Manager for the
/// BMC; none means the BIOS). 202 with the task in `Location`.
async fn simple_update<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    body: axum::body::Bytes,
) -> Result<Response, RedfishError> {
    let body = parse_object(&body)?;
    let image = body
        .get("ImageURI")
        .and_then(Value::as_str)
        .filter(|image| !image.is_empty())
        .ok_or_else(|| RedfishError::ParameterMissing {
            parameter: "ImageURI".to_owned(),
        })?;
    let manager = format!("/redfish/v1/Managers/{MANAGER_ID}");
    let targets: Vec<&str> = body
        .get("Targets")
        .and_then(Value::as_array)
        .map(|targets| targets.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let component = match targets.as_slice() {
        [] => Component::Bios,
        [target] if target.trim_end_matches('/') == bmc.system_uri() => Component::Bios,
        [target] if target.trim_end_matches('/') == manager => Component::Bmc,
        _ => {
            return Err(RedfishError::ValueNotInList {
                property: "Targets".to_owned(),
                value: json!(targets).to_string(),
            });
        }
    };
    let (id, task) = {
        let mut state = bmc.lock_firmware();
        let id = state.start_update(component, image);
        (id, state.read_task_unchanged(id))
    };
    tracing::info!(image, ?component, task = id, "firmware update started");
    let mut response = (StatusCode::ACCEPTED, Json(task)).into_response();
    if let Ok(value) = HeaderValue::from_str(&firmware::task_uri(id)) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

async fn task_service() -> Json<Value> {
    with(
        odata("/redfish/v1/TaskService", "#TaskService.v1_1_4.TaskService"),
        json!({
            "Id": "TaskService",
            "Name": "Task Service",
            "ServiceEnabled": true,
            "Tasks": {"@odata.id": "/redfish/v1/TaskService/Tasks"},
        }),
    )
}

async fn tasks<M: MachineControl>(State(bmc): State<Arc<RedfishBmc<M>>>) -> Json<Value> {
    let mut uris: Vec<String> = bmc
        .lock_firmware()
        .task_ids()
        .into_iter()
        .map(firmware::task_uri)
        .collect();
    uris.extend(bmc.lock_raid().task_ids().into_iter().map(raid::task_uri));
    collection(
        "/redfish/v1/TaskService/Tasks",
        "#TaskCollection.TaskCollection",
        "Task Collection",
        &uris,
    )
}

async fn task_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(task): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/TaskService/Tasks/{task}");
    if let Some(id) = task.strip_prefix("raid-") {
        return id
            .parse()
            .ok()
            .and_then(|id| bmc.lock_raid().task(id))
            .map(Json)
            .ok_or(RedfishError::NotFound { uri });
    }
    let id: u64 = task
        .parse()
        .map_err(|_| RedfishError::NotFound { uri: uri.clone() })?;
    bmc.lock_firmware()
        .read_task(id)
        .map(Json)
        .ok_or(RedfishError::NotFound { uri })
}
