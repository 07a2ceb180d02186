//! The virtual BMC's BIOS and firmware: a `Bios` resource with a few settings described by an
//! attribute registry, pending settings (`Bios/Settings`) applied at the next power-on or
//! reset, `Bios.ResetBios`, and `UpdateService.SimpleUpdate` with a Task that completes after
//! a few reads and raises the version of what it flashed (`BiosVersion` of the system, the
//! Manager's `FirmwareVersion`).
//!
//! This state belongs to the BMC, not the machine: QEMU's firmware has no settings to change,
//! so nothing here reaches [`crate::machine::MachineControl`] and only the Redfish front-end
//! sees it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::error::RedfishError;

/// The registry's name, as the `Bios` resource's `AttributeRegistry` gives it.
pub const REGISTRY: &str = "FerricBiosAttributeRegistry.v1_0_0";

/// A setting: name, default, allowable values (empty: free text), read-only.
struct Attribute {
    name: &'static str,
    default: &'static str,
    allowed: &'static [&'static str],
    read_only: bool,
}

const ATTRIBUTES: [Attribute; 4] = [
    Attribute {
        name: "BootMode",
        default: "Uefi",
        allowed: &["Uefi", "Bios"],
        read_only: false,
    },
    Attribute {
        name: "ProcVirtualization",
        default: "Enabled",
        allowed: &["Enabled", "Disabled"],
        read_only: false,
    },
    Attribute {
        name: "ProcHyperThreading",
        default: "Enabled",
        allowed: &["Enabled", "Disabled"],
        read_only: false,
    },
    Attribute {
        name: "SystemSerialNumber",
        default: "",
        allowed: &[],
        read_only: true,
    },
];

/// How many reads of a running task it takes to complete.
const TASK_READS: u32 = 2;

/// What a SimpleUpdate flashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Bios,
    Bmc,
}

#[derive(Debug, Clone)]
struct Task {
    component: Component,
    image: String,
    reads_left: u32,
    state: &'static str,
    message: String,
}

/// The BIOS settings, versions and update tasks of one virtual BMC.
#[derive(Debug)]
pub struct FirmwareState {
    serial: String,
    current: BTreeMap<String, String>,
    pending: BTreeMap<String, String>,
    pub(crate) bios_version: String,
    pub(crate) bmc_version: String,
    tasks: BTreeMap<u64, Task>,
    next_task: u64,
    /// Tests keep tasks running to look at a node mid-update.
    hold_tasks: bool,
}

/// `1.2.3` → `1.3.0`; a version without a numeric minor gets `.1` appended.
pub fn next_version(version: &str) -> String {
    let mut parts: Vec<String> = version.split('.').map(str::to_owned).collect();
    let bumped = parts
        .get(1)
        .and_then(|minor| minor.parse::<u64>().ok())
        .map(|minor| minor + 1);
    match bumped {
        Some(minor) => {
            parts[1] = minor.to_string();
            for part in parts.iter_mut().skip(2) {
                *part = "0".to_owned();
            }
            parts.join(".")
        }
        None => format!("{version}.1"),
    }
}

impl FirmwareState {
    pub fn new(serial: &str) -> Self {
        let mut state = Self {
            serial: serial.to_owned(),
            current: BTreeMap::new(),
            pending: BTreeMap::new(),
            bios_version: "1.0.0".to_owned(),
            bmc_version: env!("CARGO_PKG_VERSION").to_owned(),
            tasks: BTreeMap::new(),
            next_task: 0,
            hold_tasks: false,
        };
        state.current = state.defaults();
        state
    }

    fn defaults(&self) -> BTreeMap<String, String> {
        ATTRIBUTES
            .iter()
            .map(|attribute| {
                let value = if attribute.name == "SystemSerialNumber" {
                    self.serial.clone()
                } else {
                    attribute.default.to_owned()
                };
                (attribute.name.to_owned(), value)
            })
            .collect()
    }

    pub fn attributes(&self) -> Value {
        json!(self.current)
    }

    pub fn pending(&self) -> Value {
        json!(self.pending)
    }

    /// Checks and records a PATCH of `Bios/Settings`; nothing changes until the next boot.
    pub fn set_pending(&mut self, body: &Map<String, Value>) -> Result<(), RedfishError> {
        let attributes = match body.get("Attributes") {
            Some(Value::Object(attributes)) => attributes,
            _ => {
                return Err(RedfishError::ParameterMissing {
                    parameter: "Attributes".to_owned(),
                });
            }
        };
        let mut accepted = BTreeMap::new();
        for (name, value) in attributes {
            let property = format!("Attributes/{name}");
            let attribute = ATTRIBUTES
                .iter()
                .find(|attribute| attribute.name == name)
                .ok_or_else(|| RedfishError::PropertyUnknown {
                    property: property.clone(),
                })?;
            if attribute.read_only {
                return Err(RedfishError::PropertyNotWritable { property });
            }
            let text = value
                .as_str()
                .filter(|text| attribute.allowed.is_empty() || attribute.allowed.contains(text));
            let Some(text) = text else {
                return Err(RedfishError::ValueNotInList {
                    property,
                    value: value.to_string(),
                });
            };
            accepted.insert(name.clone(), text.to_owned());
        }
        self.pending.extend(accepted);
        Ok(())
    }

