//! The node record: every field of the Bare Metal API's node (`reference/ironic.md` §2.4) plus
//! the storage bookkeeping (`id`, `version`).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::JsonObject;
use super::interface::InterfaceKind;
use crate::ProvisionState;

/// A node's power state as the API shows it (`"power on"`, `"power off"`, `"error"`).
///
/// Transitional targets such as `rebooting` never get stored: the conductor records the state it
/// is driving towards (`power on` for a reboot), as the reference describes in §2.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum PowerState {
    On,
    Off,
    /// The BMC could not tell, or the last power action failed.
    Error,
}

impl PowerState {
    /// The wire name, as the API shows it and the database stores it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::On => "power on",
            Self::Off => "power off",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<PowerState> for &'static str {
    fn from(state: PowerState) -> Self {
        state.as_str()
    }
}

/// A string that names no power state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a power state (expected 'power on', 'power off' or 'error')")]
pub struct UnknownPowerState(pub String);

impl FromStr for PowerState {
    type Err = UnknownPowerState;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        [Self::On, Self::Off, Self::Error]
            .into_iter()
            .find(|state| state.as_str() == name)
            .ok_or_else(|| UnknownPowerState(name.to_owned()))
    }
}

impl TryFrom<String> for PowerState {
    type Error = UnknownPowerState;

    fn try_from(name: String) -> Result<Self, UnknownPowerState> {
        name.parse()
    }
}

/// A bare-metal machine Ferric manages.
///
/// `id` orders listings by enrollment (the default sort key) and `version` is the revision the
/// store bumps on every write: an update names the version it read, and loses if someone else
/// wrote in between. Both are assigned by the store; [`Node::new`] leaves them at zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub name: Option<String>,
    pub description: Option<String>,
    pub driver: String,
    pub driver_info: JsonObject,
    pub driver_internal_info: JsonObject,
    pub properties: JsonObject,
    pub instance_info: JsonObject,
    pub extra: JsonObject,
    pub instance_uuid: Option<Uuid>,
    pub instance_name: Option<String>,
    pub chassis_uuid: Option<Uuid>,
    pub parent_node: Option<Uuid>,
    pub allocation_uuid: Option<Uuid>,

    pub provision_state: ProvisionState,
    pub target_provision_state: Option<ProvisionState>,
    pub provision_updated_at: Option<DateTime<Utc>>,
    pub power_state: Option<PowerState>,
    pub target_power_state: Option<PowerState>,
    pub last_error: Option<String>,
    pub console_enabled: bool,
    pub fault: Option<String>,
    pub health: Option<String>,

    pub maintenance: bool,
    pub maintenance_reason: Option<String>,
    pub protected: bool,
    pub protected_reason: Option<String>,
    pub retired: bool,
    pub retired_reason: Option<String>,
    pub disable_power_off: bool,
    pub automated_clean: Option<bool>,

    pub inspection_started_at: Option<DateTime<Utc>>,
    pub inspection_finished_at: Option<DateTime<Utc>>,
    pub clean_step: JsonObject,
    pub deploy_step: JsonObject,
    pub service_step: JsonObject,
    pub raid_config: JsonObject,
    pub target_raid_config: JsonObject,
    pub network_data: JsonObject,
    pub boot_mode: Option<String>,
    pub secure_boot: Option<bool>,

    pub bios_interface: Option<String>,
    pub boot_interface: Option<String>,
    pub console_interface: Option<String>,
    pub deploy_interface: Option<String>,
    pub firmware_interface: Option<String>,
    pub inspect_interface: Option<String>,
    pub management_interface: Option<String>,
    pub network_interface: Option<String>,
    pub power_interface: Option<String>,
    pub raid_interface: Option<String>,
    pub rescue_interface: Option<String>,
    pub storage_interface: Option<String>,
    pub vendor_interface: Option<String>,

    pub resource_class: Option<String>,
    /// Lowercase; `""` is the default group.
    pub conductor_group: String,
    pub shard: Option<String>,
    pub owner: Option<String>,
    pub lessee: Option<String>,
    pub traits: Vec<String>,

    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Node {
    /// A node with nothing but its identity, driver and first state set; everything else is
    /// empty, false or unset, as a freshly enrolled node is. The store assigns `id`, `version`
    /// and `created_at` when it saves the node.
    pub fn new(uuid: Uuid, driver: impl Into<String>, provision_state: ProvisionState) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            name: None,
            description: None,
            driver: driver.into(),
            driver_info: JsonObject::new(),
            driver_internal_info: JsonObject::new(),
            properties: JsonObject::new(),
            instance_info: JsonObject::new(),
            extra: JsonObject::new(),
            instance_uuid: None,
            instance_name: None,
            chassis_uuid: None,
            parent_node: None,
            allocation_uuid: None,
            provision_state,
            target_provision_state: None,
            provision_updated_at: None,
            power_state: None,
            target_power_state: None,
            last_error: None,
            console_enabled: false,
            fault: None,
            health: None,
            maintenance: false,
            maintenance_reason: None,
            protected: false,
            protected_reason: None,
            retired: false,
            retired_reason: None,
            disable_power_off: false,
            automated_clean: None,
            inspection_started_at: None,
            inspection_finished_at: None,
            clean_step: JsonObject::new(),
            deploy_step: JsonObject::new(),
            service_step: JsonObject::new(),
            raid_config: JsonObject::new(),
            target_raid_config: JsonObject::new(),
            network_data: JsonObject::new(),
            boot_mode: None,
            secure_boot: None,
            bios_interface: None,
            boot_interface: None,
            console_interface: None,
            deploy_interface: None,
            firmware_interface: None,
            inspect_interface: None,
            management_interface: None,
            network_interface: None,
            power_interface: None,
            raid_interface: None,
            rescue_interface: None,
            storage_interface: None,
            vendor_interface: None,
            resource_class: None,
            conductor_group: String::new(),
            shard: None,
            owner: None,
            lessee: None,
            traits: Vec::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}

