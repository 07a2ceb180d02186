//! What the BIOS and firmware interfaces read, kept in the store for `GET
//! /v1/nodes/{node}/bios` and `/firmware` (issue 14).
//!
//! Drivers only read the hardware; the conductor stores what they report: when a node is
//! verified (`manage`), and after every BIOS or firmware step that finished. At `manage` a BMC
//! that cannot report (no BIOS resource, `no-bios`) does not stop the node from becoming
//! manageable; after a step it fails the step, since the change could not be confirmed.

use chrono::Utc;
use ferric_drivers::{DriverError, FirmwareUpdate, Interfaces, StepCall};
use ferric_model::resources::{BiosSetting, InterfaceKind};

use crate::task::Task;

fn store_failed(what: &str, error: impl std::fmt::Display) -> DriverError {
    DriverError::failed(
        ferric_drivers::Component::Conductor,
        format!("storing the {what} read from the BMC failed: {error}"),
    )
}

/// Reads every BIOS setting and stores them in place of the old ones.
pub(crate) async fn refresh_bios(
    task: &Task,
    interfaces: &Interfaces,
) -> Result<usize, DriverError> {
    let read = interfaces.bios.cache_settings(&task.node).await?;
    let now = Utc::now();
    let settings: Vec<BiosSetting> = read
        .into_iter()
        .map(|value| BiosSetting {
            name: value.name,
            value: value.value,
            registry: value.registry,
            created_at: now,
            updated_at: None,
        })
        .collect();
    // Fenced by the task's lease like the node's own writes: a conductor cut off and taken
    // over cannot rewrite them (the ports inspection creates are not fenced yet).
    task.inner
        .store
        .node_bios_set(task.uuid(), &settings, Some(task.fence()))
        .await
        .map_err(|error| store_failed("BIOS settings", error))?;
    Ok(settings.len())
}

/// Reads the firmware components' versions and stores them; `flashed` names the components a
/// `firmware.update` step just installed.
pub(crate) async fn refresh_firmware(
    task: &Task,
    interfaces: &Interfaces,
    flashed: &[String],
) -> Result<usize, DriverError> {
    let versions = interfaces.firmware.cache_components(&task.node).await?;
    task.inner
        .store
        .node_firmware_set(task.uuid(), &versions, flashed, Some(task.fence()))
        .await
        .map_err(|error| store_failed("firmware versions", error))?;
    Ok(versions.len())
}

/// After a step finished: refresh what it changed.
pub(crate) async fn after_step(
    task: &Task,
    interfaces: &Interfaces,
    step: &StepCall,
) -> Result<(), DriverError> {
    match step.interface {
        InterfaceKind::Bios => refresh_bios(task, interfaces).await.map(drop),
        InterfaceKind::Firmware => {
            let flashed: Vec<String> = FirmwareUpdate::from_args(&step.args)
                .unwrap_or_default()
                .into_iter()
                .map(|update| update.component)
                .collect();
            refresh_firmware(task, interfaces, &flashed).await.map(drop)
        }
        _ => Ok(()),
    }
}

/// At `manage`: cache both, as far as the node's interfaces can; problems are logged only.
pub(crate) async fn refresh_at_manage(task: &Task, interfaces: &Interfaces) {
    let node = task.uuid();
    match refresh_bios(task, interfaces).await {
        Ok(count) => tracing::debug!(%node, count, "BIOS settings cached"),
        Err(DriverError::Unsupported { .. }) => {}
        Err(error) => tracing::warn!(%node, %error, "could not cache the BIOS settings"),
    }
    match refresh_firmware(task, interfaces, &[]).await {
        Ok(count) => tracing::debug!(%node, count, "firmware components cached"),
        Err(DriverError::Unsupported { .. }) => {}
        Err(error) => tracing::warn!(%node, %error, "could not cache the firmware components"),
    }
}