    /// `Bios.ResetBios`: every setting back to its default at the next boot.
    pub fn reset_to_defaults(&mut self) {
        self.pending = self.defaults();
    }

    /// The machine booted: pending settings take effect.
    pub fn booted(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.current.extend(pending);
    }

    pub fn hold_tasks(&mut self, hold: bool) {
        self.hold_tasks = hold;
    }

    /// Starts an update; the task's id.
    pub fn start_update(&mut self, component: Component, image: &str) -> u64 {
        self.next_task += 1;
        let id = self.next_task;
        self.tasks.insert(
            id,
            Task {
                component,
                image: image.to_owned(),
                reads_left: TASK_READS,
                state: "Running",
                message: format!("Downloading and flashing {image}."),
            },
        );
        id
    }

    /// Reads task `id` (which moves it on, unless tasks are held); `None` when unknown.
    pub fn read_task(&mut self, id: u64) -> Option<Value> {
        let hold = self.hold_tasks;
        let mut task = self.tasks.get(&id)?.clone();
        if task.state == "Running" && !hold {
            task.reads_left = task.reads_left.saturating_sub(1);
            if task.reads_left == 0 {
                self.finish(&mut task);
            }
        }
        self.tasks.insert(id, task.clone());
        Some(task_body(id, &task))
    }

    /// Task `id` as it stands, without moving it on (the answer to SimpleUpdate).
    pub fn read_task_unchanged(&self, id: u64) -> Value {
        self.tasks
            .get(&id)
            .map_or(Value::Null, |task| task_body(id, task))
    }

    fn finish(&mut self, task: &mut Task) {
        // The virtual BMC fetches nothing, but an image it could not fetch fails as a real
        // one would.
        if !(task.image.starts_with("http://") || task.image.starts_with("https://")) {
            task.state = "Exception";
            task.message = format!(
                "Cannot download {}: only http and https image URIs are supported.",
                task.image
            );
            return;
        }
        let version = match task.component {
            Component::Bios => &mut self.bios_version,
            Component::Bmc => &mut self.bmc_version,
        };
        *version = next_version(version);
        task.state = "Completed";
        task.message = format!("Flashed {}; the version is now {version}.", task.image);
    }

    pub fn task_ids(&self) -> Vec<u64> {
        self.tasks.keys().copied().collect()
    }
}

fn task_body(id: u64, task: &Task) -> Value {
    let percent = if task.state == "Running" {
        100 * (TASK_READS - task.reads_left) / TASK_READS
    } else {
        100
    };
    let status = if task.state == "Exception" {
        "Critical"
    } else {
        "OK"
    };
    json!({
        "@odata.id": task_uri(id),
        "@odata.type": "#Task.v1_4_3.Task",
        "Id": id.to_string(),
        "Name": format!("Firmware update {id}"),
        "TaskState": task.state,
        "TaskStatus": status,
        "PercentComplete": percent,
        "TaskMonitor": task_uri(id),
        "Messages": [{"Message": task.message}],
    })
}

pub fn task_uri(id: u64) -> String {
    format!("/redfish/v1/TaskService/Tasks/{id}")
}

/// The attribute registry in DMTF's shape (`RegistryEntries.Attributes`).
pub fn registry() -> Value {
    let attributes: Vec<Value> = ATTRIBUTES
        .iter()
        .map(|attribute| {
            let mut entry = json!({
                "AttributeName": attribute.name,
                "DisplayName": attribute.name,
                "Type": if attribute.allowed.is_empty() { "String" } else { "Enumeration" },
                "ReadOnly": attribute.read_only,
                "ResetRequired": true,
            });
            if !attribute.allowed.is_empty() {
                entry["AllowableValues"] = attribute
                    .allowed
                    .iter()
                    .map(|value| json!({"ValueName": value, "ValueDisplayName": value}))
                    .collect();
            }
            if attribute.allowed.is_empty() {
                entry["MaxLength"] = json!(64);
            }
            entry
        })
        .collect();
    json!({
        "@odata.type": "#AttributeRegistry.v1_3_0.AttributeRegistry",
        "Id": REGISTRY,
        "Name": "Ferric lab BIOS attribute registry",
        "Language": "en",
        "OwningEntity": "Ferric",
        "RegistryVersion": "1.0.0",
        "RegistryEntries": {"Attributes": attributes},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_move_to_the_next_minor() {
        assert_eq!(next_version("1.0.0"), "1.1.0");
        assert_eq!(next_version("2.9.4"), "2.10.0");
        assert_eq!(next_version("7"), "7.1");
    }
}
