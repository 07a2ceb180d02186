//! The `redfish` power and management interfaces (DMTF DSP0266 over HTTPS): power state and
//! `ComputerSystem.Reset`, boot source override (device, once/continuous, UEFI/Legacy mode),
//! NMI and indicator LEDs (`indicators.rs`), on the ComputerSystem that `redfish_system_id`
//! names (or the BMC's only one).
//!
//! A power action is done when the BMC reports the power state it leads to: BMCs (and
//! sushy-tools' emulator) apply resets asynchronously, so the driver polls the state every
//! `power_state_poll_interval` up to `power_state_change_timeout`, as Ironic's does.

mod bios;
pub(crate) mod client;
mod firmware;
mod https_boot;
mod indicators;
mod info;
mod inspect;
mod raid;
mod vmedia;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferric_model::resources::{Node, PowerState};
use reqwest::Method;
use serde_json::{Value, json};

pub(crate) use bios::RedfishBios;
pub(crate) use client::Clients;
pub(crate) use firmware::RedfishFirmware;
pub(crate) use https_boot::RedfishHttpsBoot;
pub(crate) use info::PROPERTIES;
pub(crate) use inspect::RedfishInspect;
pub(crate) use raid::RedfishRaid;
pub(crate) use vmedia::RedfishVirtualMediaBoot;

use crate::Component;
use crate::DriverError;
use crate::bmc_state::BmcState;
use crate::interfaces::{
    BootDevice, BootDeviceSetting, BootMode, Indicator, IndicatorState, ManagementInterface,
    PowerAction, PowerInterface, Validate,
};
use crate::vmedia::{VmediaDevice, VmediaSlot};
use client::RedfishError;
use info::RedfishInfo;

/// Boot devices and their `BootSourceOverrideTarget` names.
const TARGETS: [(BootDevice, &str); 5] = [
    (BootDevice::Pxe, "Pxe"),
    (BootDevice::Disk, "Hdd"),
    (BootDevice::Cdrom, "Cd"),
    (BootDevice::Bios, "BiosSetup"),
    (BootDevice::Uefihttp, "UefiHttp"),
];

/// The `redfish` power and management interface; one value serves both kinds.
#[derive(Debug, Clone)]
pub(crate) struct Redfish {
    pub(crate) state: Arc<BmcState>,
}

impl From<RedfishError> for DriverError {
    fn from(error: RedfishError) -> Self {
        DriverError::failed(Component::Bmc, error.to_string())
    }
}

impl Redfish {
    fn clients(&self) -> &Clients {
        &self.state.redfish
    }

    /// The ComputerSystem's path: `redfish_system_id`, or the BMC's only system.
    async fn system_path(&self, info: &RedfishInfo) -> Result<String, DriverError> {
        if let Some(path) = &info.system_id {
            return Ok(path.clone());
        }
        if let Some(path) = self.clients().default_system(&info.address) {
            return Ok(path);
        }
        let systems = self
            .clients()
            .send(info, Method::GET, "/redfish/v1/Systems", None)
            .await?
            .body;
        let members = system_members(&systems);
        match members.as_slice() {
            [only] => {
                let path = only.trim_end_matches('/').to_owned();
                self.clients().remember_default_system(&info.address, &path);
                Ok(path)
            }
            [] => Err(DriverError::failed(
                Component::Bmc,
                format!(
                    "Redfish BMC {}: it lists no ComputerSystem under /redfish/v1/Systems",
                    info.address
                ),
            )),
            several => Err(DriverError::invalid(
                "driver_info.redfish_system_id",
                format!(
                    "Redfish BMC {} has {} systems; set driver_info redfish_system_id to one of: {}",
                    info.address,
                    several.len(),
                    several.join(", ")
                ),
            )),
        }
    }

    async fn system(&self, info: &RedfishInfo) -> Result<(String, Value), DriverError> {
        let path = self.system_path(info).await?;
        let body = self
            .clients()
            .send(info, Method::GET, &path, None)
            .await?
            .body;
        Ok((path, body))
    }

    async fn power_state(&self, info: &RedfishInfo) -> Result<PowerState, DriverError> {
        let (_, system) = self.system(info).await?;
        Ok(power_state_of(&system))
    }

    async fn reset(
        &self,
        info: &RedfishInfo,
        path: &str,
        reset_type: &str,
    ) -> Result<(), DriverError> {
        // The action's target, as the system advertises it (DSP0266 requires following it).
        let target = format!("{path}/Actions/ComputerSystem.Reset");
        self.clients()
            .send(
                info,
                Method::POST,
                &target,
                Some(&json!({ "ResetType": reset_type })),
            )
            .await?;
        Ok(())
    }

