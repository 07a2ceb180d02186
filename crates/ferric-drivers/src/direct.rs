//! The `direct` deploy interface (`reference/ironic.md` §4.5): the machine boots the agent
//! ramdisk from the network, the agent writes the image straight onto its disk, and the
//! machine is switched to boot from that disk. A partition image (`image_type=partition`,
//! [`crate::partition_image`]) gets its partitions from the agent, which then installs its
//! bootloader; the root partition's UUID is kept in `driver_internal_info.root_uuid_or_disk_id`.
//!
//! Deploy steps, highest priority first:
//!
//! | step | priority | what |
//! |---|---|---|
//! | `deploy.deploy` | 100 | network boot of the agent: `wait call-back` until it heartbeats |
//! | `deploy.write_image` | 80 | the agent streams the image onto the root disk, plus the config drive |
//! | `deploy.prepare_instance_boot` | 60 | partition images: the agent's `image.install_bootloader`; boot device disk, persistently; the iPXE script goes |
//! | `deploy.tear_down_agent` | 40 | flush the disks, power off |
//! | `deploy.boot_instance` | 20 | power on into the deployed image → `active` |
//!
//! Cleaning runs the agent's `erase_devices_metadata` (and `erase_devices` when given a
//! priority) after [`DeployInterface::prepare`] has booted the agent; the node is powered off
//! and its network boot removed afterwards. A step that runs on the agent is started once and
//! then followed ([`Outcome::Poll`]); its command id is kept in
//! `driver_internal_info.agent_command`, and the bytes written so far in
//! `driver_internal_info.deploy_progress` for everyone to watch.

use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::{InterfaceKind, JsonObject, Node, Port, PowerState};
use ferric_model::secrets::mask_secrets;
use serde_json::{Value, json};

use crate::Component;
use crate::DriverError;
use crate::agent_client::{AgentClient, CommandStatus, Reply, forget_agent};
use crate::fast_track::{self, FastTrackSettings};
use crate::images::ImageSources;
use crate::interfaces::{
    BootDevice, BootInterface, DeployInterface, ManagementInterface, Outcome, PowerAction,
    PowerInterface, StepCall, StepDef, StepKind, Validate,
};
use crate::settings::{DeploySettings, LogsCollect, boot_file_url};

const NO_ARGS: &[(&str, &str)] = &[];
const WRITE_IMAGE_ARGS: &[(&str, &str)] = &[
    (
        "image_info",
        "Filled by Ferric from instance_info (image_source, checksum, disk format).",
    ),
    (
        "configdrive",
        "Filled by Ferric from the provision request or instance_info.",
    ),
];

/// Where a step that runs on the agent got to.
pub(crate) enum AgentStep {
    /// Still running (or the agent was busy): call again after the poll interval.
    Running(Outcome),
    /// Finished; the command's result (`{"<kind>_result": …, "<kind>_step": …}`).
    Finished(Value),
}

/// Where a running agent command is remembered.
const COMMAND_KEY: &str = "agent_command";
/// Where the progress of a running agent step is shown.
const PROGRESS_KEY: &str = "deploy_progress";

/// The `direct` deploy interface of one node, composed with that node's power, management
/// and boot interfaces.
pub struct DirectDeploy {
    pub(crate) power: Arc<dyn PowerInterface>,
    pub(crate) management: Arc<dyn ManagementInterface>,
    pub(crate) boot: Arc<dyn BootInterface>,
    pub(crate) agent: AgentClient,
    pub(crate) settings: DeploySettings,
    pub(crate) fast_track: FastTrackSettings,
    /// The boot file server's URL, for `image_source` given as a file name.
    pub(crate) http_url: Option<String>,
    pub(crate) ports: Vec<Port>,
    /// Glance and the conductor's image cache.
    pub(crate) images: Arc<ImageSources>,
}

impl std::fmt::Debug for DirectDeploy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectDeploy").finish_non_exhaustive()
    }
}

fn info_str<'a>(object: &'a JsonObject, key: &str) -> Option<&'a str> {
    object
        .get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

impl DirectDeploy {
    fn step_def(
        step: &'static str,
        priority: u32,
        args: &'static [(&'static str, &'static str)],
    ) -> StepDef {
        StepDef {
            interface: InterfaceKind::Deploy,
            step,
            priority,
            abortable: true,
            argsinfo: args,
        }
    }

