//! The `redfish` firmware interface: versions from the ComputerSystem (`BiosVersion`, the
//! `bios` component) and its Manager (`FirmwareVersion`, the `bmc` component); updates through
//! `UpdateService.SimpleUpdate` and the Task the BMC answers with.
//!
//! An update is a sequence of polls, so the conductor can save progress between them: the
//! step starts the first image's SimpleUpdate and records the task in `driver_internal_info`
//! (`redfish_firmware_update`: the index of the image and the task's URL), then each call
//! reads the task until it is `Completed` (a BIOS image is then applied by a reboot through
//! the node's power interface) or failed, and moves to the next image. An image given with a
//! checksum is downloaded and hashed here first: a mismatch fails the step before the BMC is
//! asked, so nothing is flashed.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ferric_model::resources::Node;
use reqwest::Method;
use serde_json::{Value, json};

use super::Redfish;
use super::info::RedfishInfo;
use crate::Component;
use crate::DriverError;
use crate::interfaces::{
    FirmwareInterface, FirmwareUpdate, ImageChecksum, Outcome, PowerInterface, Validate,
};

/// Where an update's progress lives between polls.
const PROGRESS_KEY: &str = "redfish_firmware_update";

/// How long one image's task may run before the step fails.
const TASK_TIMEOUT: Duration = Duration::from_secs(3600);

/// The `redfish` firmware interface, composed with the node's power interface for the reboot
/// a BIOS image needs.
#[derive(Clone)]
pub(crate) struct RedfishFirmware {
    pub(crate) redfish: Redfish,
    pub(crate) power: Arc<dyn PowerInterface>,
    /// Downloads images whose checksum is to be checked.
    pub(crate) http: reqwest::Client,
}

/// Downloads `url` and compares its digest with `expected`.
async fn verify_image(
    http: &reqwest::Client,
    url: &str,
    expected: &ImageChecksum,
) -> Result<(), DriverError> {
    use sha2::Digest;
    let failed = |why: String| {
        DriverError::failed(
            Component::Conductor,
            format!("Could not check the image {url} against its checksum: {why}"),
        )
    };
    let mut response = http
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|error| failed(error.to_string()))?;
    let mut sha1 = sha1::Sha1::new();
    let mut sha256 = sha2::Sha256::new();
    let mut sha512 = sha2::Sha512::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| failed(error.to_string()))?
    {
        match expected.algorithm {
            "sha1" => sha1.update(&chunk),
            "sha512" => sha512.update(&chunk),
            _ => sha256.update(&chunk),
        }
    }
    let digest: Vec<u8> = match expected.algorithm {
        "sha1" => sha1.finalize().to_vec(),
        "sha512" => sha512.finalize().to_vec(),
        _ => sha256.finalize().to_vec(),
    };
    let actual: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    if actual != expected.hex {
        return Err(DriverError::failed(
            Component::Conductor,
            format!(
                "The image {url} does not match its checksum: expected {expected}, got {}:{actual}; \
             nothing was flashed",
                expected.algorithm
            ),
        ));
    }
    Ok(())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// The progress record: which image, and the task watching it (none between images).
#[derive(Debug, Default)]
struct Progress {
    index: usize,
    task: Option<String>,
    started: u64,
    /// The images of the update this progress belongs to: a record left by an update that
    /// never finished (the conductor died) does not steer a new one.
    urls: Vec<String>,
}

