//! The `redfish` RAID interface: hardware RAID built by the BMC's storage controller, out of
//! band. A logical disk becomes a `POST` to a Storage's `Volumes` collection (`RAIDType`,
//! `CapacityBytes` unless the size is `MAX`, `Links.Drives`, `Name`); deleting is a `DELETE`
//! of each volume.
//!
//! Theory of operation: a RAID step is a sequence of polls, its progress kept in
//! `driver_internal_info.redfish_raid` so the conductor saves it between them. The step sends
//! its requests (deletes first when `delete_existing`, then one POST per logical disk) in one
//! call; a BMC that answers 202 names a task monitor (`Location`), which later calls read
//! until the task ends. When the Volumes collection applies changes only at the next reset
//! (`@Redfish.OperationApplyTimeSupport` without `Immediate`), the request says `OnReset` and
//! the machine is rebooted (keeping its power state) before the tasks are followed. Once
//! every volume exists, each logical disk is matched with its Volume by the drives it spans,
//! `raid_config` records them, and the root volume's durable name (its NAA WWN) becomes the
//! node's root device hint, so the deploy that follows writes onto it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ferric_model::resources::{JsonObject, Node};
use reqwest::Method;
use serde_json::{Value, json};

use super::Redfish;
use super::info::RedfishInfo;
use crate::Component;
use crate::DriverError;
use crate::interfaces::{
    Outcome, PowerInterface, RaidInterface, StepCall, StepDef, StepKind, Validate,
};
use crate::raid::{check_target, flag, logical_disks, record_created, record_deleted, target_for};

/// Where a step's progress lives between polls.
const PROGRESS_KEY: &str = "redfish_raid";

/// How long the BMC's tasks may run before the step fails.
const TASK_TIMEOUT: Duration = Duration::from_secs(3600);

/// Ironic's RAID levels and their Redfish `RAIDType`s, with the fewest drives each needs.
const LEVELS: &[(&str, &str, usize)] = &[
    ("0", "RAID0", 1),
    ("1", "RAID1", 2),
    ("5", "RAID5", 3),
    ("6", "RAID6", 4),
    ("1+0", "RAID10", 4),
    ("5+0", "RAID50", 6),
    ("6+0", "RAID60", 8),
];

const GIB: u64 = 1 << 30;

/// The `redfish` RAID interface, with the node's power interface for the reboot a BMC that
/// applies volumes on reset needs.
#[derive(Clone)]
pub(crate) struct RedfishRaid {
    pub(crate) redfish: Redfish,
    pub(crate) power: Arc<dyn PowerInterface>,
}

impl std::fmt::Debug for RedfishRaid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedfishRaid").finish_non_exhaustive()
    }
}

/// One Storage resource of the system.
#[derive(Debug, Clone)]
struct Storage {
    path: String,
    id: String,
    /// Names its controllers go by (`StorageControllers[].Name`, `Id`, `MemberId`).
    controllers: Vec<String>,
    drives: Vec<String>,
    volumes: Option<String>,
}