    /// The image as the agent's `image_info` (§4.5).
    fn image_info(&self, node: &Node) -> Result<JsonObject, DriverError> {
        let info = &node.instance_info;
        let source = info_str(info, "image_source").ok_or_else(|| {
            DriverError::missing(
                "instance_info.image_source",
                format!(
                    "Node {} has no instance_info image_source: set it to the image's http(s) URL \
                 or to a file name under the boot file server's images/ directory.",
                    node.uuid
                ),
            )
        })?;
        let url =
            if source.starts_with("http://") || source.starts_with("https://") {
                source.to_owned()
            } else {
                let http_url = self.http_url.as_deref().ok_or_else(|| {
                DriverError::missing("settings.boot_http_url", format!(
                    "instance_info image_source \"{source}\" names a local file, but no boot \
                     file server is configured (boot_http_url); give an http(s) URL instead."
                ))
            })?;
                boot_file_url(
                    http_url,
                    &format!("images/{}", source.trim_start_matches('/')),
                )?
            };
        let checksum = info_str(info, "image_checksum");
        let algo = info_str(info, "image_os_hash_algo");
        let hash = info_str(info, "image_os_hash_value");
        if checksum.is_none() && (algo.is_none() || hash.is_none()) {
            return Err(DriverError::missing(
                "instance_info.image_checksum",
                format!(
                    "Node {} needs instance_info image_checksum, or image_os_hash_algo and \
                 image_os_hash_value, so the written image can be verified.",
                    node.uuid
                ),
            ));
        }
        if let Some(algo) = algo
            && !["sha256", "sha512", "md5"].contains(&algo)
        {
            return Err(DriverError::invalid(
                "instance_info.image_os_hash_algo",
                format!(
                    "instance_info image_os_hash_algo \"{algo}\" is not supported; use sha256 or \
                 sha512."
                ),
            ));
        }
        let disk_format = info_str(info, "image_disk_format").unwrap_or("raw");
        if !["raw", "qcow2"].contains(&disk_format) {
            return Err(DriverError::invalid(
                "instance_info.image_disk_format",
                format!(
                    "instance_info image_disk_format \"{disk_format}\" is not supported; use raw \
                 or qcow2."
                ),
            ));
        }
        let mut image = JsonObject::new();
        image.insert(
            "id".into(),
            source.rsplit('/').next().unwrap_or(source).into(),
        );
        image.insert("urls".into(), json!([url]));
        image.insert("disk_format".into(), disk_format.into());
        image.insert("container_format".into(), "bare".into());
        image.insert("stream_raw_images".into(), true.into());
        image.insert("node_uuid".into(), node.uuid.to_string().into());
        if let Some(checksum) = checksum {
            image.insert("checksum".into(), checksum.into());
        }
        if let (Some(algo), Some(hash)) = (algo, hash) {
            image.insert("os_hash_algo".into(), algo.into());
            image.insert("os_hash_value".into(), hash.into());
        }
        if crate::partition_image::is_partition(node)? {
            image.extend(crate::partition_image::image_info_fields(node)?);
        }
        Ok(image)
    }

