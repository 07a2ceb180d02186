//! The lab BMC's ComputerSystem: the system itself (power state, boot override), its PATCH
//! of `Boot`, and the `ComputerSystem.Reset` action.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value, json};

use super::RedfishBmc;
use super::error::RedfishError;
use super::wire::{MANAGER_ID, collection, odata, parse_object, system_vmedia, with};
use crate::machine::{
    BootMode, BootOverride, BootSettings, BootTarget, MachineControl, PowerAction, PowerState,
};

const TARGETS: [(BootTarget, &str); 6] = [
    (BootTarget::None, "None"),
    (BootTarget::Pxe, "Pxe"),
    (BootTarget::Hdd, "Hdd"),
    (BootTarget::Cd, "Cd"),
    (BootTarget::BiosSetup, "BiosSetup"),
    (BootTarget::UefiHttp, "UefiHttp"),
];
const OVERRIDES: [(BootOverride, &str); 3] = [
    (BootOverride::Once, "Once"),
    (BootOverride::Continuous, "Continuous"),
    (BootOverride::Disabled, "Disabled"),
];
const MODES: [(BootMode, &str); 2] = [(BootMode::Uefi, "UEFI"), (BootMode::Legacy, "Legacy")];

pub(crate) fn routes<M: MachineControl>() -> Router<Arc<RedfishBmc<M>>> {
    Router::new()
        .route("/redfish/v1/Systems", get(systems::<M>))
        .route(
            "/redfish/v1/Systems/{id}",
            get(system_get::<M>).patch(system_patch::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset",
            post(system_reset::<M>),
        )
}

async fn systems<M: MachineControl>(State(bmc): State<Arc<RedfishBmc<M>>>) -> Json<Value> {
    collection(
        "/redfish/v1/Systems",
        "#ComputerSystemCollection.ComputerSystemCollection",
        "Computer System Collection",
        &[bmc.system_uri()],
    )
}

fn names<T: Copy>(table: &[(T, &'static str)]) -> Vec<&'static str> {
    table.iter().map(|(_, name)| *name).collect()
}

fn name_of<T: Copy + PartialEq>(table: &[(T, &'static str)], value: T) -> &'static str {
    table
        .iter()
        .find(|(candidate, _)| *candidate == value)
        .map_or("None", |(_, name)| *name)
}

async fn system_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = bmc.system_uri();
    bmc.check_system(&id, &format!("/redfish/v1/Systems/{id}"))?;
    let info = bmc.machine.info();
    let power = match bmc
        .machine
        .power_state()
        .await
        .map_err(RedfishError::Machine)?
    {
        PowerState::On => "On",
        PowerState::Off => "Off",
        PowerState::PoweringOff => "PoweringOff",
    };
    let boot = bmc.machine.boot();
    let modes = bmc.machine.boot_modes();
    // UEFI HTTP boot exists only where the firmware is UEFI.
    let targets: Vec<&str> = TARGETS
        .iter()
        .filter(|(target, _)| *target != BootTarget::UefiHttp || modes.contains(&BootMode::Uefi))
        .map(|(_, name)| *name)
        .collect();
    let mode_names: Vec<&str> = modes.iter().map(|mode| name_of(&MODES, *mode)).collect();
    let bios_version = bmc.lock_firmware().bios_version.clone();
    let resets: Vec<&str> = PowerAction::ALL
        .iter()
        .map(|action| action.redfish_name())
        .collect();
    Ok(with(
        odata(&uri, "#ComputerSystem.v1_10_0.ComputerSystem"),
        json!({
            "Id": info.name,
            "Name": info.name,
            "SystemType": "Virtual",
            "Manufacturer": "Ferric",
            "Model": "Ferric Lab Machine",
            "SerialNumber": info.serial,
            "UUID": info.uuid,
            "PowerState": power,
            "BiosVersion": bios_version,
            "Bios": {"@odata.id": format!("{uri}/Bios")},
            "Status": {"State": "Enabled", "Health": "OK"},
            "Boot": {
                "BootSourceOverrideTarget": name_of(&TARGETS, boot.target),
                "BootSourceOverrideTarget@Redfish.AllowableValues": targets,
                "BootSourceOverrideEnabled": name_of(&OVERRIDES, boot.enabled),
                "BootSourceOverrideEnabled@Redfish.AllowableValues": names(&OVERRIDES),
                "BootSourceOverrideMode": name_of(&MODES, boot.mode),
                "BootSourceOverrideMode@Redfish.AllowableValues": mode_names,
            },
            "ProcessorSummary": {
                "Count": info.cpus,
                "Model": "QEMU TCG x86-64",
                "Status": {"State": "Enabled", "Health": "OK"},
            },
            "MemorySummary": {
                "TotalSystemMemoryGiB": f64::from(info.memory_mib) / 1024.0,
                "Status": {"State": "Enabled", "Health": "OK"},
            },
            "Processors": {"@odata.id": format!("{uri}/Processors")},
            "Memory": {"@odata.id": format!("{uri}/Memory")},
            "SimpleStorage": {"@odata.id": format!("{uri}/SimpleStorage")},
            "Storage": {"@odata.id": format!("{uri}/Storage")},
            "EthernetInterfaces": {"@odata.id": format!("{uri}/EthernetInterfaces")},
            "VirtualMedia": {"@odata.id": system_vmedia(&info.name)},
            "Links": {"ManagedBy": [{"@odata.id": format!("/redfish/v1/Managers/{MANAGER_ID}")}]},
            "Actions": {
                "#ComputerSystem.Reset": {
                    "target": format!("{uri}/Actions/ComputerSystem.Reset"),
                    "ResetType@Redfish.AllowableValues": resets,
                },
            },
        }),
    ))
}

fn parse_enum<T: Copy>(
    table: &[(T, &'static str)],
    property: &str,
    value: &Value,
) -> Result<T, RedfishError> {
    let text = value.as_str();
    table
        .iter()
        .find(|(_, name)| Some(*name) == text)
        .map(|(item, _)| *item)
        .ok_or_else(|| RedfishError::ValueNotInList {
            property: property.to_owned(),
            value: value.to_string(),
        })
}

/// Applies a PATCH body's `Boot` object to the current settings; only `Boot` is writable.
pub(crate) fn patched_boot(
    current: BootSettings,
    body: &Map<String, Value>,
) -> Result<BootSettings, RedfishError> {
    let mut boot = current;
    for (property, value) in body {
        if property != "Boot" {
            return Err(RedfishError::PropertyUnknown {
                property: property.clone(),
            });
        }
        let Value::Object(fields) = value else {
            return Err(RedfishError::MalformedJson {
                detail: "Boot must be an object".into(),
            });
        };
        for (field, value) in fields {
            let property = format!("Boot/{field}");
            match field.as_str() {
                "BootSourceOverrideTarget" => boot.target = parse_enum(&TARGETS, &property, value)?,
                "BootSourceOverrideEnabled" => {
                    boot.enabled = parse_enum(&OVERRIDES, &property, value)?
                }
                "BootSourceOverrideMode" => boot.mode = parse_enum(&MODES, &property, value)?,
                _ => return Err(RedfishError::PropertyUnknown { property }),
            }
        }
    }
    Ok(boot)
}

async fn system_patch<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, RedfishError> {
    bmc.check_system(&id, &format!("/redfish/v1/Systems/{id}"))?;
    let boot = patched_boot(bmc.machine.boot(), &parse_object(&body)?)?;
    if !bmc.machine.boot_modes().contains(&boot.mode) {
        return Err(RedfishError::ValueNotInList {
            property: "Boot/BootSourceOverrideMode".into(),
            value: format!("\"{}\"", name_of(&MODES, boot.mode)),
        });
    }
    if boot.target == BootTarget::UefiHttp && boot.mode != BootMode::Uefi {
        return Err(RedfishError::ValueNotInList {
            property: "Boot/BootSourceOverrideTarget".into(),
            value: "\"UefiHttp\" (UEFI HTTP boot needs BootSourceOverrideMode UEFI)".into(),
        });
    }
    bmc.machine
        .set_boot(boot)
        .await
        .map_err(RedfishError::Machine)?;
    tracing::info!(system = %id, ?boot, "boot settings changed");
    system_get(State(bmc), Path(id)).await
}

async fn system_reset<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<StatusCode, RedfishError> {
    bmc.check_system(
        &id,
        &format!("/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset"),
    )?;
    let body = parse_object(&body)?;
    let reset_type = body
        .get("ResetType")
        .ok_or_else(|| RedfishError::ParameterMissing {
            parameter: "ResetType".into(),
        })?;
    let action = reset_type
        .as_str()
        .and_then(PowerAction::from_redfish_name)
        .ok_or_else(|| RedfishError::ValueNotInList {
            property: "ResetType".into(),
            value: reset_type.to_string(),
        })?;
    let boots = matches!(
        action,
        PowerAction::On
            | PowerAction::ForceRestart
            | PowerAction::GracefulRestart
            | PowerAction::PowerCycle
    );
    if boots {
        // The RAID controller applies its waiting requests as the machine resets, so the
        // machine starts with its new volumes.
        let changed = bmc.lock_raid().reset();
        if changed {
            let disks = bmc.lock_raid().disks();
            bmc.machine
                .set_volumes(disks)
                .await
                .map_err(RedfishError::Machine)?;
        }
    }
    bmc.machine
        .power(action)
        .await
        .map_err(RedfishError::Machine)?;
    if boots {
        // The machine boots: pending BIOS settings take effect.
        bmc.lock_firmware().booted();
    }
    tracing::info!(system = %id, reset = action.redfish_name(), "reset done");
    Ok(StatusCode::NO_CONTENT)
}