impl Node {
    /// The implementation this node uses for `kind`, if one is set.
    pub fn interface(&self, kind: InterfaceKind) -> Option<&str> {
        self.interface_field(kind).as_deref()
    }

    /// Sets (or clears) the implementation this node uses for `kind`.
    pub fn set_interface(&mut self, kind: InterfaceKind, name: Option<String>) {
        *self.interface_field_mut(kind) = name;
    }

    fn interface_field(&self, kind: InterfaceKind) -> &Option<String> {
        match kind {
            InterfaceKind::Bios => &self.bios_interface,
            InterfaceKind::Boot => &self.boot_interface,
            InterfaceKind::Console => &self.console_interface,
            InterfaceKind::Deploy => &self.deploy_interface,
            InterfaceKind::Firmware => &self.firmware_interface,
            InterfaceKind::Inspect => &self.inspect_interface,
            InterfaceKind::Management => &self.management_interface,
            InterfaceKind::Network => &self.network_interface,
            InterfaceKind::Power => &self.power_interface,
            InterfaceKind::Raid => &self.raid_interface,
            InterfaceKind::Rescue => &self.rescue_interface,
            InterfaceKind::Storage => &self.storage_interface,
            InterfaceKind::Vendor => &self.vendor_interface,
        }
    }

    fn interface_field_mut(&mut self, kind: InterfaceKind) -> &mut Option<String> {
        match kind {
            InterfaceKind::Bios => &mut self.bios_interface,
            InterfaceKind::Boot => &mut self.boot_interface,
            InterfaceKind::Console => &mut self.console_interface,
            InterfaceKind::Deploy => &mut self.deploy_interface,
            InterfaceKind::Firmware => &mut self.firmware_interface,
            InterfaceKind::Inspect => &mut self.inspect_interface,
            InterfaceKind::Management => &mut self.management_interface,
            InterfaceKind::Network => &mut self.network_interface,
            InterfaceKind::Power => &mut self.power_interface,
            InterfaceKind::Raid => &mut self.raid_interface,
            InterfaceKind::Rescue => &mut self.rescue_interface,
            InterfaceKind::Storage => &mut self.storage_interface,
            InterfaceKind::Vendor => &mut self.vendor_interface,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_states_round_trip_through_wire_names() {
        for state in [PowerState::On, PowerState::Off, PowerState::Error] {
            assert_eq!(state.as_str().parse::<PowerState>(), Ok(state));
        }
        assert!("rebooting".parse::<PowerState>().is_err());
        let json = serde_json::to_string(&PowerState::On).unwrap();
        assert_eq!(json, r#""power on""#);
    }

    #[test]
    fn a_new_node_is_empty_but_for_what_was_given() {
        let uuid = Uuid::new_v4();
        let node = Node::new(uuid, "fake-hardware", ProvisionState::Enroll);
        assert_eq!(node.uuid, uuid);
        assert_eq!(node.driver, "fake-hardware");
        assert_eq!(node.provision_state, ProvisionState::Enroll);
        assert!(!node.maintenance && node.extra.is_empty() && node.conductor_group.is_empty());
    }
}