    /// The image as the agent's `image_info`, its Glance sources resolved: a Glance image's
    /// metadata (format, size, hashes) from Glance, checked; with `fetch`, the image (and a
    /// partition image's kernel and ramdisk given as Glance IDs) put into the conductor's
    /// cache and the agent given the cache's URLs. Without `fetch` (validation) nothing is
    /// downloaded. An http(s) image goes through the cache too with
    /// `image_download_source = local`.
    pub(crate) async fn resolved_image_info(
        &self,
        node: &Node,
        fetch: bool,
    ) -> Result<JsonObject, DriverError> {
        const FIELD: &str = "instance_info.image_source";
        let source = info_str(&node.instance_info, "image_source");
        let glance_id = source.and_then(crate::glance::image_id);
        let oci = source.filter(|source| crate::oci::is_oci(source));
        let mut image = match (oci, glance_id) {
            (Some(source), _) => self.oci_image_info(node, source, fetch).await?,
            (None, Some(id)) => {
                let glance = self.images.glance_image(FIELD, id).await?;
                // Glance's metadata describes the image; what instance_info says of it is not
                // asked (Nova sets these from the same metadata).
                let mut patched = node.clone();
                let info = &mut patched.instance_info;
                let url = if fetch {
                    self.images
                        .cached_glance(
                            &node.uuid.to_string(),
                            FIELD,
                            &glance,
                            self.http_url.as_deref(),
                        )
                        .await?
                } else {
                    format!("http://glance.invalid/v2/images/{id}/file")
                };
                info.insert("image_source".into(), url.into());
                for (key, value) in [
                    ("image_checksum", &glance.checksum),
                    ("image_os_hash_algo", &glance.os_hash_algo),
                    ("image_os_hash_value", &glance.os_hash_value),
                    ("image_disk_format", &glance.disk_format),
                ] {
                    match value {
                        Some(value) => info.insert(key.into(), value.clone().into()),
                        None => info.remove(key),
                    };
                }
                let mut image = self.image_info(&patched)?;
                image.insert("id".into(), id.into());
                image.insert(
                    "container_format".into(),
                    glance
                        .container_format
                        .unwrap_or_else(|| "bare".to_owned())
                        .into(),
                );
                if let Some(size) = glance.size {
                    image.insert("image_size".into(), size.into());
                }
                image
            }
            (None, None) => {
                let mut image = self.image_info(node)?;
                let url = image["urls"][0].as_str().unwrap_or_default().to_owned();
                let from_origin = source.is_some_and(|source| source.contains("://"));
                if fetch && from_origin && self.images.caches_urls() {
                    let info = &node.instance_info;
                    let expected = crate::images::expected_hash(
                        info_str(info, "image_checksum"),
                        info_str(info, "image_os_hash_algo"),
                        info_str(info, "image_os_hash_value"),
                    )
                    .ok_or_else(|| {
                        DriverError::invalid(
                            "instance_info.image_checksum",
                            format!(
                                "Node {}: the image cache verifies {url} with a checksum: give                                  image_checksum as md5, sha256 or sha512 hex, or                                  image_os_hash_algo and image_os_hash_value.",
                                node.uuid
                            ),
                        )
                    })?;
                    let cached = self
                        .images
                        .cached_url(
                            &node.uuid.to_string(),
                            FIELD,
                            &url,
                            &expected,
                            self.http_url.as_deref(),
                        )
                        .await?;
                    image.insert("urls".into(), json!([cached]));
                }
                image
            }
        };
        // Peer-assisted delivery (crate::peers): its flag checked at validate too.
        if crate::peers::wanted(node, self.images.peer_delivery)? && fetch {
            let (agent_url, _) = Self::agent_of(node)?;
            let tracker = self.http_url.as_deref();
            let joined = self
                .images
                .join_swarm(node, &self.ports, &image, tracker, &agent_url);
            if let Some(peers) = joined.await? {
                image.insert("ferric_peers".into(), peers);
            }
        }
        // A partition image's kernel and ramdisk may be Glance images too.
        for key in ["kernel", "ramdisk"] {
            let field = format!("instance_info.{key}");
            let Some(id) = info_str(&node.instance_info, key).and_then(crate::glance::image_id)
            else {
                continue;
            };
            let glance = self.images.glance_boot_file(&field, id).await?;
            if fetch {
                let url = self
                    .images
                    .cached_glance(
                        &node.uuid.to_string(),
                        &field,
                        &glance,
                        self.http_url.as_deref(),
                    )
                    .await?;
                image.insert(key.into(), url.into());
            }
        }
        Ok(image)
    }

    /// An `oci://` image as the agent's `image_info`: resolved by the conductor (validation
    /// resolves too, so refusals come at validate), then with `fetch` put into the image cache
    /// and served by the boot file server, or (`oci_image_download_source = http`) pulled by the
    /// agent from the registry with that registry's `Authorization` header, base64 in
    /// `image_request_authorization` as Ironic sends it. The checksum is the layer's digest.
    async fn oci_image_info(
        &self,
        node: &Node,
        source: &str,
        fetch: bool,
    ) -> Result<JsonObject, DriverError> {
        const FIELD: &str = "instance_info.image_source";
        let oci = self.images.oci_image(FIELD, source, node).await?;
        let resolved = &oci.resolved;
        let direct = self.images.oci_direct();
        let url = if fetch && !direct {
            self.images
                .cached_oci(
                    &node.uuid.to_string(),
                    FIELD,
                    &oci,
                    self.http_url.as_deref(),
                )
                .await?
        } else {
            resolved.blob_url.clone()
        };
        let mut patched = node.clone();
        let info = &mut patched.instance_info;
        info.insert("image_source".into(), url.into());
        info.remove("image_checksum");
        info.insert("image_os_hash_algo".into(), resolved.algo.clone().into());
        info.insert("image_os_hash_value".into(), resolved.hex.clone().into());
        let format = resolved.disk_format.unwrap_or("raw");
        info.insert("image_disk_format".into(), format.into());
        let mut image = self.image_info(&patched)?;
        image.insert("id".into(), source.into());
        if resolved.disk_format.is_none() {
            // Not said by the registry: the agent detects raw or qcow2 (Ironic's `unknown`).
            image.remove("disk_format");
        }
        if let Some(size) = resolved.size {
            image.insert("image_size".into(), size.into());
        }
        if direct && let Some(authorization) = &resolved.authorization {
            use base64::Engine;
            let encoded = base64::engine::general_purpose::STANDARD.encode(authorization);
            image.insert("image_request_authorization".into(), encoded.into());
        }
        Ok(image)
    }

