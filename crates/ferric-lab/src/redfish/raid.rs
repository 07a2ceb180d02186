//! The lab BMC's RAID controller: physical drives, the volumes built from them, and the
//! create/delete requests that wait for the next reset, as many servers' controllers apply
//! them (`@Redfish.OperationApplyTimeSupport` offers `OnReset` only).
//!
//! The drives are the controller's own: the guest never sees them. A request is a Task that
//! stays `Pending` until the machine is reset or powered on through the BMC; then the
//! controller applies every waiting request, the tasks complete, and the machine is given its
//! volumes ([`crate::machine::MachineControl::set_volumes`]): each volume is one SCSI disk of
//! the volume's size, with a serial and an NAA WWN derived from the machine's serial number, so
//! a root device hint can name it. This state is the BMC's; QEMU only sees the result.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::error::RedfishError;
use crate::machine::VolumeDisk;

/// The Storage resource's id (the controller's slot, as servers name it).
pub(crate) const STORAGE_ID: &str = "RAID.Integrated.1";
/// How many drives the controller has, and the size of each.
pub(crate) const DRIVES: usize = 4;
pub(crate) const DRIVE_BYTES: u64 = 2 << 30;

/// The RAID levels the controller builds: the Redfish `RAIDType`, the fewest drives, whether
/// the count must be even, and the usable capacity of `n` drives of `size` bytes.
struct Level {
    name: &'static str,
    /// The deprecated `VolumeType` older clients read.
    volume_type: &'static str,
    minimum: usize,
    maximum: usize,
    even: bool,
    capacity: fn(usize, u64) -> u64,
}

const LEVELS: [Level; 4] = [
    Level {
        name: "RAID0",
        volume_type: "NonRedundant",
        minimum: 1,
        maximum: DRIVES,
        even: false,
        capacity: |n, size| n as u64 * size,
    },
    Level {
        name: "RAID1",
        volume_type: "Mirrored",
        minimum: 2,
        maximum: 2,
        even: true,
        capacity: |_, size| size,
    },
    Level {
        name: "RAID5",
        volume_type: "StripedWithParity",
        minimum: 3,
        maximum: DRIVES,
        even: false,
        capacity: |n, size| (n as u64 - 1) * size,
    },
    Level {
        name: "RAID10",
        volume_type: "SpannedMirrors",
        minimum: 4,
        maximum: DRIVES,
        even: true,
        capacity: |n, size| n as u64 / 2 * size,
    },
];

#[derive(Debug, Clone)]
struct Volume {
    id: u32,
    name: String,
    raid_type: &'static str,
    volume_type: &'static str,
    bytes: u64,
    /// Indexes into the drives.
    drives: Vec<usize>,
}

#[derive(Debug, Clone)]
enum Request {
    Create(Volume),
    Delete(u32),
}

#[derive(Debug, Clone)]
struct Task {
    state: &'static str,
    message: String,
}

/// One controller's drives, volumes, waiting requests and their tasks.
#[derive(Debug)]
pub(crate) struct RaidState {
    /// Mixed into every WWN, so two machines' volumes never share one.
    wwn_base: u64,
    system: String,
    volumes: BTreeMap<u32, Volume>,
    waiting: Vec<(u64, Request)>,
    tasks: BTreeMap<u64, Task>,
    next_volume: u32,
    next_task: u64,
}