impl Storage {
    fn answers_to(&self, controller: &str) -> bool {
        self.id == controller
            || self.path == controller
            || self.controllers.iter().any(|name| name == controller)
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

fn odata_id(value: &Value) -> Option<String> {
    value
        .get("@odata.id")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn members(collection: &Value) -> Vec<String> {
    collection
        .get("Members")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(odata_id)
        .collect()
}

/// A task monitor's path on the BMC (a `Location` may be an absolute URL).
fn bmc_path(location: &str) -> String {
    match location.find("/redfish/") {
        Some(start) if location.starts_with("http") => location[start..].to_owned(),
        _ => location.to_owned(),
    }
}

fn level_of(disk: &Value) -> Result<(&'static str, usize), DriverError> {
    let level = disk
        .get("raid_level")
        .and_then(Value::as_str)
        .unwrap_or_default();
    LEVELS
        .iter()
        .find(|(name, _, _)| *name == level)
        .map(|(_, raid_type, minimum)| (*raid_type, *minimum))
        .ok_or_else(|| {
            DriverError::invalid(
                "node.target_raid_config",
                format!(
                    "RAID config validation error: raid_interface redfish builds RAID levels {}, \
                 not {level:?}.",
                    LEVELS
                        .iter()
                        .map(|(name, _, _)| *name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
}

/// What a RAID step has done so far.
#[derive(Debug, Default)]
struct Progress {
    /// Volumes still to be created (`create` has not run yet).
    create_pending: bool,
    /// Task monitors to follow.
    tasks: Vec<String>,
    /// The BMC applies the requests at the next reset, which has not happened yet.
    reboot: bool,
    started: u64,
}

impl Progress {
    fn read(node: &Node) -> Option<Progress> {
        let stored = node.driver_internal_info.get(PROGRESS_KEY)?;
        Some(Progress {
            create_pending: stored
                .get("create_pending")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            tasks: stored
                .get("tasks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|task| task.as_str().map(str::to_owned))
                .collect(),
            reboot: stored
                .get("reboot")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            started: stored
                .get("started")
                .and_then(Value::as_u64)
                .unwrap_or_else(now_secs),
        })
    }

    fn write(&self, node: &mut Node) {
        node.driver_internal_info.insert(
            PROGRESS_KEY.into(),
            json!({
                "create_pending": self.create_pending,
                "tasks": self.tasks,
                "reboot": self.reboot,
                "started": self.started,
            }),
        );
    }
}

impl RedfishRaid {
    async fn get(&self, info: &RedfishInfo, path: &str) -> Result<Value, DriverError> {
        Ok(self
            .redfish
            .clients()
            .send(info, Method::GET, path, None)
            .await?
            .body)
    }

    /// The system's Storage resources.
    async fn storages(&self, info: &RedfishInfo) -> Result<Vec<Storage>, DriverError> {
        let (system_path, system) = self.redfish.system(info).await?;
        let collection = system.get("Storage").and_then(odata_id).ok_or_else(|| {
            DriverError::failed(
                Component::Bmc,
                format!(
                    "Redfish BMC {}: system {system_path} has no Storage, so its BMC cannot build \
                 RAID volumes; use raid_interface agent (software RAID) or no-raid.",
                    info.address
                ),
            )
        })?;
        let mut storages = Vec::new();
        for path in members(&self.get(info, &collection).await?) {
            let body = self.get(info, &path).await?;
            let controllers = body
                .get("StorageControllers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|controller| {
                    ["Name", "Id", "MemberId"]
                        .into_iter()
                        .filter_map(|key| controller.get(key).and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect();
            storages.push(Storage {
                id: body
                    .get("Id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                drives: body
                    .get("Drives")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(odata_id)
                    .collect(),
                volumes: body.get("Volumes").and_then(odata_id),
                controllers,
                path,
            });
        }
        Ok(storages)
    }

    /// Sends one change; the task to follow when the BMC answers with a monitor.
    async fn send(
        &self,
        info: &RedfishInfo,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Option<String>, DriverError> {
        let answer = self
            .redfish
            .clients()
            .send(info, method, path, body)
            .await?;
        // A created Volume's Location is the volume itself; a monitor's is a task.
        let is_task = answer.body.get("TaskState").is_some()
            || answer.location.as_deref().is_some_and(|location| {
                location.contains("/TaskService/") || location.contains("/TaskMonitors/")
            });
        Ok(answer
            .location
            .filter(|_| is_task)
            .map(|location| bmc_path(&location)))
    }

    /// The apply time to ask for: `Immediate` when the collection offers it, else
    /// `OnReset` (and the caller reboots) when it offers that, else none.
    async fn apply_time(
        &self,
        info: &RedfishInfo,
        volumes: &str,
    ) -> Result<Option<&'static str>, DriverError> {
        let collection = self.get(info, volumes).await?;
        let supported: Vec<&str> = collection
            .pointer("/@Redfish.OperationApplyTimeSupport/SupportedValues")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        Ok(if supported.contains(&"Immediate") {
            Some("Immediate")
        } else if supported.contains(&"OnReset") {
            Some("OnReset")
        } else {
            None
        })
    }

    /// Deletes every volume of every Storage.
    async fn delete_all(&self, node: &Node, progress: &mut Progress) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        for storage in self.storages(&info).await? {
            let Some(volumes) = &storage.volumes else {
                continue;
            };
            let apply = self.apply_time(&info, volumes).await?;
            let body = apply.map(|apply| json!({ "@Redfish.OperationApplyTime": apply }));
            for volume in members(&self.get(&info, volumes).await?) {
                let task = self
                    .send(&info, Method::DELETE, &volume, body.as_ref())
                    .await?;
                tracing::info!(node = %node.uuid, %volume, "RAID volume deleted");
                progress.tasks.extend(task);
                progress.reboot |= apply == Some("OnReset");
            }
        }
        Ok(())
    }

    /// Creates the volumes of `disks`.
    async fn create_all(
        &self,
        node: &Node,
        disks: &[Value],
        progress: &mut Progress,
    ) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let storages = self.storages(&info).await?;
        let mut used: BTreeSet<String> = BTreeSet::new();
        for (index, disk) in disks.iter().enumerate() {
            let (raid_type, minimum) = level_of(disk)?;
            let controller = disk.get("controller").and_then(Value::as_str);
            let wanted: Vec<&str> = disk
                .get("physical_disks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let count = disk
                .get("number_of_physical_disks")
                .and_then(Value::as_u64)
                .map_or(minimum, |count| {
                    usize::try_from(count).unwrap_or(usize::MAX)
                })
                .max(wanted.len());
            let chosen = storages
                .iter()
                .filter(|storage| storage.volumes.is_some())
                .find_map(|storage| {
                    if controller.is_some_and(|controller| !storage.answers_to(controller)) {
                        return None;
                    }
                    let drives: Vec<String> = if wanted.is_empty() {
                        storage
                            .drives
                            .iter()
                            .filter(|drive| !used.contains(*drive))
                            .take(count)
                            .cloned()
                            .collect()
                    } else {
                        storage
                            .drives
                            .iter()
                            .filter(|drive| {
                                wanted.iter().any(|name| {
                                    drive.as_str() == *name
                                        || drive.rsplit('/').next() == Some(*name)
                                })
                            })
                            .cloned()
                            .collect()
                    };
                    (drives.len() >= count && drives.len() >= wanted.len())
                        .then_some((storage, drives))
                });
            let Some((storage, drives)) = chosen else {
                return Err(DriverError::failed(
                    Component::Bmc,
                    format!(
                        "Redfish BMC {}: no storage controller{} has the {count} free drives{} that \
                     logical disk {index} (RAID {}) needs; check its controller and \
                     physical_disks against GET {}/Storage on the BMC.",
                        info.address,
                        controller
                            .map(|name| format!(" named {name:?}"))
                            .unwrap_or_default(),
                        if wanted.is_empty() {
                            String::new()
                        } else {
                            format!(" {wanted:?}")
                        },
                        disk["raid_level"].as_str().unwrap_or_default(),
                        info.system_id.as_deref().unwrap_or("the system"),
                    ),
                ));
            };
            used.extend(drives.iter().cloned());
            let volumes = storage.volumes.as_deref().unwrap_or_default();
            let mut body = json!({
                "RAIDType": raid_type,
                "Links": {"Drives": drives.iter().map(|drive| json!({"@odata.id": drive})).collect::<Vec<_>>()},
            });
            if let Some(size) = disk.get("size_gb").and_then(Value::as_u64) {
                body["CapacityBytes"] = (size * GIB).into();
            }
            if let Some(name) = disk.get("volume_name").and_then(Value::as_str) {
                body["Name"] = name.into();
            }
            let apply = self.apply_time(&info, volumes).await?;
            if let Some(apply) = apply {
                body["@Redfish.OperationApplyTime"] = apply.into();
            }
            let task = self.send(&info, Method::POST, volumes, Some(&body)).await?;
            tracing::info!(node = %node.uuid, storage = %storage.path, raid_type, drives = ?drives, "RAID volume requested");
            progress.tasks.extend(task);
            progress.reboot |= apply == Some("OnReset");
        }
        Ok(())
    }

    /// Whether every task has ended well; an error names the first that failed.
    async fn tasks_done(&self, node: &Node, tasks: &[String]) -> Result<bool, DriverError> {
        let info = RedfishInfo::parse(node)?;
        for task in tasks {
            let body = self.get(&info, task).await?;
            match body.get("TaskState").and_then(Value::as_str) {
                Some("Completed")
                    if body.get("TaskStatus").and_then(Value::as_str) != Some("Critical") => {}
                Some("Completed" | "Exception" | "Killed" | "Cancelled" | "Interrupted") => {
                    let messages: Vec<&str> = body
                        .get("Messages")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|message| message.get("Message").and_then(Value::as_str))
                        .collect();
                    return Err(DriverError::failed(
                        Component::Bmc,
                        format!(
                            "Redfish BMC {}: the RAID task {task} failed ({}): {}",
                            info.address,
                            body["TaskState"].as_str().unwrap_or_default(),
                            if messages.is_empty() {
                                "the BMC gave no message".to_owned()
                            } else {
                                messages.join("; ")
                            }
                        ),
                    ));
                }
                // A monitor that answers with the finished resource instead of a Task.
                None if odata_id(&body).is_some_and(|id| !id.contains("/TaskService/")) => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The logical disks as built: each matched with its Volume by the drives it spans, with
    /// the volume's NAA durable name as its root device hint.
    async fn built(&self, node: &Node, disks: &[Value]) -> Result<Vec<Value>, DriverError> {
        let info = RedfishInfo::parse(node)?;
        let mut volumes = Vec::new();
        for storage in self.storages(&info).await? {
            if let Some(collection) = &storage.volumes {
                for path in members(&self.get(&info, collection).await?) {
                    volumes.push((path.clone(), self.get(&info, &path).await?));
                }
            }
        }
        let drives_of = |volume: &Value| -> BTreeSet<String> {
            volume
                .pointer("/Links/Drives")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(odata_id)
                .collect()
        };
        let mut built = Vec::new();
        let mut taken = BTreeSet::new();
        for disk in disks {
            let mut disk = disk.clone();
            let wanted_name = disk.get("volume_name").and_then(Value::as_str);
            let found = volumes.iter().find(|(path, volume)| {
                !taken.contains(path)
                    && (wanted_name.is_none()
                        || volume.get("Name").and_then(Value::as_str) == wanted_name)
                    && !drives_of(volume).is_empty()
            });
            if let Some((path, volume)) = found {
                taken.insert(path.clone());
                let wwn = volume
                    .get("Identifiers")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|identifier| {
                        identifier.get("DurableNameFormat").and_then(Value::as_str) == Some("NAA")
                    })
                    .and_then(|identifier| identifier.get("DurableName").and_then(Value::as_str));
                if let Some(wwn) = wwn {
                    let wwn = wwn.trim_start_matches("0x").to_ascii_lowercase();
                    disk["root_device_hint"] = json!({ "wwn": format!("0x{wwn}") });
                }
                if let Some(bytes) = volume.get("CapacityBytes").and_then(Value::as_u64) {
                    disk["size_gb"] = (bytes / GIB).into();
                }
                disk["volume"] = path.as_str().into();
            }
            built.push(disk);
        }
        Ok(built)
    }

    async fn step(&self, node: &mut Node, step: &StepCall) -> Result<Outcome, DriverError> {
        let creates = matches!(
            step.step.as_str(),
            "create_configuration" | "apply_configuration"
        );
        if !creates && step.step != "delete_configuration" {
            return Err(crate::raid::unknown_step(step));
        }
        let interval = self.redfish.clients().settings().power_state_poll_interval;
        let mut progress = match Progress::read(node) {
            Some(progress) => progress,
            None => {
                // The first call: check the arguments, send the first requests.
                let mut progress = Progress {
                    create_pending: creates,
                    started: now_secs(),
                    ..Progress::default()
                };
                if creates {
                    target_for(node, step, check_redfish_target)?;
                    flag(&step.args, "create_root_volume")?;
                    flag(&step.args, "create_nonroot_volumes")?;
                }
                if !creates || flag(&step.args, "delete_existing")? {
                    self.delete_all(node, &mut progress).await?;
                }
                progress.write(node);
                return Ok(Outcome::Poll(interval));
            }
        };
        if progress.reboot {
            super::reboot_keeping_power(self.power.as_ref(), node).await?;
            progress.reboot = false;
            progress.write(node);
            return Ok(Outcome::Poll(interval));
        }
        if !self.tasks_done(node, &progress.tasks).await? {
            if now_secs().saturating_sub(progress.started) > TASK_TIMEOUT.as_secs() {
                return Err(DriverError::failed(
                    Component::Bmc,
                    format!(
                        "The BMC's RAID tasks for node {} did not finish within {} s: {:?}",
                        node.uuid,
                        TASK_TIMEOUT.as_secs(),
                        progress.tasks
                    ),
                ));
            }
            return Ok(Outcome::Poll(interval));
        }
        progress.tasks.clear();
        if progress.create_pending {
            progress.create_pending = false;
            let disks = self.selected(node, step)?;
            self.create_all(node, &disks, &mut progress).await?;
            progress.write(node);
            return Ok(Outcome::Poll(interval));
        }
        node.driver_internal_info.remove(PROGRESS_KEY);
        if creates {
            let disks = self.selected(node, step)?;
            let built = self.built(node, &disks).await?;
            record_created(node, built);
        } else {
            record_deleted(node);
        }
        Ok(Outcome::Done)
    }

    /// The target's logical disks the step's arguments select.
    fn selected(&self, node: &Node, step: &StepCall) -> Result<Vec<Value>, DriverError> {
        let create_root = flag(&step.args, "create_root_volume")?;
        let create_others = flag(&step.args, "create_nonroot_volumes")?;
        Ok(logical_disks(&node.target_raid_config)
            .iter()
            .filter(|disk| {
                if disk.get("is_root_volume").and_then(Value::as_bool) == Some(true) {
                    create_root
                } else {
                    create_others
                }
            })
            .cloned()
            .collect())
    }
}

/// Ironic's schema, and levels a Redfish storage controller builds.
pub(crate) fn check_redfish_target(target: &JsonObject) -> Result<(), DriverError> {
    check_target(target)?;
    for disk in logical_disks(target) {
        level_of(disk)?;
    }
    Ok(())
}

#[async_trait]
impl Validate for RedfishRaid {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        RedfishInfo::parse(node)?;
        check_redfish_target(&node.target_raid_config)
    }
}

#[async_trait]
impl RaidInterface for RedfishRaid {
    fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        crate::raid::raid_steps(kind)
    }

    fn validate_target(&self, _node: &Node, target: &JsonObject) -> Result<(), DriverError> {
        check_redfish_target(target)
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        _kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        let result = self.step(node, step).await;
        if result.is_err() {
            node.driver_internal_info.remove(PROGRESS_KEY);
        }
        result
    }
}

#[cfg(test)]
#[path = "raid_tests.rs"]
mod tests;