    /// After a partition image is written: the root partition's UUID recorded as Ironic does,
    /// then the agent's `image.install_bootloader` (an ESP and NVRAM entry for UEFI, grub for
    /// BIOS).
    async fn install_bootloader(&self, node: &mut Node) -> Result<(), DriverError> {
        let uuids = self
            .sync_command(node, "standby.get_partition_uuids", JsonObject::new())
            .await?;
        let root = uuids
            .get("root uuid")
            .and_then(Value::as_str)
            .filter(|uuid| !uuid.is_empty())
            .ok_or_else(|| {
                DriverError::failed(Component::Agent, format!(
                    "The agent reported no root partition UUID after writing node {}'s                      partition image ({uuids}); its bootloader cannot be installed.",
                    node.uuid
                ))
            })?
            .to_owned();
        node.driver_internal_info
            .insert("root_uuid_or_disk_id".into(), root.clone().into());
        let (mode, _) = crate::boot_mode::boot_mode(node)?;
        let mut params = JsonObject::new();
        params.insert("root_uuid".into(), root.into());
        if mode == crate::interfaces::BootMode::Uefi {
            params.insert(
                "efi_system_part_uuid".into(),
                uuids
                    .get("efi system partition uuid")
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        }
        params.insert("target_boot_mode".into(), mode.as_str().into());
        let reply = self
            .sync_command(node, "image.install_bootloader", params)
            .await?;
        let said = reply.get("result").and_then(Value::as_str).unwrap_or("");
        tracing::info!(node = %node.uuid, mode = mode.as_str(), result = said, "the agent installed the partition image's bootloader");
        Ok(())
    }

    /// The config drive as the agent takes it: a URL or base64 gzipped ISO; the JSON form is
    /// rendered into an ISO here.
    async fn configdrive(&self, node: &Node) -> Result<Value, DriverError> {
        match node.instance_info.get("configdrive") {
            None | Some(Value::Null) => Ok(Value::Null),
            Some(Value::String(text)) if text.is_empty() => Ok(Value::Null),
            Some(Value::String(text)) => Ok(Value::String(text.clone())),
            Some(Value::Object(object)) => {
                let iso = crate::configdrive::render(object, &self.settings.iso_tool).await?;
                Ok(Value::String(iso))
            }
            Some(other) => Err(DriverError::invalid(
                "instance_info.configdrive",
                format!(
                    "The config drive must be a URL, base64 text or a JSON object, not {other}."
                ),
            )),
        }
    }

    /// The node as the agent sees it in every command (clean, deploy, service, rescue steps):
    /// no token, no config drive blob, every secret-named key masked (issue 41, item 4: an
    /// image server's password in `instance_info` reached the agent during cleaning). What a
    /// step needs of a secret travels in that step's own arguments (`write_image`'s
    /// `image_info`).
    fn node_for_agent(node: &Node) -> Value {
        let mut internal = node.driver_internal_info.clone();
        internal.remove("agent_secret_token");
        let mut instance = node.instance_info.clone();
        instance.remove("configdrive");
        json!({
            "uuid": node.uuid,
            "name": node.name,
            "properties": mask_secrets(&node.properties),
            "instance_info": mask_secrets(&instance),
            "driver_internal_info": mask_secrets(&internal),
            "target_raid_config": node.target_raid_config,
            "raid_config": node.raid_config,
        })
    }

    fn ports_for_agent(&self) -> Value {
        Value::Array(
            self.ports
                .iter()
                .map(|port| {
                    json!({
                        "uuid": port.uuid,
                        "address": port.address,
                        "pxe_enabled": port.pxe_enabled,
                        "local_link_connection": port.local_link_connection,
                        "physical_network": port.physical_network,
                    })
                })
                .collect(),
        )
    }

    fn agent_of(node: &Node) -> Result<(String, String), DriverError> {
        let url = info_str(&node.driver_internal_info, "agent_url");
        let token = info_str(&node.driver_internal_info, "agent_secret_token");
        match (url, token) {
            (Some(url), Some(token)) => Ok((url.to_owned(), token.to_owned())),
            _ => Err(DriverError::failed(
                Component::Agent,
                format!(
                    "Node {}'s agent has not called back yet (no agent URL or token); it must boot \
                 the ramdisk and heartbeat first.",
                    node.uuid
                ),
            )),
        }
    }

    /// Runs `step` on the agent, or follows the run already started.
    async fn run_on_agent(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        Ok(match self.run_agent_step(node, kind, step).await? {
            AgentStep::Running(outcome) => outcome,
            AgentStep::Finished(_) if reboot_requested(node, kind, step) => {
                self.reboot_after_step(node, step).await?
            }
            AgentStep::Finished(_) => Outcome::Done,
        })
    }

    /// The agent's step said `reboot_requested`: as Ironic's `_post_step_reboot`, boot the
    /// ramdisk again and wait; the new agent's heartbeat moves the flow on to the next step.
    /// The new agent looks the node up for a new token and brings a new certificate; the steps
    /// read from the old one stay.
    async fn reboot_after_step(
        &self,
        node: &mut Node,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        tracing::info!(node = %node.uuid, step = %step.step, "the agent asked for a reboot after its step; rebooting into the ramdisk");
        for key in crate::agent_client::AGENT_KEYS {
            node.driver_internal_info.remove(key);
        }
        node.driver_internal_info.remove(PROGRESS_KEY);
        self.boot.prepare_ramdisk(node).await?;
        let device = self.boot.network_boot_device();
        self.management.set_boot_device(node, device, false).await?;
        self.power
            .set_power(node, PowerAction::Reboot, None)
            .await?;
        node.power_state = Some(PowerState::On);
        Ok(Outcome::Wait)
    }

    /// Runs `step` on the agent, or follows the run already started, and hands back the
    /// agent's result when it has finished (the RAID steps read the volumes built from it).
    pub(crate) async fn run_agent_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<AgentStep, DriverError> {
        let (url, token) = Self::agent_of(node)?;
        let agent = self.agent.for_node(node)?;
        let poll = AgentStep::Running(Outcome::Poll(self.settings.command_poll_interval));
        let started = node
            .driver_internal_info
            .get(COMMAND_KEY)
            .and_then(Value::as_object)
            .filter(|command| command.get("step").and_then(Value::as_str) == Some(&step.step))
            .and_then(|command| command.get("id").and_then(Value::as_str))
            .map(str::to_owned);
        let reply = match started {
            Some(id) => agent.command(&url, &token, &id).await?,
            None => {
                let mut call = step.clone();
                if kind == StepKind::Deploy && step.step == "write_image" {
                    call.args.insert(
                        "image_info".into(),
                        Value::Object(self.resolved_image_info(node, true).await?),
                    );
                    call.args
                        .insert("configdrive".into(), self.configdrive(node).await?);
                }
                let mut params = JsonObject::new();
                params.insert("step".into(), Value::Object(call.to_json()));
                params.insert("node".into(), Self::node_for_agent(node));
                params.insert("ports".into(), self.ports_for_agent());
                // The versions the agent's steps were read with (null before: not checked).
                params.insert(
                    format!("{}_version", kind.as_str()),
                    crate::agent_steps::version(node),
                );
                let name = format!("{0}.execute_{0}_step", kind.as_str());
                agent.execute(&url, &token, &name, params, false).await?
            }
        };
        let result = match reply {
            Reply::Busy => return Ok(poll),
            Reply::Result(result) => result,
        };
        match result.status {
            CommandStatus::Running => {
                node.driver_internal_info.insert(
                    COMMAND_KEY.into(),
                    json!({"id": result.id, "step": step.step}),
                );
                let mut progress = JsonObject::new();
                progress.insert("step".into(), step.step.clone().into());
                if let Value::Object(reported) = &result.result {
                    for key in ["bytes_written", "total_bytes", "total", "percent"] {
                        if let Some(value) = reported.get(key) {
                            progress.insert(key.into(), value.clone());
                        }
                    }
                }
                node.driver_internal_info
                    .insert(PROGRESS_KEY.into(), Value::Object(progress));
                Ok(poll)
            }
            CommandStatus::Succeeded => {
                node.driver_internal_info.remove(COMMAND_KEY);
                // The final count sits at the top or in the step's own result.
                let result_key = format!("{}_result", kind.as_str());
                let written = result.result.get("bytes_written").or_else(|| {
                    result
                        .result
                        .get(&result_key)
                        .and_then(|inner| inner.get("bytes_written"))
                });
                if let Some(Value::Object(progress)) =
                    node.driver_internal_info.get_mut(PROGRESS_KEY)
                    && let Some(written) = written
                {
                    progress.insert("bytes_written".into(), written.clone());
                }
                Ok(AgentStep::Finished(result.result))
            }
            CommandStatus::VersionMismatch => {
                node.driver_internal_info.remove(COMMAND_KEY);
                Err(DriverError::AgentVersionMismatch {
                    kind,
                    step: step.step.clone(),
                    versions: crate::agent_steps::version(node).to_string(),
                    detail: result
                        .error
                        .unwrap_or_else(|| "it gave no details".to_owned()),
                })
            }
            CommandStatus::Failed => {
                node.driver_internal_info.remove(COMMAND_KEY);
                Err(DriverError::failed(
                    Component::Agent,
                    format!(
                        "The agent failed {}: {}",
                        step.step,
                        result
                            .error
                            .unwrap_or_else(|| "it gave no reason".to_owned())
                    ),
                ))
            }
        }
    }

    /// Boots the agent ramdisk: network boot prepared, boot device network (once), power on
    /// or reboot. The node waits for the agent's heartbeat — unless fast track finds the agent
    /// already running, which is then used as it is ([`Outcome::Done`], no reboot).
    pub(crate) async fn boot_agent(&self, node: &mut Node) -> Result<Outcome, DriverError> {
        if self.fast_tracked(node).await {
            tracing::info!(node = %node.uuid, "fast track: the agent is up; no reboot into the ramdisk");
            node.driver_internal_info.remove(PROGRESS_KEY);
            return Ok(Outcome::Done);
        }
        forget_agent(node);
        node.driver_internal_info.remove(PROGRESS_KEY);
        self.boot.prepare_ramdisk(node).await?;
        let device = self.boot.network_boot_device();
        self.management.set_boot_device(node, device, false).await?;
        let action = match self.power.get_power_state(node).await? {
            PowerState::On => PowerAction::Reboot,
            _ => PowerAction::On,
        };
        self.power.set_power(node, action, None).await?;
        node.power_state = Some(PowerState::On);
        Ok(Outcome::Wait)
    }

    /// Whether fast track lets this ramdisk phase use the agent that runs now. A BMC that
    /// cannot say whether the machine is on means no (the normal boot then reports it).
    async fn fast_tracked(&self, node: &Node) -> bool {
        match fast_track::usable(node, &self.fast_track, self.power.as_ref()).await {
            Ok(usable) => usable,
            Err(error) => {
                tracing::warn!(node = %node.uuid, error = %error, "fast track: cannot read the power state; rebooting into the ramdisk");
                false
            }
        }
    }

    /// Power off, unless the node says not to.
    async fn power_off(&self, node: &mut Node) -> Result<(), DriverError> {
        if node.disable_power_off {
            return Ok(());
        }
        self.power.set_power(node, PowerAction::Off, None).await?;
        node.power_state = Some(PowerState::Off);
        Ok(())
    }

    /// Asks the agent to flush its disks before the power goes: an image that may not have
    /// reached the disk is a failed deployment, as in Ironic (`standby.sync` failing, or the
    /// agent not answering, fails the step).
    async fn sync_agent(&self, node: &Node) -> Result<(), DriverError> {
        let (url, token) = Self::agent_of(node)?;
        let reply = self
            .agent
            .for_node(node)?
            .execute(&url, &token, "standby.sync", JsonObject::new(), true)
            .await?;
        let synced =
            |result: &crate::agent_client::CommandResult| result.status == CommandStatus::Succeeded;
        match reply {
            Reply::Result(result) if synced(&result) => Ok(()),
            Reply::Result(result) => Err(DriverError::failed(
                Component::Agent,
                format!(
                    "The agent at {url} could not flush the disks (standby.sync {}): {}; the image \
                 may not be on the disk.",
                    match result.status {
                        CommandStatus::Running => "still running after waiting",
                        _ => "failed",
                    },
                    result
                        .error
                        .unwrap_or_else(|| "it gave no reason".to_owned())
                ),
            )),
            Reply::Busy => Err(DriverError::failed(
                Component::Agent,
                format!(
                    "The agent at {url} was busy with another command and did not flush the disks \
                 (standby.sync); the image may not be on the disk."
                ),
            )),
        }
    }

    /// Runs a synchronous agent command and hands back its result; a busy agent is asked
    /// again a few times.
    async fn sync_command(
        &self,
        node: &Node,
        name: &str,
        params: JsonObject,
    ) -> Result<Value, DriverError> {
        let (url, token) = Self::agent_of(node)?;
        let agent = self.agent.for_node(node)?;
        for _ in 0..5 {
            match agent
                .execute(&url, &token, name, params.clone(), true)
                .await?
            {
                Reply::Busy => tokio::time::sleep(self.settings.command_poll_interval).await,
                Reply::Result(result) if result.status == CommandStatus::Succeeded => {
                    return Ok(result.result);
                }
                Reply::Result(result) => {
                    return Err(DriverError::failed(
                        Component::Agent,
                        format!(
                            "The agent at {url} failed {name}: {}",
                            result
                                .error
                                .unwrap_or_else(|| "it gave no reason".to_owned())
                        ),
                    ));
                }
            }
        }
        Err(DriverError::failed(
            Component::Agent,
            format!("The agent at {url} stayed busy with another command; {name} was not run."),
        ))
    }
}

#[async_trait]
impl Validate for DirectDeploy {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.boot.validate(node).await?;
        // The image settings matter only once an image is asked for.
        if node.instance_info.contains_key("image_source") {
            self.resolved_image_info(node, false).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl DeployInterface for DirectDeploy {
    fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        match kind {
            StepKind::Deploy => vec![
                Self::step_def("deploy", 100, NO_ARGS),
                Self::step_def("write_image", 80, WRITE_IMAGE_ARGS),
                Self::step_def("prepare_instance_boot", 60, NO_ARGS),
                Self::step_def("tear_down_agent", 40, NO_ARGS),
                Self::step_def("boot_instance", 20, NO_ARGS),
            ],
            StepKind::Clean => vec![
                Self::step_def(
                    "erase_devices_metadata",
                    self.settings.erase_devices_metadata_priority,
                    NO_ARGS,
                ),
                Self::step_def(
                    "erase_devices",
                    self.settings.erase_devices_priority,
                    NO_ARGS,
                ),
            ],
            StepKind::Service => Vec::new(),
        }
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        match (kind, step.step.as_str()) {
            (StepKind::Deploy, "deploy") => {
                self.resolved_image_info(node, false).await?;
                let whole_disk = !crate::partition_image::is_partition(node)?;
                node.driver_internal_info
                    .insert("is_whole_disk_image".into(), whole_disk.into());
                self.boot_agent(node).await
            }
            (StepKind::Deploy, "prepare_instance_boot") => {
                // The image is written: its cache URLs end (image_cache.rs, deploy tokens).
                self.images.release(&node.uuid.to_string());
                if crate::partition_image::is_partition(node)? {
                    self.install_bootloader(node).await?;
                }
                self.management
                    .set_boot_device(node, BootDevice::Disk, true)
                    .await?;
                self.boot.clean_up_ramdisk(node).await?;
                Ok(Outcome::Done)
            }
            (StepKind::Deploy, "tear_down_agent") => {
                self.collect_ramdisk_logs(node, None, false).await;
                self.sync_agent(node).await?;
                self.power_off(node).await?;
                forget_agent(node);
                Ok(Outcome::Done)
            }
            (StepKind::Deploy, "boot_instance") => {
                self.images.release(&node.uuid.to_string());
                self.power.set_power(node, PowerAction::On, None).await?;
                node.power_state = Some(PowerState::On);
                Ok(Outcome::Done)
            }
            _ => self.run_on_agent(node, kind, step).await,
        }
    }

    async fn prepare(&self, node: &mut Node, kind: StepKind) -> Result<Outcome, DriverError> {
        match kind {
            // The `deploy` step boots the agent itself.
            StepKind::Deploy => Ok(Outcome::Done),
            StepKind::Clean | StepKind::Service => {
                // The erase options, where IPA reads them (Ironic's agent_add_clean_params).
                for (key, value) in self.settings.erase.agent_params() {
                    node.driver_internal_info.insert(key.to_owned(), value);
                }
                self.boot_agent(node).await
            }
        }
    }

    async fn finish(&self, node: &mut Node, kind: StepKind) -> Result<(), DriverError> {
        if kind == StepKind::Deploy {
            return Ok(());
        }
        self.boot.clean_up_ramdisk(node).await?;
        if fast_track::keeps_agent(node, &self.fast_track) {
            // The agent stays up for the next phase (its network boot is gone: a reboot
            // would not bring it back).
            tracing::info!(node = %node.uuid, "fast track: the machine stays on with its agent");
            return Ok(());
        }
        self.power_off(node).await?;
        forget_agent(node);
        Ok(())
    }

    fn runs_agent(&self) -> bool {
        true
    }

    async fn collect_ramdisk_logs(
        &self,
        node: &Node,
        label: Option<&str>,
        failed: bool,
    ) -> Option<std::path::PathBuf> {
        let wanted = match self.settings.logs_collect {
            LogsCollect::Never => false,
            LogsCollect::OnFailure => failed,
            LogsCollect::Always => true,
        };
        if !wanted || Self::agent_of(node).is_err() {
            return None;
        }
        let collected = async {
            let result = self
                .sync_command(node, "log.collect_system_logs", JsonObject::new())
                .await?;
            crate::ramdisk_logs::store(&self.settings.logs_local_path, node, label, &result)
        }
        .await;
        match collected {
            Ok(path) => {
                tracing::info!(node = %node.uuid, path = %path.display(), "stored the ramdisk's logs");
                Some(path)
            }
            Err(error) => {
                // Logs help to debug; failing to get them changes nothing about the flow.
                tracing::error!(node = %node.uuid, %error, "could not collect the ramdisk's logs");
                None
            }
        }
    }

    async fn refresh_agent_steps(
        &self,
        node: &mut Node,
        kind: StepKind,
    ) -> Result<(), DriverError> {
        let mut params = JsonObject::new();
        params.insert("node".into(), Self::node_for_agent(node));
        params.insert("ports".into(), self.ports_for_agent());
        let name = format!("{0}.get_{0}_steps", kind.as_str());
        let result = self.sync_command(node, &name, params).await?;
        let (steps, versions) = crate::agent_steps::parse(kind, &result).map_err(|error| {
            DriverError::failed(
                Component::Agent,
                format!(
                    "Ferric cannot use the {} steps of node {}'s agent: {error}.",
                    kind.as_str(),
                    node.uuid
                ),
            )
        })?;
        tracing::info!(
            node = %node.uuid,
            kind = kind.as_str(),
            versions = %serde_json::Value::Object(versions.clone()),
            "read the agent's steps"
        );
        crate::agent_steps::store(node, kind, steps, versions);
        Ok(())
    }

    fn step_needs_agent(&self, step: &StepCall) -> bool {
        // Every step but the four the conductor carries out itself around the agent.
        !matches!(
            step.step.as_str(),
            "deploy" | "prepare_instance_boot" | "tear_down_agent" | "boot_instance"
        )
    }

    async fn tear_down(&self, node: &mut Node) -> Result<(), DriverError> {
        self.images.release(&node.uuid.to_string());
        self.power_off(node).await?;
        self.boot.clean_up_ramdisk(node).await?;
        forget_agent(node);
        node.driver_internal_info.remove(PROGRESS_KEY);
        Ok(())
    }

    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError> {
        // Tell a running agent to stop what it does before the BMC cuts the power.
        if let Ok((url, token)) = Self::agent_of(node) {
            let stopped = match self.agent.for_node(node) {
                Ok(agent) => agent
                    .execute(&url, &token, "standby.power_off", JsonObject::new(), false)
                    .await
                    .map(drop),
                Err(error) => Err(error),
            };
            if let Err(error) = stopped {
                tracing::warn!(node = %node.uuid, error = %error, "could not tell the agent to stop");
            }
        }
        forget_agent(node);
        // An aborted or failed deploy: its cache URLs end.
        self.images.release(&node.uuid.to_string());
        self.boot.clean_up_ramdisk(node).await?;
        self.power_off(node).await
    }
}

/// Whether the agent offered `step` with `reboot_requested: true`.
fn reboot_requested(node: &Node, kind: StepKind, step: &StepCall) -> bool {
    crate::agent_steps::cached(node, kind)
        .iter()
        .any(|def| def.interface == step.interface && def.step == step.step && def.reboot_requested)
}