    /// Polls until the BMC reports `expected`, or fails after `timeout`.
    async fn wait_for(
        &self,
        info: &RedfishInfo,
        expected: PowerState,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let settings = self.clients().settings();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let state = self.power_state(info).await?;
            if state == expected {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(DriverError::failed(
                    Component::Bmc,
                    format!(
                        "Redfish BMC {}: the power state is still \"{state}\" {} s after the \
                     request; expected \"{expected}\"",
                        info.address,
                        timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(settings.power_state_poll_interval).await;
        }
    }
}

/// The `@odata.id` of every member of a collection (`/redfish/v1/Systems`).
pub(crate) fn system_members(collection: &Value) -> Vec<&str> {
    collection
        .get("Members")
        .and_then(Value::as_array)
        .map(|members| {
            members
                .iter()
                .filter_map(|member| member.get("@odata.id").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// The boot source override of a ComputerSystem.
pub(crate) fn boot_device_of(system: &Value) -> BootDeviceSetting {
    let target = system
        .pointer("/Boot/BootSourceOverrideTarget")
        .and_then(Value::as_str);
    let enabled = system
        .pointer("/Boot/BootSourceOverrideEnabled")
        .and_then(Value::as_str);
    BootDeviceSetting {
        device: if enabled == Some("Disabled") {
            None
        } else {
            TARGETS
                .iter()
                .find(|(_, name)| Some(*name) == target)
                .map(|(device, _)| *device)
        },
        persistent: match enabled {
            Some("Continuous") => Some(true),
            Some("Once") => Some(false),
            _ => None,
        },
    }
}

/// The boot mode a ComputerSystem's override uses.
pub(crate) fn boot_mode_of(system: &Value) -> Option<BootMode> {
    match system
        .pointer("/Boot/BootSourceOverrideMode")
        .and_then(Value::as_str)
    {
        Some("UEFI") => Some(BootMode::Uefi),
        Some("Legacy") => Some(BootMode::Bios),
        _ => None,
    }
}

/// The node's boot mode ([`crate::boot_mode`]) as the system's `BootSourceOverrideMode`, if
/// the system has that property; a mode outside its allowable values is refused with what
/// to set.
pub(crate) fn override_mode(
    node: &Node,
    system: &Value,
) -> Result<Option<(BootMode, &'static str)>, DriverError> {
    if system.pointer("/Boot/BootSourceOverrideMode").is_none() {
        return Ok(None);
    }
    let (mode, source) = crate::boot_mode::boot_mode(node)?;
    let name = match mode {
        BootMode::Uefi => "UEFI",
        BootMode::Bios => "Legacy",
    };
    let allowed: Option<Vec<&str>> = system
        .pointer("/Boot/BootSourceOverrideMode@Redfish.AllowableValues")
        .and_then(Value::as_array)
        .map(|values| values.iter().filter_map(Value::as_str).collect());
    if let Some(allowed) = allowed
        && !allowed.contains(&name)
    {
        let other = match mode {
            BootMode::Uefi => "bios",
            BootMode::Bios => "uefi",
        };
        return Err(DriverError::invalid(
            "capabilities.boot_mode",
            format!(
                "Node {}: its BMC allows boot mode {} only, and the node asks for {mode} (from {}); \
             set boot_mode:{other} in properties.capabilities (or instance_info.capabilities).",
                node.uuid,
                allowed.join(", "),
                source.field()
            ),
        ));
    }
    Ok(Some((mode, name)))
}

/// Refuses a boot target outside the system's `BootSourceOverrideTarget` allowable values,
/// naming what the BMC allows.
pub(crate) fn check_target(
    node: &Node,
    system: &Value,
    device: BootDevice,
    target: &str,
) -> Result<(), DriverError> {
    if let Some(allowed) = system
        .pointer("/Boot/BootSourceOverrideTarget@Redfish.AllowableValues")
        .and_then(Value::as_array)
        && !allowed.iter().any(|value| value.as_str() == Some(target))
    {
        let hint = match device {
            BootDevice::Uefihttp => "; it has no UEFI HTTP boot: set boot_interface pxe or ipxe",
            BootDevice::Cdrom => "; it cannot boot virtual media: set boot_interface pxe or ipxe",
            _ => "",
        };
        return Err(DriverError::invalid(
            "node.boot_interface",
            format!(
                "Node {}: its BMC cannot boot from {target} (it allows {}){hint}.",
                node.uuid,
                allowed
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(())
}

/// `driver_internal_info` key: the URL the next UEFI HTTP boot loads (`HttpBootUri`), put there
/// by the `redfish-https` boot interface and taken out by the boot device call that follows
/// (Ironic's name and protocol).
pub(crate) const HTTP_BOOT_URL_KEY: &str = "redfish_uefi_http_url";

/// What a boot device change sets `HttpBootUri` to, as Ironic (sushy) does: the URL for a UEFI
/// HTTP boot that has one, which the BMC must list among its `Boot` properties; otherwise
/// `null` where the BMC holds an earlier URL, so a DHCP-driven UEFI HTTP boot (the `http`
/// boot interface) or a disk boot does not load a stale ISO; otherwise nothing.
pub(crate) fn http_boot_uri_of(
    node: &Node,
    system: &Value,
    device: BootDevice,
    url: Option<String>,
) -> Result<Option<Value>, DriverError> {
    let current = system.pointer("/Boot/HttpBootUri");
    match url {
        Some(url) if device == BootDevice::Uefihttp => {
            if current.is_none() {
                return Err(DriverError::invalid(
                    "node.boot_interface",
                    format!(
                        "Node {}: its BMC has no HttpBootUri boot property, so it cannot UEFI \
                         HTTP boot a given URL ({url}); use boot_interface \
                         redfish-virtual-media for this node.",
                        node.uuid
                    ),
                ));
            }
            Ok(Some(Value::String(url)))
        }
        _ => {
            let set = current.is_some_and(|value| !value.is_null() && value != "");
            Ok(set.then_some(Value::Null))
        }
    }
}

/// The Redfish name of a boot device, or what to do when Redfish has none.
fn target_of(device: BootDevice) -> Result<&'static str, DriverError> {
    TARGETS
        .iter()
        .find(|(candidate, _)| *candidate == device)
        .map(|(_, name)| *name)
        .ok_or_else(|| {
            DriverError::invalid(
                "argument.boot_device",
                format!("The redfish management interface cannot set boot device {device}."),
            )
        })
}

/// Ironic's mapping: transitional states count as where they lead.
pub(crate) fn power_state_of(system: &Value) -> PowerState {
    match system.get("PowerState").and_then(Value::as_str) {
        Some("On" | "PoweringOn") => PowerState::On,
        Some("Off" | "PoweringOff") => PowerState::Off,
        _ => PowerState::Error,
    }
}

#[async_trait]
impl Validate for Redfish {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        RedfishInfo::parse(node).map(|_| ())
    }
}

#[async_trait]
impl PowerInterface for Redfish {
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        let info = RedfishInfo::parse(node)?;
        self.power_state(&info).await
    }

    async fn set_power(
        &self,
        node: &Node,
        action: PowerAction,
        timeout: Option<Duration>,
    ) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (path, system) = self.system(&info).await?;
        let current = power_state_of(&system);
        let reset_type = match (action, current) {
            (PowerAction::On, PowerState::On)
            | (PowerAction::Off | PowerAction::SoftOff, PowerState::Off) => None,
            (PowerAction::On, _) => Some("On"),
            (PowerAction::Off, _) => Some("ForceOff"),
            (PowerAction::SoftOff, _) => Some("GracefulShutdown"),
            // Rebooting a machine that is off powers it on, as Ironic does.
            (PowerAction::Reboot | PowerAction::SoftReboot, PowerState::Off) => Some("On"),
            (PowerAction::Reboot, _) => Some("ForceRestart"),
            (PowerAction::SoftReboot, _) => Some("GracefulRestart"),
        };
        if let Some(reset_type) = reset_type {
            self.reset(&info, &path, reset_type).await?;
        }
        let settings = self.clients().settings();
        let timeout = match timeout {
            Some(timeout) if action.is_soft() => timeout,
            _ => settings.power_state_change_timeout,
        };
        self.wait_for(&info, action.resulting_state(), timeout)
            .await
    }

    fn supported_power_actions(&self) -> &'static [PowerAction] {
        &PowerAction::ALL
    }

    fn bmc_address(&self, node: &Node) -> Option<String> {
        RedfishInfo::parse(node).ok().map(|info| info.address)
    }
}

#[async_trait]
impl ManagementInterface for Redfish {
    fn supported_boot_devices(&self, _node: &Node) -> Vec<BootDevice> {
        TARGETS.iter().map(|(device, _)| *device).collect()
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (_, system) = self.system(&info).await?;
        Ok(boot_device_of(&system))
    }

    async fn set_boot_device(
        &self,
        node: &mut Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let target = target_of(device)?;
        let (path, system) = self.system(&info).await?;
        check_target(node, &system, device, target)?;
        let enabled = if persistent { "Continuous" } else { "Once" };
        let mut boot = json!({
            "BootSourceOverrideTarget": target,
            "BootSourceOverrideEnabled": enabled,
        });
        let http_boot_uri = node
            .driver_internal_info
            .remove(HTTP_BOOT_URL_KEY)
            .and_then(|url| url.as_str().map(str::to_owned));
        if let Some(value) = http_boot_uri_of(node, &system, device, http_boot_uri)? {
            boot["HttpBootUri"] = value;
        }
        // Every boot Ferric arranges carries the node's boot mode, where the BMC has one.
        let mode = override_mode(node, &system)?;
        if let Some((_, name)) = mode {
            boot["BootSourceOverrideMode"] = name.into();
        }
        self.clients()
            .send(&info, Method::PATCH, &path, Some(&json!({ "Boot": boot })))
            .await?;
        if let Some((mode, _)) = mode {
            node.boot_mode = Some(mode.as_str().to_owned());
        }
        Ok(())
    }

    async fn check_boot(&self, node: &Node, device: BootDevice) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let target = target_of(device)?;
        let (_, system) = self.system(&info).await?;
        check_target(node, &system, device, target)?;
        override_mode(node, &system).map(drop)
    }

    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (_, system) = self.system(&info).await?;
        Ok(boot_mode_of(&system))
    }

    async fn set_boot_mode(&self, node: &mut Node, mode: BootMode) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let path = self.system_path(&info).await?;
        let name = match mode {
            BootMode::Uefi => "UEFI",
            BootMode::Bios => "Legacy",
        };
        self.clients()
            .send(
                &info,
                Method::PATCH,
                &path,
                Some(&json!({"Boot": {"BootSourceOverrideMode": name}})),
            )
            .await?;
        node.boot_mode = Some(mode.as_str().to_owned());
        Ok(())
    }

    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let path = self.system_path(&info).await?;
        self.reset(&info, &path, "Nmi").await
    }

    /// PATCHes `SecureBootEnable` on the system's `SecureBoot` resource (DSP2046); a system
    /// without one cannot do secure boot.
    async fn set_secure_boot(&self, node: &mut Node, enabled: bool) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (_, system) = self.system(&info).await?;
        let Some(path) = system
            .pointer("/SecureBoot/@odata.id")
            .and_then(Value::as_str)
        else {
            return Err(DriverError::invalid(
                "capabilities.secure_boot",
                format!(
                    "The Redfish system of node {} has no SecureBoot resource, so its secure boot \
                 cannot be changed through Redfish.",
                    node.uuid
                ),
            ));
        };
        self.clients()
            .send(
                &info,
                Method::PATCH,
                path,
                Some(&json!({"SecureBootEnable": enabled})),
            )
            .await?;
        node.secure_boot = Some(enabled);
        Ok(())
    }

    async fn indicators(&self, node: &Node) -> Result<Vec<Indicator>, DriverError> {
        self.indicator_list(node).await
    }

    async fn indicator_state(
        &self,
        node: &Node,
        component: &str,
        name: &str,
    ) -> Result<IndicatorState, DriverError> {
        self.indicator_get(node, component, name).await
    }

    async fn set_indicator_state(
        &self,
        node: &mut Node,
        component: &str,
        name: &str,
        state: IndicatorState,
    ) -> Result<(), DriverError> {
        self.indicator_set(node, component, name, state).await
    }

    async fn virtual_media(&self, node: &Node) -> Result<Vec<VmediaSlot>, DriverError> {
        self.media_slots(node).await
    }

    async fn attach_virtual_media(
        &self,
        node: &Node,
        device: VmediaDevice,
        url: &str,
    ) -> Result<(), DriverError> {
        self.insert_media(node, device, url).await
    }

    async fn detach_virtual_media(
        &self,
        node: &Node,
        devices: &[VmediaDevice],
    ) -> Result<(), DriverError> {
        self.eject_media(node, devices).await
    }
}

#[cfg(test)]
mod tests;

/// Reboots the machine so what the BMC holds pending (BIOS settings, a BIOS image) takes
/// effect, and leaves it in the power state it was in.
pub(crate) async fn reboot_keeping_power(
    power: &dyn PowerInterface,
    node: &mut Node,
) -> Result<(), DriverError> {
    let before = power.get_power_state(node).await?;
    power.set_power(node, PowerAction::Reboot, None).await?;
    if before == PowerState::Off {
        power.set_power(node, PowerAction::Off, None).await?;
    }
    node.power_state = Some(before);
    Ok(())
}