impl Progress {
    fn read(node: &Node, updates: &[FirmwareUpdate]) -> Self {
        let urls: Vec<String> = updates.iter().map(|update| update.url.clone()).collect();
        let fresh = Self {
            urls: urls.clone(),
            ..Self::default()
        };
        let Some(stored) = node.driver_internal_info.get(PROGRESS_KEY) else {
            return fresh;
        };
        let stored_urls: Vec<&str> = stored
            .get("urls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if stored_urls != urls {
            return fresh;
        }
        Self {
            urls,
            index: stored
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|index| usize::try_from(index).ok())
                .unwrap_or(0),
            task: stored
                .get("task")
                .and_then(Value::as_str)
                .map(str::to_owned),
            started: stored.get("started").and_then(Value::as_u64).unwrap_or(0),
        }
    }

    fn write(&self, node: &mut Node) {
        node.driver_internal_info.insert(
            PROGRESS_KEY.to_owned(),
            json!({
                "index": self.index,
                "task": self.task,
                "started": self.started,
                "urls": self.urls,
            }),
        );
    }
}

impl RedfishFirmware {
    /// The path of the system's first Manager (its BMC).
    async fn manager(&self, info: &RedfishInfo, system: &Value) -> Option<(String, Value)> {
        let path = system
            .pointer("/Links/ManagedBy/0/@odata.id")
            .and_then(Value::as_str)?
            .to_owned();
        let body = self
            .redfish
            .clients()
            .send(info, Method::GET, &path, None)
            .await
            .ok()?
            .body;
        Some((path, body))
    }

    async fn simple_update_target(&self, info: &RedfishInfo) -> Result<String, DriverError> {
        let clients = self.redfish.clients();
        let root = clients
            .send(info, Method::GET, "/redfish/v1/", None)
            .await?
            .body;
        let service = root
            .pointer("/UpdateService/@odata.id")
            .and_then(Value::as_str)
            .unwrap_or("/redfish/v1/UpdateService")
            .to_owned();
        let body = clients.send(info, Method::GET, &service, None).await?.body;
        Ok(body
            .pointer("/Actions/#UpdateService.SimpleUpdate/target")
            .and_then(Value::as_str)
            .map_or_else(
                || {
                    format!(
                        "{}/Actions/UpdateService.SimpleUpdate",
                        service.trim_end_matches('/')
                    )
                },
                str::to_owned,
            ))
    }

