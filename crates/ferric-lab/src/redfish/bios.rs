//! The lab BMC's Bios resource (current and pending `Settings`, `Bios.ResetBios`) and the
//! attribute registry it names; the state lives in `firmware.rs`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::error::RedfishError;
use super::wire::{collection, odata, parse_object, with};
use super::{RedfishBmc, firmware};
use crate::machine::MachineControl;

pub(crate) fn routes<M: MachineControl>() -> Router<Arc<RedfishBmc<M>>> {
    Router::new()
        .route("/redfish/v1/Systems/{id}/Bios", get(bios_get::<M>))
        .route(
            "/redfish/v1/Systems/{id}/Bios/Settings",
            get(bios_settings_get::<M>).patch(bios_settings_patch::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/Bios/Actions/Bios.ResetBios",
            post(bios_reset::<M>),
        )
        .route("/redfish/v1/Registries", get(registries))
        .route("/redfish/v1/Registries/{registry}", get(registry_file))
        .route(
            "/redfish/v1/Registries/{registry}/Registry",
            get(registry_get),
        )
}

async fn bios_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Bios");
    bmc.check_system(&id, &uri)?;
    let attributes = bmc.lock_firmware().attributes();
    Ok(with(
        odata(&uri, "#Bios.v1_1_0.Bios"),
        json!({
            "Id": "Bios",
            "Name": "BIOS Configuration Current Settings",
            "AttributeRegistry": firmware::REGISTRY,
            "Attributes": attributes,
            "@Redfish.Settings": {
                "@odata.type": "#Settings.v1_3_0.Settings",
                "SettingsObject": {"@odata.id": format!("{uri}/Settings")},
                "SupportedApplyTimes": ["OnReset"],
            },
            "Actions": {
                "#Bios.ResetBios": {"target": format!("{uri}/Actions/Bios.ResetBios")},
            },
        }),
    ))
}

async fn bios_settings_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Bios/Settings");
    bmc.check_system(&id, &uri)?;
    let pending = bmc.lock_firmware().pending();
    Ok(with(
        odata(&uri, "#Bios.v1_1_0.Bios"),
        json!({
            "Id": "Settings",
            "Name": "BIOS Configuration Pending Settings",
            "AttributeRegistry": firmware::REGISTRY,
            "Attributes": pending,
        }),
    ))
}

async fn bios_settings_patch<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<StatusCode, RedfishError> {
    bmc.check_system(&id, &format!("/redfish/v1/Systems/{id}/Bios/Settings"))?;
    let body = parse_object(&body)?;
    bmc.lock_firmware().set_pending(&body)?;
    tracing::info!(system = %id, "BIOS settings pending until the next boot");
    Ok(StatusCode::NO_CONTENT)
}

async fn bios_reset<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<StatusCode, RedfishError> {
    bmc.check_system(
        &id,
        &format!("/redfish/v1/Systems/{id}/Bios/Actions/Bios.ResetBios"),
    )?;
    bmc.lock_firmware().reset_to_defaults();
    tracing::info!(system = %id, "BIOS defaults pending until the next boot");
    Ok(StatusCode::NO_CONTENT)
}

fn registry_uri() -> String {
    format!("/redfish/v1/Registries/{}", firmware::REGISTRY)
}

async fn registries() -> Json<Value> {
    collection(
        "/redfish/v1/Registries",
        "#MessageRegistryFileCollection.MessageRegistryFileCollection",
        "Registry File Collection",
        &[registry_uri()],
    )
}

async fn registry_file(Path(registry): Path<String>) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Registries/{registry}");
    if registry != firmware::REGISTRY {
        return Err(RedfishError::NotFound { uri });
    }
    Ok(with(
        odata(&uri, "#MessageRegistryFile.v1_1_0.MessageRegistryFile"),
        json!({
            "Id": registry,
            "Name": "BIOS attribute registry file",
            "Registry": registry,
            "Languages": ["en"],
            "Location": [{"Language": "en", "Uri": format!("{uri}/Registry")}],
        }),
    ))
}

async fn registry_get(Path(registry): Path<String>) -> Result<Json<Value>, RedfishError> {
    if registry != firmware::REGISTRY {
        return Err(RedfishError::NotFound {
            uri: format!("/redfish/v1/Registries/{registry}/Registry"),
        });
    }
    Ok(Json(firmware::registry()))
}
