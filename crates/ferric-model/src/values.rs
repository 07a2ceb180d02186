//! The small value types the API parses from requests and the conductor acts on: power
//! actions, boot devices and modes, steps, virtual media devices, indicators. They live here, not in
//! ferric-drivers, so that the API and the hand-off between processes ([`crate::action`]) name
//! them without depending on any driver; ferric-drivers re-exports them.
//!
//! Each one travels on the wire as the same string (or object) the Bare Metal API uses, so a
//! serialized value reads the same to every release that knew it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::resources::{InterfaceKind, JsonObject, PowerState};

/// Serializes a closed set of names as their API string and refuses any other string with
/// the list of known ones.
macro_rules! named_values {
    ($type:ident, $what:literal) => {
        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $type {
            type Err = ();

            fn from_str(name: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|value| value.as_str() == name)
                    .ok_or(())
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = String::deserialize(deserializer)?;
                name.parse().map_err(|()| {
                    serde::de::Error::custom(format!(
                        "unknown {} {name:?}; known: {}",
                        $what,
                        Self::ALL.map(Self::as_str).join(", ")
                    ))
                })
            }
        }
    };
}

/// A power request (`PUT /v1/nodes/{node}/states/power` targets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerAction {
    On,
    Off,
    Reboot,
    SoftOff,
    SoftReboot,
}

impl PowerAction {
    pub const ALL: [PowerAction; 5] = [
        Self::On,
        Self::Off,
        Self::Reboot,
        Self::SoftOff,
        Self::SoftReboot,
    ];

    /// The API's `target` value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::On => "power on",
            Self::Off => "power off",
            Self::Reboot => "rebooting",
            Self::SoftOff => "soft power off",
            Self::SoftReboot => "soft rebooting",
        }
    }

    /// The power state the node is in once the action has worked; the conductor shows it as
    /// `target_power_state` meanwhile.
    pub const fn resulting_state(self) -> PowerState {
        match self {
            Self::On | Self::Reboot | Self::SoftReboot => PowerState::On,
            Self::Off | Self::SoftOff => PowerState::Off,
        }
    }

    /// Soft actions and timeouts arrived in API 1.27.
    pub const fn is_soft(self) -> bool {
        matches!(self, Self::SoftOff | Self::SoftReboot)
    }
}

named_values!(PowerAction, "power action");

/// A boot device (`PUT /v1/nodes/{node}/management/boot_device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BootDevice {
    Pxe,
    Disk,
    Cdrom,
    Bios,
    Safe,
    Wanboot,
    Iscsiboot,
    Floppy,
    Uefihttp,
}

impl BootDevice {
    pub const ALL: [BootDevice; 9] = [
        Self::Pxe,
        Self::Disk,
        Self::Cdrom,
        Self::Bios,
        Self::Safe,
        Self::Wanboot,
        Self::Iscsiboot,
        Self::Floppy,
        Self::Uefihttp,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pxe => "pxe",
            Self::Disk => "disk",
            Self::Cdrom => "cdrom",
            Self::Bios => "bios",
            Self::Safe => "safe",
            Self::Wanboot => "wanboot",
            Self::Iscsiboot => "iscsiboot",
            Self::Floppy => "floppy",
            Self::Uefihttp => "uefihttp",
        }
    }
}

named_values!(BootDevice, "boot device");

/// A node's firmware boot mode (`PUT /v1/nodes/{node}/states/boot_mode`, the node's
/// `boot_mode` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BootMode {
    Uefi,
    Bios,
}

impl BootMode {
    pub const ALL: [BootMode; 2] = [Self::Uefi, Self::Bios];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Uefi => "uefi",
            Self::Bios => "bios",
        }
    }
}

named_values!(BootMode, "boot mode");

/// The boot device a BMC reports; either part may be unknown. On the wire:
/// `{"device": "pxe" | null, "persistent": bool | null}`, as the API shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BootDeviceSetting {
    pub device: Option<BootDevice>,
    pub persistent: Option<bool>,
}

/// A kind of virtual media device (Ironic's `device_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VmediaDevice {
    Cdrom,
    Floppy,
    Disk,
}

impl VmediaDevice {
    pub const ALL: [VmediaDevice; 3] = [Self::Cdrom, Self::Floppy, Self::Disk];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cdrom => "cdrom",
            Self::Floppy => "floppy",
            Self::Disk => "disk",
        }
    }

    /// The Redfish `MediaTypes` values a VirtualMedia resource serving this kind lists.
    pub const fn redfish_media_types(self) -> &'static [&'static str] {
        match self {
            Self::Cdrom => &["CD", "DVD"],
            Self::Floppy => &["Floppy"],
            Self::Disk => &["USBStick"],
        }
    }
}

named_values!(VmediaDevice, "virtual media device");

/// The state of an indicator (an LED) of a hardware component (API 1.63), as the Bare Metal
/// API names it: `off`, `on`, `blinking`, `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndicatorState {
    Off,
    On,
    Blinking,
    Unknown,
}