    /// Starts flashing `update`; the URL of the task to watch.
    async fn start(&self, node: &Node, update: &FirmwareUpdate) -> Result<String, DriverError> {
        let info = RedfishInfo::parse(node)?;
        if let Some(checksum) = &update.checksum {
            verify_image(&self.http, &update.url, checksum).await?;
        }
        let (system_path, system) = self.redfish.system(&info).await?;
        let target = match update.component.as_str() {
            "bmc" => self
                .manager(&info, &system)
                .await
                .map(|(path, _)| path)
                .ok_or_else(|| {
                    DriverError::failed(
                        Component::Bmc,
                        format!(
                            "Redfish BMC {}: system {system_path} names no Manager to update",
                            info.address
                        ),
                    )
                })?,
            _ => system_path,
        };
        let action = self.simple_update_target(&info).await?;
        let answer = self
            .redfish
            .clients()
            .send(
                &info,
                Method::POST,
                &action,
                Some(&json!({"ImageURI": update.url, "Targets": [target]})),
            )
            .await?;
        answer
            .location
            .or_else(|| {
                answer
                    .body
                    .get("@odata.id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .map(|location| match location.find("/redfish/") {
                // An absolute URL: the path on this BMC.
                Some(start) if location.starts_with("http") => location[start..].to_owned(),
                _ => location,
            })
            .ok_or_else(|| {
                DriverError::failed(Component::Bmc, format!(
                    "Redfish BMC {}: SimpleUpdate of {} accepted the image but named no task to \
                     follow",
                    info.address, update.component
                ))
            })
    }

    /// Reads the task: `Ok(true)` once completed, `Ok(false)` while it runs.
    async fn task_done(
        &self,
        node: &Node,
        update: &FirmwareUpdate,
        task: &str,
    ) -> Result<bool, DriverError> {
        let info = RedfishInfo::parse(node)?;
        let body = self
            .redfish
            .clients()
            .send(&info, Method::GET, task, None)
            .await?
            .body;
        let state = body.get("TaskState").and_then(Value::as_str);
        match state {
            Some("Completed") => {
                let status = body.get("TaskStatus").and_then(Value::as_str);
                if status == Some("Critical") {
                    return Err(self.task_failed(&info, update, &body));
                }
                Ok(true)
            }
            Some("Exception" | "Killed" | "Cancelled" | "Interrupted") => {
                Err(self.task_failed(&info, update, &body))
            }
            // A task monitor answers 202 with no Task while the work runs.
            _ => Ok(false),
        }
    }

    fn task_failed(
        &self,
        info: &RedfishInfo,
        update: &FirmwareUpdate,
        task: &Value,
    ) -> DriverError {
        let messages: Vec<&str> = task
            .get("Messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|message| message.get("Message").and_then(Value::as_str))
            .collect();
        DriverError::failed(
            Component::Bmc,
            format!(
                "Redfish BMC {}: updating firmware component {} from {} failed (task state {}): {}",
                info.address,
                update.component,
                update.url,
                task.get("TaskState")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown"),
                if messages.is_empty() {
                    "the BMC gave no message".to_owned()
                } else {
                    messages.join("; ")
                }
            ),
        )
    }
}

#[async_trait]
impl Validate for RedfishFirmware {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        RedfishInfo::parse(node).map(|_| ())
    }
}

#[async_trait]
impl FirmwareInterface for RedfishFirmware {
    async fn cache_components(&self, node: &Node) -> Result<Vec<(String, String)>, DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (_, system) = self.redfish.system(&info).await?;
        let mut components = Vec::new();
        if let Some(version) = system.get("BiosVersion").and_then(Value::as_str) {
            components.push(("bios".to_owned(), version.to_owned()));
        }
        if let Some(version) = self
            .manager(&info, &system)
            .await
            .and_then(|(_, manager)| manager.get("FirmwareVersion").cloned())
            .and_then(|version| version.as_str().map(str::to_owned))
        {
            components.push(("bmc".to_owned(), version));
        }
        Ok(components)
    }

    async fn update(
        &self,
        node: &mut Node,
        updates: &[FirmwareUpdate],
    ) -> Result<Outcome, DriverError> {
        let interval = self.redfish.clients().settings().power_state_poll_interval;
        let mut progress = Progress::read(node, updates);
        let Some(update) = updates.get(progress.index) else {
            node.driver_internal_info.remove(PROGRESS_KEY);
            return Ok(Outcome::Done);
        };
        let result = match &progress.task {
            None => self
                .start(node, update)
                .await
                .map_err(|error| {
                    DriverError::failed(Component::Bmc, format!(
                        "Starting the update of firmware component {} from {} failed: {error}",
                        update.component, update.url
                    ))
                })
                .map(|task| {
                tracing::info!(node = %node.uuid, component = %update.component, %task, "firmware update started");
                progress.task = Some(task);
                progress.started = now_secs();
            }),
            Some(task) => match self.task_done(node, update, task).await {
                Ok(true) => {
                    if update.component == "bios" {
                        super::reboot_keeping_power(self.power.as_ref(), node).await
                    } else {
                        Ok(())
                    }
                    .map(|()| {
                        progress.index += 1;
                        progress.task = None;
                    })
                }
                Ok(false) if now_secs().saturating_sub(progress.started) > TASK_TIMEOUT.as_secs() => {
                    Err(DriverError::failed(Component::Bmc, format!(
                        "Firmware update of component {} from {} did not finish within {} s",
                        update.component,
                        update.url,
                        TASK_TIMEOUT.as_secs()
                    )))
                }
                Ok(false) => Ok(()),
                Err(error) => Err(error),
            },
        };
        if let Err(error) = result {
            node.driver_internal_info.remove(PROGRESS_KEY);
            return Err(error);
        }
        progress.write(node);
        Ok(Outcome::Poll(interval))
    }
}