/// FNV-1a: a stable 32-bit number from the machine's serial.
fn fnv32(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

pub(crate) fn task_uri(id: u64) -> String {
    format!("/redfish/v1/TaskService/Tasks/raid-{id}")
}

impl RaidState {
    pub(crate) fn new(system: &str, serial: &str) -> Self {
        Self {
            // NAA 5 (IEEE registered), the serial's hash, then the volume's number.
            wwn_base: 0x5000_0000_0000_0000 | (u64::from(fnv32(serial)) << 20),
            system: system.to_owned(),
            volumes: BTreeMap::new(),
            waiting: Vec::new(),
            tasks: BTreeMap::new(),
            next_volume: 0,
            next_task: 0,
        }
    }

    pub(crate) fn storage_uri(&self) -> String {
        format!("/redfish/v1/Systems/{}/Storage/{STORAGE_ID}", self.system)
    }

    fn drive_uri(&self, index: usize) -> String {
        format!("{}/Drives/{}", self.storage_uri(), drive_id(index))
    }

    pub(crate) fn volumes_uri(&self) -> String {
        format!("{}/Volumes", self.storage_uri())
    }

    fn volume_uri(&self, id: u32) -> String {
        format!("{}/{id}", self.volumes_uri())
    }

    fn wwn(&self, volume: u32) -> u64 {
        self.wwn_base | u64::from(volume)
    }

    /// Drives a built or requested volume uses (a delete frees them only once applied).
    fn drive_in_use(&self, index: usize) -> bool {
        self.volumes
            .values()
            .chain(
                self.waiting
                    .iter()
                    .filter_map(|(_, request)| match request {
                        Request::Create(volume) => Some(volume),
                        Request::Delete(_) => None,
                    }),
            )
            .any(|volume| volume.drives.contains(&index))
    }

    fn new_task(&mut self, message: String) -> u64 {
        self.next_task += 1;
        self.tasks.insert(
            self.next_task,
            Task {
                state: "Pending",
                message,
            },
        );
        self.next_task
    }

    /// Checks a POST to the Volumes collection and queues it; the task's id.
    pub(crate) fn request_create(
        &mut self,
        body: &Map<String, Value>,
    ) -> Result<u64, RedfishError> {
        check_apply_time(body)?;
        let raid_type = body.get("RAIDType").ok_or(RedfishError::ParameterMissing {
            parameter: "RAIDType".to_owned(),
        })?;
        let level = LEVELS
            .iter()
            .find(|level| raid_type.as_str() == Some(level.name))
            .ok_or_else(|| RedfishError::ValueNotInList {
                property: "RAIDType".to_owned(),
                value: raid_type.to_string(),
            })?;
        let links = body
            .get("Links")
            .and_then(|links| links.get("Drives"))
            .and_then(Value::as_array)
            .ok_or(RedfishError::ParameterMissing {
                parameter: "Links/Drives".to_owned(),
            })?;
        let mut drives = Vec::new();
        for link in links {
            let uri = link.get("@odata.id").and_then(Value::as_str).unwrap_or("");
            let index = (0..DRIVES)
                .find(|index| self.drive_uri(*index) == uri.trim_end_matches('/'))
                .ok_or_else(|| RedfishError::PropertyValueError {
                    property: "Links/Drives".to_owned(),
                    detail: format!("{link} is not a drive of {}", self.storage_uri()),
                })?;
            if drives.contains(&index) || self.drive_in_use(index) {
                return Err(RedfishError::PropertyValueError {
                    property: "Links/Drives".to_owned(),
                    detail: format!("{uri} already belongs to a volume; delete that volume first"),
                });
            }
            drives.push(index);
        }
        let count = drives.len();
        if count < level.minimum || count > level.maximum || (level.even && count % 2 != 0) {
            return Err(RedfishError::PropertyValueError {
                property: "Links/Drives".to_owned(),
                detail: format!(
                    "{} takes {}{} drives, not {count}",
                    level.name,
                    if level.minimum == level.maximum {
                        level.minimum.to_string()
                    } else {
                        format!("{} to {}", level.minimum, level.maximum)
                    },
                    if level.even && level.minimum != level.maximum {
                        " (an even number of)"
                    } else {
                        ""
                    }
                ),
            });
        }
        let most = (level.capacity)(count, DRIVE_BYTES);
        let bytes = match body.get("CapacityBytes") {
            None | Some(Value::Null) => most,
            Some(value) => value
                .as_u64()
                .filter(|bytes| (1..=most).contains(bytes))
                .ok_or_else(|| RedfishError::PropertyValueError {
                    property: "CapacityBytes".to_owned(),
                    detail: format!(
                        "{value} does not fit: {} of these drives holds at most {most} bytes",
                        level.name
                    ),
                })?,
        };
        self.next_volume += 1;
        let id = self.next_volume;
        let name = body
            .get("Name")
            .and_then(Value::as_str)
            .map_or_else(|| format!("Virtual Disk {id}"), str::to_owned);
        let task = self.new_task(format!(
            "{} volume {name:?} of {bytes} bytes: created at the next reset of the system.",
            level.name
        ));
        self.waiting.push((
            task,
            Request::Create(Volume {
                id,
                name,
                raid_type: level.name,
                volume_type: level.volume_type,
                bytes,
                drives,
            }),
        ));
        Ok(task)
    }

    /// Checks a DELETE of volume `id` and queues it; the task's id.
    pub(crate) fn request_delete(&mut self, id: &str, body: &[u8]) -> Result<u64, RedfishError> {
        if !body.iter().all(u8::is_ascii_whitespace) {
            check_apply_time(&super::wire::parse_object(body)?)?;
        }
        let volume = id
            .parse::<u32>()
            .ok()
            .filter(|id| self.volumes.contains_key(id))
            .ok_or_else(|| RedfishError::NotFound {
                uri: format!("{}/{id}", self.volumes_uri()),
            })?;
        let task = self.new_task(format!(
            "Volume {volume}: deleted at the next reset of the system."
        ));
        self.waiting.push((task, Request::Delete(volume)));
        Ok(task)
    }

    /// The system is reset or powered on: every waiting request is applied. Whether the
    /// volumes changed.
    pub(crate) fn reset(&mut self) -> bool {
        let waiting = std::mem::take(&mut self.waiting);
        let changed = !waiting.is_empty();
        for (task, request) in waiting {
            let message = match request {
                Request::Create(volume) => {
                    let message = format!(
                        "Created {} volume {} ({:?}).",
                        volume.raid_type, volume.id, volume.name
                    );
                    self.volumes.insert(volume.id, volume);
                    message
                }
                Request::Delete(id) => {
                    self.volumes.remove(&id);
                    format!("Deleted volume {id}.")
                }
            };
            self.tasks.insert(
                task,
                Task {
                    state: "Completed",
                    message,
                },
            );
        }
        changed
    }

    /// The disks the machine gets for the volumes.
    pub(crate) fn disks(&self) -> Vec<VolumeDisk> {
        self.volumes
            .values()
            .map(|volume| VolumeDisk {
                id: volume.id,
                bytes: volume.bytes,
                serial: format!("ferric-volume{}", volume.id),
                wwn: self.wwn(volume.id),
            })
            .collect()
    }

    pub(crate) fn task_ids(&self) -> Vec<u64> {
        self.tasks.keys().copied().collect()
    }

    pub(crate) fn task(&self, id: u64) -> Option<Value> {
        let task = self.tasks.get(&id)?;
        Some(json!({
            "@odata.id": task_uri(id),
            "@odata.type": "#Task.v1_4_3.Task",
            "Id": format!("raid-{id}"),
            "Name": format!("RAID configuration {id}"),
            "TaskState": task.state,
            "TaskStatus": "OK",
            "PercentComplete": if task.state == "Completed" { 100 } else { 0 },
            "TaskMonitor": task_uri(id),
            "Messages": [{"Message": task.message}],
        }))
    }

    /// `Storage/{id}`: the controller, its drives and the volumes link.
    pub(crate) fn storage(&self) -> Value {
        let drives: Vec<Value> = (0..DRIVES)
            .map(|index| json!({"@odata.id": self.drive_uri(index)}))
            .collect();
        let uri = self.storage_uri();
        json!({
            "@odata.id": uri,
            "@odata.type": "#Storage.v1_7_1.Storage",
            "Id": STORAGE_ID,
            "Name": "RAID Controller",
            "Status": {"State": "Enabled", "Health": "OK"},
            "StorageControllers": [{
                "@odata.id": format!("{uri}#/StorageControllers/0"),
                "MemberId": "0",
                "Name": "Ferric lab RAID controller",
                "Manufacturer": "Ferric",
                "Model": "Lab RAID (virtio-scsi host interface)",
                "Status": {"State": "Enabled", "Health": "OK"},
                "SupportedControllerProtocols": ["PCIe"],
                "SupportedDeviceProtocols": ["SAS", "SATA"],
                "SupportedRAIDTypes": LEVELS.iter().map(|level| level.name).collect::<Vec<_>>(),
            }],
            "Drives@odata.count": DRIVES,
            "Drives": drives,
            "Volumes": {"@odata.id": self.volumes_uri()},
        })
    }

    /// `Drives/{id}`; `None` for a drive the controller does not have.
    pub(crate) fn drive(&self, id: &str) -> Option<Value> {
        let index = (0..DRIVES).find(|index| drive_id(*index) == id)?;
        let volumes: Vec<Value> = self
            .volumes
            .values()
            .filter(|volume| volume.drives.contains(&index))
            .map(|volume| json!({"@odata.id": self.volume_uri(volume.id)}))
            .collect();
        Some(json!({
            "@odata.id": self.drive_uri(index),
            "@odata.type": "#Drive.v1_9_0.Drive",
            "Id": id,
            "Name": format!("Physical Disk {index}"),
            "CapacityBytes": DRIVE_BYTES,
            "MediaType": "HDD",
            "Protocol": "SAS",
            "Manufacturer": "QEMU",
            "Model": "QEMU HARDDISK",
            "SerialNumber": format!("FERRIC-DRIVE-{:08X}-{index}", self.wwn_base >> 20 & 0xffff_ffff),
            "RotationSpeedRPM": 10000,
            "Status": {"State": "Enabled", "Health": "OK"},
            "Links": {"Volumes": volumes},
        }))
    }

    /// The Volumes collection, with the apply times it takes.
    pub(crate) fn volumes(&self) -> Value {
        let members: Vec<Value> = self
            .volumes
            .keys()
            .map(|id| json!({"@odata.id": self.volume_uri(*id)}))
            .collect();
        json!({
            "@odata.id": self.volumes_uri(),
            "@odata.type": "#VolumeCollection.VolumeCollection",
            "Name": "Volume Collection",
            "Members@odata.count": members.len(),
            "Members": members,
            "@Redfish.OperationApplyTimeSupport": {
                "@odata.type": "#Settings.v1_3_0.OperationApplyTimeSupport",
                "SupportedValues": ["OnReset"],
            },
        })
    }

    /// `Volumes/{id}`; `None` for a volume that does not exist (yet).
    pub(crate) fn volume(&self, id: &str) -> Option<Value> {
        let volume = self.volumes.get(&id.parse::<u32>().ok()?)?;
        let drives: Vec<Value> = volume
            .drives
            .iter()
            .map(|index| json!({"@odata.id": self.drive_uri(*index)}))
            .collect();
        Some(json!({
            "@odata.id": self.volume_uri(volume.id),
            "@odata.type": "#Volume.v1_6_2.Volume",
            "Id": volume.id.to_string(),
            "Name": volume.name,
            "RAIDType": volume.raid_type,
            "VolumeType": volume.volume_type,
            "CapacityBytes": volume.bytes,
            "Encrypted": false,
            "Identifiers": [{
                "DurableNameFormat": "NAA",
                "DurableName": format!("{:016X}", self.wwn(volume.id)),
            }],
            "Status": {"State": "Enabled", "Health": "OK"},
            "Links": {"Drives": drives},
        }))
    }
}

fn drive_id(index: usize) -> String {
    format!("Disk.Bay.{index}")
}

/// Requests may name `OnReset` (or nothing, which means the same here); `Immediate` and the
/// rest are refused with the values that work.
fn check_apply_time(body: &Map<String, Value>) -> Result<(), RedfishError> {
    match body.get("@Redfish.OperationApplyTime") {
        None => Ok(()),
        Some(value) if value.as_str() == Some("OnReset") => Ok(()),
        Some(value) => Err(RedfishError::ValueNotInList {
            property: "@Redfish.OperationApplyTime".to_owned(),
            value: format!("{value} (this controller applies changes OnReset only)"),
        }),
    }
}

#[cfg(test)]
#[path = "raid_tests.rs"]
mod tests;