impl IndicatorState {
    pub const ALL: [IndicatorState; 4] = [Self::Off, Self::On, Self::Blinking, Self::Unknown];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Blinking => "blinking",
            Self::Unknown => "unknown",
        }
    }
}

named_values!(IndicatorState, "indicator state");

/// One indicator of a node (`GET /v1/nodes/{node}/management/indicators`): the hardware
/// component it is on (`system`, `chassis`, `disk`, `power`, `nic`), its name there, whether
/// it can be set and the states it can show. The API names it `{name}@{component}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Indicator {
    pub component: String,
    pub name: String,
    pub readonly: bool,
    pub states: Vec<IndicatorState>,
}

/// One virtual media device of a machine as its BMC reports it. On the wire it is the object
/// `GET /v1/nodes/{node}/vmedia` lists ([`VmediaSlot::to_json`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmediaSlot {
    /// The kind it serves (the first one its media types name).
    pub device_type: VmediaDevice,
    /// Where the BMC keeps it (a Redfish VirtualMedia resource's path).
    pub location: String,
    /// The image it presents, if any.
    #[serde(rename = "image_url")]
    pub image: Option<String>,
    pub inserted: bool,
}

impl VmediaSlot {
    /// The slot as `GET /v1/nodes/{node}/vmedia` lists it.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "device_type": self.device_type.as_str(),
            "image_url": self.image,
            "inserted": self.inserted,
            "location": self.location,
        })
    }
}

/// One step to run, as the API receives it or the conductor schedules it. On the wire it is
/// the object Ironic stores in `clean_step` / `deploy_step` / `service_step`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCall {
    pub interface: InterfaceKind,
    pub step: String,
    pub args: JsonObject,
    pub priority: u32,
}

impl StepCall {
    /// The step as Ironic stores it in `clean_step` / `deploy_step` / `service_step`.
    pub fn to_json(&self) -> JsonObject {
        let mut object = JsonObject::new();
        object.insert("interface".into(), self.interface.as_str().into());
        object.insert("step".into(), self.step.clone().into());
        object.insert("args".into(), Value::Object(self.args.clone()));
        object.insert("priority".into(), self.priority.into());
        object
    }

    /// Reads back what [`StepCall::to_json`] wrote.
    pub fn from_json(object: &JsonObject) -> Option<Self> {
        Some(Self {
            interface: InterfaceKind::from_name(object.get("interface")?.as_str()?)?,
            step: object.get("step")?.as_str()?.to_owned(),
            args: object
                .get("args")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            priority: object
                .get("priority")
                .and_then(Value::as_u64)
                .and_then(|priority| u32::try_from(priority).ok())
                .unwrap_or(0),
        })
    }
}

impl Serialize for StepCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for StepCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let object = JsonObject::deserialize(deserializer)?;
        Self::from_json(&object).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "malformed step {}: it needs a known \"interface\" and a \"step\" name",
                Value::Object(object)
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_travel_as_the_api_strings() {
        for action in PowerAction::ALL {
            let text = serde_json::to_value(action).unwrap();
            assert_eq!(text, Value::from(action.as_str()));
            assert_eq!(serde_json::from_value::<PowerAction>(text).unwrap(), action);
        }
        for device in BootDevice::ALL {
            let text = serde_json::to_string(&device).unwrap();
            assert_eq!(serde_json::from_str::<BootDevice>(&text).unwrap(), device);
        }
        for device in VmediaDevice::ALL {
            let text = serde_json::to_string(&device).unwrap();
            assert_eq!(serde_json::from_str::<VmediaDevice>(&text).unwrap(), device);
        }
        assert_eq!(serde_json::to_value(BootMode::Uefi).unwrap(), "uefi");
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_known_ones() {
        let error = serde_json::from_str::<BootMode>("\"efi\"").unwrap_err();
        assert!(error.to_string().contains("known: uefi, bios"), "{error}");
    }

    #[test]
    fn a_step_travels_as_the_object_ironic_stores() {
        let step = StepCall {
            interface: InterfaceKind::Deploy,
            step: "erase_devices".to_owned(),
            args: JsonObject::new(),
            priority: 10,
        };
        let value = serde_json::to_value(&step).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"interface": "deploy", "step": "erase_devices", "args": {}, "priority": 10})
        );
        assert_eq!(serde_json::from_value::<StepCall>(value).unwrap(), step);
        assert!(serde_json::from_value::<StepCall>(serde_json::json!({"step": "x"})).is_err());
    }

    #[test]
    fn a_vmedia_slot_serializes_as_the_api_lists_it() {
        let slot = VmediaSlot {
            device_type: VmediaDevice::Cdrom,
            location: "/redfish/v1/Managers/1/VirtualMedia/CD".to_owned(),
            image: None,
            inserted: false,
        };
        assert_eq!(serde_json::to_value(&slot).unwrap(), slot.to_json());
    }
}
