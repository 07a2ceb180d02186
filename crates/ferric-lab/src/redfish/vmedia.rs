//! The lab BMC's virtual media: one virtual CD (`Cd`), served both where older BMCs put it
//! (`/redfish/v1/Managers/BMC/VirtualMedia/Cd`) and where newer ones do
//! (`/redfish/v1/Systems/{id}/VirtualMedia/Cd`) — the same drive under two paths. The
//! `VirtualMedia.InsertMedia` and `VirtualMedia.EjectMedia` actions, and a PATCH of `Image` /
//! `Inserted` as BMCs without the actions take it, go to [`MachineControl::insert_media`]
//! (QEMU: the image is fetched and its CD drive's medium changed over QMP).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value, json};

use super::RedfishBmc;
use super::error::RedfishError;
use super::wire::{
    MANAGER_ID, collection, manager_vmedia, odata, parse_object, system_vmedia, with,
};
use crate::machine::MachineControl;

/// The one virtual media device's id.
pub(crate) const CD_ID: &str = "Cd";

/// The routes, to be merged under the BMC's authentication.
pub(crate) fn routes<M: MachineControl>() -> Router<Arc<RedfishBmc<M>>> {
    Router::new()
        .route(
            "/redfish/v1/Managers/{id}/VirtualMedia",
            get(manager_media_list::<M>),
        )
        .route(
            "/redfish/v1/Managers/{id}/VirtualMedia/{media}",
            get(manager_media_get::<M>).patch(manager_media_patch::<M>),
        )
        .route(
            "/redfish/v1/Managers/{id}/VirtualMedia/{media}/Actions/{action}",
            post(manager_media_action::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/VirtualMedia",
            get(system_media_list::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/VirtualMedia/{media}",
            get(system_media_get::<M>).patch(system_media_patch::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/VirtualMedia/{media}/Actions/{action}",
            post(system_media_action::<M>),
        )
}

/// Resolves a request's collection path: the Manager's or the System's, or 404.
fn base<M: MachineControl>(
    bmc: &RedfishBmc<M>,
    under_manager: bool,
    id: &str,
    uri: &str,
) -> Result<String, RedfishError> {
    let not_found = || RedfishError::NotFound {
        uri: uri.to_owned(),
    };
    if under_manager {
        (id == MANAGER_ID)
            .then(manager_vmedia)
            .ok_or_else(not_found)
    } else {
        bmc.check_system(id, uri)?;
        Ok(system_vmedia(id))
    }
}

fn list<M: MachineControl>(
    bmc: &RedfishBmc<M>,
    under_manager: bool,
    id: &str,
) -> Result<Json<Value>, RedfishError> {
    let uri = if under_manager {
        format!("/redfish/v1/Managers/{id}/VirtualMedia")
    } else {
        system_vmedia(id)
    };
    let base = base(bmc, under_manager, id, &uri)?;
    Ok(collection(
        &base,
        "#VirtualMediaCollection.VirtualMediaCollection",
        "Virtual Media Services",
        &[format!("{base}/{CD_ID}")],
    ))
}

fn media_body<M: MachineControl>(
    bmc: &RedfishBmc<M>,
    under_manager: bool,
    id: &str,
    media: &str,
) -> Result<Json<Value>, RedfishError> {
    let base = base(
        bmc,
        under_manager,
        id,
        &format!(
            "{}/{media}",
            if under_manager {
                manager_vmedia()
            } else {
                system_vmedia(id)
            }
        ),
    )?;
    let uri = format!("{base}/{media}");
    if media != CD_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let image = bmc.machine.media();
    let name = image
        .as_deref()
        .and_then(|url| url.rsplit('/').next())
        .unwrap_or("");
    Ok(with(
        odata(&uri, "#VirtualMedia.v1_3_0.VirtualMedia"),
        json!({
            "Id": CD_ID,
            "Name": "Virtual CD",
            "MediaTypes": ["CD", "DVD"],
            "Image": image,
            "ImageName": name,
            "Inserted": image.is_some(),
            "WriteProtected": true,
            "ConnectedVia": if image.is_some() { "URI" } else { "NotConnected" },
            "TransferMethod": "Stream",
            "Actions": {
                "#VirtualMedia.InsertMedia": {
                    "target": format!("{uri}/Actions/VirtualMedia.InsertMedia"),
                },
                "#VirtualMedia.EjectMedia": {
                    "target": format!("{uri}/Actions/VirtualMedia.EjectMedia"),
                },
            },
        }),
    ))
}

/// Inserts `Image` (an http(s) URL) or ejects, as an InsertMedia body or a PATCH asks.
async fn insert<M: MachineControl>(
    bmc: &RedfishBmc<M>,
    body: &Map<String, Value>,
) -> Result<(), RedfishError> {
    let image = match body.get("Image") {
        Some(Value::String(image)) if !image.is_empty() => image.clone(),
        Some(Value::Null) | None if body.get("Inserted") == Some(&Value::Bool(false)) => {
            return bmc
                .machine
                .eject_media()
                .await
                .map_err(RedfishError::Machine);
        }
        _ => {
            return Err(RedfishError::ParameterMissing {
                parameter: "Image".to_owned(),
            });
        }
    };
    if !(image.starts_with("http://") || image.starts_with("https://")) {
        return Err(RedfishError::ValueNotInList {
            property: "Image".to_owned(),
            value: image,
        });
    }
    if body.get("Inserted") == Some(&Value::Bool(false)) {
        return Err(RedfishError::ValueNotInList {
            property: "Inserted".to_owned(),
            value: "false".to_owned(),
        });
    }
    bmc.machine
        .insert_media(&image)
        .await
        .map_err(RedfishError::Machine)
}

async fn action<M: MachineControl>(
    bmc: &RedfishBmc<M>,
    under_manager: bool,
    id: &str,
    media: &str,
    action: &str,
    body: &[u8],
) -> Result<StatusCode, RedfishError> {
    media_body(bmc, under_manager, id, media).map(drop)?;
    match action {
        "VirtualMedia.InsertMedia" => {
            let body = parse_object(body)?;
            insert(bmc, &body).await?;
        }
        "VirtualMedia.EjectMedia" => {
            bmc.machine
                .eject_media()
                .await
                .map_err(RedfishError::Machine)?;
        }
        _ => {
            return Err(RedfishError::NotFound {
                uri: format!("{media}/Actions/{action}"),
            });
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn patch<M: MachineControl>(
    bmc: &RedfishBmc<M>,
    under_manager: bool,
    id: &str,
    media: &str,
    body: &[u8],
) -> Result<Json<Value>, RedfishError> {
    media_body(bmc, under_manager, id, media).map(drop)?;
    let body = parse_object(body)?;
    if let Some(property) = body
        .keys()
        .find(|key| !matches!(key.as_str(), "Image" | "Inserted" | "WriteProtected"))
    {
        return Err(RedfishError::PropertyUnknown {
            property: property.clone(),
        });
    }
    insert(bmc, &body).await?;
    media_body(bmc, under_manager, id, media)
}

async fn manager_media_list<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    list(&bmc, true, &id)
}

async fn system_media_list<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    list(&bmc, false, &id)
}

async fn manager_media_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, media)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    media_body(&bmc, true, &id, &media)
}

async fn system_media_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, media)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    media_body(&bmc, false, &id, &media)
}

async fn manager_media_patch<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, media)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, RedfishError> {
    patch(&bmc, true, &id, &media, &body).await
}

async fn system_media_patch<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, media)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, RedfishError> {
    patch(&bmc, false, &id, &media, &body).await
}

async fn manager_media_action<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, media, name)): Path<(String, String, String)>,
    body: axum::body::Bytes,
) -> Result<StatusCode, RedfishError> {
    action(&bmc, true, &id, &media, &name, &body).await
}

async fn system_media_action<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, media, name)): Path<(String, String, String)>,
    body: axum::body::Bytes,
) -> Result<StatusCode, RedfishError> {
    action(&bmc, false, &id, &media, &name, &body).await
}
