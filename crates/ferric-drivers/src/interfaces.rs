//! The driver interfaces as traits (`reference/ironic.md` §7): what the conductor asks of a
//! node's hardware. Every implementation takes the node it works on; the ones that record
//! something on the node (a boot device, an inspection result) take it mutably and the
//! conductor saves it afterwards.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use ferric_model::resources::{InterfaceKind, JsonObject, Node, PowerState};
use serde_json::Value;

use crate::DriverError;
pub use crate::step_kind::StepKind;
use crate::vmedia::{VmediaDevice, VmediaSlot};
pub use ferric_model::values::{
    BootDevice, BootDeviceSetting, BootMode, Indicator, IndicatorState, PowerAction, StepCall,
};

/// What a step or an asynchronous operation did: finished, or started something the node
/// will call back about (the conductor then parks the node in the matching wait state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Wait,
    /// Still running (on the agent): the conductor saves the node — with whatever progress
    /// the step wrote into it — and runs the same step again after this long.
    Poll(Duration),
}

/// A step an interface offers. Priority 0 means "only when asked for"; higher priorities run
/// first in automated cleaning and in every deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepDef {
    pub interface: InterfaceKind,
    pub step: &'static str,
    pub priority: u32,
    /// Whether an `abort` may interrupt the node while this step runs.
    pub abortable: bool,
    /// Argument names and what they mean, for `GET …/steps`-style listings.
    pub argsinfo: &'static [(&'static str, &'static str)],
}

/// Checks settings without touching hardware; the interface of every kind has it.
#[async_trait]
pub trait Validate: Send + Sync {
    async fn validate(&self, node: &Node) -> Result<(), DriverError>;
}

#[async_trait]
pub trait PowerInterface: Validate {
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError>;
    /// Performs `action`; `timeout` bounds how long a soft action may take.
    async fn set_power(
        &self,
        node: &Node,
        action: PowerAction,
        timeout: Option<Duration>,
    ) -> Result<(), DriverError>;
    fn supported_power_actions(&self) -> &'static [PowerAction];
    /// Whether [`PowerInterface::get_power_state`] only echoes the state recorded on the node
    /// (the fake interface, as Ironic's): verifying then records nothing.
    fn echoes_recorded_state(&self) -> bool {
        false
    }

    /// The BMC this node's power is read through, when it has one (its address): the power
    /// sync limits how many requests one BMC gets at once by it.
    fn bmc_address(&self, _node: &Node) -> Option<String> {
        None
    }
}

#[async_trait]
pub trait ManagementInterface: Validate {
    fn supported_boot_devices(&self, node: &Node) -> Vec<BootDevice>;
    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError>;
    async fn set_boot_device(
        &self,
        node: &mut Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), DriverError>;

    /// Asks the BMC whether it can boot the node from `device` in the node's boot mode, before
    /// anything is powered (validate): a BMC that lists the values it allows refuses others
    /// here rather than at the boot. Management interfaces that cannot tell accept.
    async fn check_boot(&self, _node: &Node, _device: BootDevice) -> Result<(), DriverError> {
        Ok(())
    }

    /// The firmware boot mode the BMC reports (`None`: it does not say).
    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    async fn set_boot_mode(&self, node: &mut Node, _mode: BootMode) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// Sends a non-maskable interrupt (`PUT /v1/nodes/{node}/management/inject_nmi`).
    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// Turns UEFI secure boot on or off (`PUT /v1/nodes/{node}/states/secure_boot`) and
    /// records it in `node.secure_boot`.
    async fn set_secure_boot(&self, node: &mut Node, _enabled: bool) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// The node's indicators (LEDs) by component (`GET …/management/indicators`, API 1.63).
    async fn indicators(&self, node: &Node) -> Result<Vec<Indicator>, DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// The state of the indicator `name` of `component`; an indicator the node does not have
    /// is the caller's mistake ([`DriverError::InvalidParameter`]).
    async fn indicator_state(
        &self,
        node: &Node,
        _component: &str,
        _name: &str,
    ) -> Result<IndicatorState, DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// Sets the indicator `name` of `component` to `state`; what the interface remembers
    /// goes on the node, which the conductor saves.
    async fn set_indicator_state(
        &self,
        node: &mut Node,
        _component: &str,
        _name: &str,
        _state: IndicatorState,
    ) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// The machine's virtual media devices (`GET /v1/nodes/{node}/vmedia`, `vmedia.rs`).
    async fn virtual_media(&self, node: &Node) -> Result<Vec<VmediaSlot>, DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// Presents the image at `url` as the machine's virtual `device` (`POST …/vmedia`).
    async fn attach_virtual_media(
        &self,
        node: &Node,
        _device: VmediaDevice,
        _url: &str,
    ) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }

    /// Ejects what the devices of the given kinds (every kind when empty) present.
    async fn detach_virtual_media(
        &self,
        node: &Node,
        _devices: &[VmediaDevice],
    ) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }
}

/// Deploying and cleaning: an ordered list of steps per [`StepKind`].
#[async_trait]
pub trait DeployInterface: Validate {
    fn steps(&self, kind: StepKind) -> Vec<StepDef>;
    async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError>;
    /// Readies what the steps of `kind` need before the first one runs (the `direct`
    /// interface boots the agent ramdisk for cleaning). `Wait`: the node calls back when it
    /// is ready.
    async fn prepare(&self, _node: &mut Node, _kind: StepKind) -> Result<Outcome, DriverError> {
        Ok(Outcome::Done)
    }
    /// Undoes [`DeployInterface::prepare`] after the last step of `kind`, or after the flow
    /// failed.
    async fn finish(&self, _node: &mut Node, _kind: StepKind) -> Result<(), DriverError> {
        Ok(())
    }
    /// Whether `step` runs in the agent ramdisk (refused when a clean or service request says
    /// `disable_ramdisk`).
    fn step_needs_agent(&self, _step: &StepCall) -> bool {
        false
    }
    /// Whether this interface runs steps on an agent, whose own steps (for the `deploy`
    /// interface, and the `raid` interface when that is `agent`) join the flows.
    fn runs_agent(&self) -> bool {
        false
    }
    /// Collects the agent ramdisk's logs (`log.collect_system_logs`) and stores them, as the
    /// site's `deploy_logs_collect` says (`failed`: the flow is failing). Returns where they
    /// were stored; interfaces without an agent, or with nothing to collect, give `None`.
    async fn collect_ramdisk_logs(
        &self,
        _node: &Node,
        _label: Option<&str>,
        _failed: bool,
    ) -> Option<std::path::PathBuf> {
        None
    }
    /// Asks the node's agent which steps of `kind` it offers and caches them with its hardware
    /// manager versions (`agent_steps`). Interfaces without an agent do nothing.
    async fn refresh_agent_steps(
        &self,
        _node: &mut Node,
        _kind: StepKind,
    ) -> Result<(), DriverError> {
        Ok(())
    }
    /// Removes the instance (undeploy), before automated cleaning; sets `node.power_state`
    /// if it changed the power (the conductor assumes nothing).
    async fn tear_down(&self, node: &mut Node) -> Result<(), DriverError>;
    /// Undoes what a failed or aborted deployment left behind.
    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError>;
}

/// Network boot: what makes a machine boot the agent ramdisk, and stop doing so.
#[async_trait]
pub trait BootInterface: Validate {
    /// The boot device that starts this interface's boot of the ramdisk (`uefihttp` for UEFI
    /// HTTP boot).
    fn network_boot_device(&self) -> BootDevice {
        BootDevice::Pxe
    }
    /// Makes the node boot the agent ramdisk from the network at its next power-on. What the
    /// management interface needs for that boot goes into the node (`redfish-https` puts the
    /// ISO's URL in `driver_internal_info.redfish_uefi_http_url` for the boot device call that
    /// follows, as Ironic's does).
    async fn prepare_ramdisk(&self, node: &mut Node) -> Result<(), DriverError>;
    /// Stops the node from booting the ramdisk (it boots its own disk again).
    async fn clean_up_ramdisk(&self, node: &Node) -> Result<(), DriverError>;
    /// [`BootInterface::prepare_ramdisk`] with extra kernel parameters for the ramdisk (the
    /// inspection callback URL). Interfaces that cannot pass parameters ignore them.
    async fn prepare_ramdisk_with(
        &self,
        node: &mut Node,
        _kernel_params: &[String],
    ) -> Result<(), DriverError> {
        self.prepare_ramdisk(node).await
    }
    /// Whether this interface can boot an instance that lives in memory (Ironic's
    /// `ramdisk_boot` capability): what the `ramdisk` deploy interface needs.
    fn boots_instance_ramdisk(&self) -> bool {
        false
    }
    /// Makes the node boot its instance — `instance_info.boot_iso`, or `kernel` and
    /// `ramdisk` — at every power-on, for the `ramdisk` deploy interface; returns the boot
    /// device to set persistently. Interfaces without the capability refuse.
    async fn prepare_instance_ramdisk(&self, node: &mut Node) -> Result<BootDevice, DriverError> {
        Err(DriverError::invalid(
            "node.boot_interface",
            format!(
                "Node {}: its boot interface {} cannot boot an instance from memory, which the \
             ramdisk deploy interface needs; use boot_interface ipxe (or pxe, http, \
             http-ipxe) or redfish-virtual-media.",
                node.uuid,
                node.boot_interface.as_deref().unwrap_or("(default)")
            ),
        ))
    }
    /// Stops the node from booting the instance [`BootInterface::prepare_instance_ramdisk`]
    /// set up (undeploy).
    async fn clean_up_instance_ramdisk(&self, node: &Node) -> Result<(), DriverError> {
        self.clean_up_ramdisk(node).await
    }
}

/// Where an inspection that finishes elsewhere (the inspection service) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InspectionStatus {
    Running,
    Finished,
    Failed(String),
}

/// What starting an inspection did.
#[derive(Debug, Clone, PartialEq)]
pub enum Inspection {
    /// Finished, with nothing to process (`fake`).
    Done,
    /// The machine boots a ramdisk whose data comes later: the node waits in `inspect wait`.
    Wait,
    /// Read out of band (`redfish`): the machine as its BMC describes it. The conductor
    /// processes it like a ramdisk's data and the inspection ends at once.
    Data(OutOfBand),
}

/// An out-of-band inspection's result.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfBand {
    /// Inspection data in the ramdisk's format (`reference/ironic.md` §4.4):
    /// `{"inventory": {"cpu", "memory", "disks", "interfaces", "system_vendor", "boot", …}}`.
    pub payload: Value,
    /// The MACs (lower case) of the NICs that may get a port: those the BMC reports enabled
    /// (Ironic creates ports for no others).
    pub port_macs: Vec<String>,
    /// What named the BMC in messages (`Redfish BMC http://…`).
    pub bmc: String,
}

#[async_trait]
pub trait InspectInterface: Validate {
    async fn inspect(&self, node: &mut Node) -> Result<Inspection, DriverError>;
    /// Stops an inspection that waits for the node. Interfaces that cannot answer
    /// [`DriverError::Unsupported`] and the node stays in `inspect wait` (seed 000).
    async fn abort(&self, node: &mut Node) -> Result<(), DriverError>;
    /// For inspections another service runs: where it stands (the conductor polls it while
    /// the node is in `inspect wait`).
    async fn status(&self, _node: &Node) -> Result<InspectionStatus, DriverError> {
        Ok(InspectionStatus::Running)
    }
    /// After the data was processed, or the inspection failed: stop booting the ramdisk and
    /// power the machine off.
    async fn finish(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }
    /// Whether the ramdisk's data comes to Ferric's `/v1/continue_inspection` for the
    /// conductor to process (the `agent` interface).
    fn takes_data(&self) -> bool {
        false
    }
}

#[async_trait]
pub trait RescueInterface: Validate {
    async fn rescue(&self, node: &mut Node) -> Result<Outcome, DriverError>;
    /// Finishes a rescue whose environment called back (`rescue wait` → `rescue`): the
    /// `agent` interface hands the rescue password to the agent.
    async fn finish_rescue(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }
    async fn unrescue(&self, node: &mut Node) -> Result<(), DriverError>;
    /// Undoes what a failed or aborted rescue left behind.
    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError>;
}

/// One BIOS setting as a BMC reports it: the value and, where the BMC has an attribute
/// registry, its description (`attribute_type`, `allowable_values`, `read_only`,
/// `reset_required`, `lower_bound`, `upper_bound`, `min_length`, `max_length`, `unique`: the
/// API's 1.74 fields).
#[derive(Debug, Clone, PartialEq)]
pub struct BiosValue {
    pub name: String,
    pub value: Option<String>,
    pub registry: JsonObject,
}

/// A requested BIOS setting (`bios.apply_configuration`'s `settings: [{name, value}]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BiosChange {
    pub name: String,
    pub value: String,
}

impl BiosChange {
    /// Reads a step's `settings` argument; every entry needs a `name` and a `value` (numbers
    /// and booleans are taken as their text).
    pub fn from_args(args: &JsonObject) -> Result<Vec<Self>, DriverError> {
        let settings = args
            .get("settings")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                DriverError::invalid(
                    "argument.settings",
                    "bios.apply_configuration needs args.settings, a list of {\"name\", \
                     \"value\"} objects."
                        .to_owned(),
                )
            })?;
        settings
            .iter()
            .map(|entry| {
                let name = entry.get("name").and_then(Value::as_str);
                let value = match entry.get("value") {
                    Some(Value::String(text)) => Some(text.clone()),
                    Some(value @ (Value::Number(_) | Value::Bool(_))) => Some(value.to_string()),
                    _ => None,
                };
                match (name, value) {
                    (Some(name), Some(value)) if !name.is_empty() => Ok(Self {
                        name: name.to_owned(),
                        value,
                    }),
                    _ => Err(DriverError::invalid(
                        "argument.settings",
                        format!(
                            "Each BIOS setting needs a non-empty \"name\" and a string \"value\"; \
                         got {entry}."
                        ),
                    )),
                }
            })
            .collect()
    }
}

/// Checks `changes` against what the BIOS reports before anything is written: every name must
/// exist, read-only settings cannot change, and an enumeration takes only its allowable values.
pub fn check_bios_changes(
    current: &[BiosValue],
    changes: &[BiosChange],
) -> Result<(), DriverError> {
    if changes.is_empty() {
        return Err(DriverError::invalid(
            "argument.settings",
            "bios.apply_configuration was given no settings to apply.".to_owned(),
        ));
    }
    for change in changes {
        let Some(setting) = current.iter().find(|setting| setting.name == change.name) else {
            let mut known: Vec<&str> = current
                .iter()
                .map(|setting| setting.name.as_str())
                .collect();
            known.sort_unstable();
            return Err(DriverError::invalid(
                "argument.settings",
                format!(
                    "Unknown BIOS setting '{}'; the BIOS has: {}.",
                    change.name,
                    known.join(", ")
                ),
            ));
        };
        if setting.registry.get("read_only") == Some(&Value::Bool(true)) {
            return Err(DriverError::invalid(
                "argument.settings",
                format!(
                    "BIOS setting '{}' is read-only and cannot be changed.",
                    change.name
                ),
            ));
        }
        if let Some(allowed) = setting
            .registry
            .get("allowable_values")
            .and_then(Value::as_array)
        {
            let allowed: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
            if !allowed.is_empty() && !allowed.contains(&change.value.as_str()) {
                return Err(DriverError::invalid(
                    "argument.settings",
                    format!(
                        "Value '{}' is not allowed for BIOS setting '{}'; allowed: {}.",
                        change.value,
                        change.name,
                        allowed.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

const BIOS_APPLY_ARGS: &[(&str, &str)] = &[(
    "settings",
    "A list of BIOS settings to apply, each {\"name\": ..., \"value\": ...}. Required.",
)];
const NO_STEP_ARGS: &[(&str, &str)] = &[];
const FIRMWARE_UPDATE_ARGS: &[(&str, &str)] = &[(
    "settings",
    "A list of firmware updates, each {\"component\": \"bios\"|\"bmc\", \"url\": ..., \
     \"checksum\": ... (optional)}. Required.",
)];

/// The steps of an implemented BIOS interface: the same in every flow.
pub fn bios_steps() -> Vec<StepDef> {
    vec![
        StepDef {
            interface: InterfaceKind::Bios,
            step: "apply_configuration",
            priority: 0,
            abortable: false,
            argsinfo: BIOS_APPLY_ARGS,
        },
        StepDef {
            interface: InterfaceKind::Bios,
            step: "factory_reset",
            priority: 0,
            abortable: false,
            argsinfo: NO_STEP_ARGS,
        },
    ]
}

/// The step of an implemented firmware interface; a flash may not be interrupted (seed 001:
/// aborting while it runs answers 403).
pub fn firmware_steps() -> Vec<StepDef> {
    vec![StepDef {
        interface: InterfaceKind::Firmware,
        step: "update",
        priority: 0,
        abortable: false,
        argsinfo: FIRMWARE_UPDATE_ARGS,
    }]
}

/// BIOS settings out of band: read them (with the registry), change some, or reset them all.
#[async_trait]
pub trait BiosInterface: Validate {
    /// The steps this interface offers in flows of `kind` (none for `no-bios`).
    fn steps(&self, _kind: StepKind) -> Vec<StepDef> {
        bios_steps()
    }
    /// Reads every setting (the conductor stores them for `GET /v1/nodes/{node}/bios`).
    async fn cache_settings(&self, node: &Node) -> Result<Vec<BiosValue>, DriverError>;
    /// Applies `changes`, after checking them against the current settings and registry;
    /// done once the BIOS reports them.
    async fn apply_configuration(
        &self,
        node: &mut Node,
        changes: &[BiosChange],
    ) -> Result<(), DriverError>;
    /// Puts every setting back to the BIOS's defaults.
    async fn factory_reset(&self, node: &mut Node) -> Result<(), DriverError>;
}

/// One firmware image to flash (`firmware.update`'s `settings: [{component, url, checksum}]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareUpdate {
    pub component: String,
    pub url: String,
    pub checksum: Option<ImageChecksum>,
}

/// The digest an image must have: `sha256:<hex>`, `sha512:<hex>`, `sha1:<hex>`, or the bare
/// hex digest (its length tells the algorithm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageChecksum {
    /// `sha1`, `sha256` or `sha512`.
    pub algorithm: &'static str,
    /// Lower-case hex.
    pub hex: String,
}

impl ImageChecksum {
    /// Reads a checksum as given in a step's arguments.
    pub fn parse(text: &str) -> Result<Self, DriverError> {
        let text = text.trim();
        let (named, hex) = match text.split_once(':') {
            Some((algorithm, hex)) => (Some(algorithm.to_ascii_lowercase()), hex),
            None => (None, text),
        };
        let by_length = match hex.len() {
            40 => Some("sha1"),
            64 => Some("sha256"),
            128 => Some("sha512"),
            _ => None,
        };
        let algorithm = match (named.as_deref(), by_length) {
            (None, Some(algorithm)) => Some(algorithm),
            (Some(name), Some(algorithm)) if name == algorithm => Some(algorithm),
            _ => None,
        };
        match algorithm {
            Some(algorithm) if hex.chars().all(|c| c.is_ascii_hexdigit()) => Ok(Self {
                algorithm,
                hex: hex.to_ascii_lowercase(),
            }),
            _ => Err(DriverError::invalid(
                "argument.settings",
                format!(
                    "The firmware image checksum \"{text}\" is not one Ferric can check: give the \
                 hex SHA-256 (64 digits), SHA-512 (128) or SHA-1 (40) digest, optionally as \
                 \"sha256:<hex>\"."
                ),
            )),
        }
    }
}

impl fmt::Display for ImageChecksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm, self.hex)
    }
}

/// The components `firmware.update` knows: the system's BIOS and the BMC.
pub const FIRMWARE_COMPONENTS: [&str; 2] = ["bios", "bmc"];

impl FirmwareUpdate {
    /// Reads a step's `settings` argument.
    pub fn from_args(args: &JsonObject) -> Result<Vec<Self>, DriverError> {
        let settings = args
            .get("settings")
            .and_then(Value::as_array)
            .filter(|settings| !settings.is_empty())
            .ok_or_else(|| {
                DriverError::invalid(
                    "argument.settings",
                    "firmware.update needs args.settings, a non-empty list of {\"component\", \
                     \"url\", \"checksum\"} objects."
                        .to_owned(),
                )
            })?;
        settings
            .iter()
            .map(|entry| {
                let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
                let component = text("component").unwrap_or_default();
                if !FIRMWARE_COMPONENTS.contains(&component.as_str()) {
                    return Err(DriverError::invalid(
                        "argument.settings",
                        format!(
                            "Unknown firmware component '{component}' in {entry}; known: {}.",
                            FIRMWARE_COMPONENTS.join(", ")
                        ),
                    ));
                }
                let url = text("url").filter(|url| !url.is_empty()).ok_or_else(|| {
                    DriverError::invalid(
                        "argument.settings",
                        format!("Firmware update of '{component}' needs a \"url\" of the image."),
                    )
                })?;
                let checksum = text("checksum")
                    .filter(|checksum| !checksum.is_empty())
                    .map(|checksum| ImageChecksum::parse(&checksum))
                    .transpose()?;
                Ok(Self {
                    component,
                    url,
                    checksum,
                })
            })
            .collect()
    }
}

/// Firmware out of band: report component versions and flash new images.
#[async_trait]
pub trait FirmwareInterface: Validate {
    /// The steps this interface offers in flows of `kind` (none for `no-firmware`).
    fn steps(&self, _kind: StepKind) -> Vec<StepDef> {
        firmware_steps()
    }
    /// The current version of each component the BMC reports, as `(component, version)`.
    async fn cache_components(&self, node: &Node) -> Result<Vec<(String, String)>, DriverError>;
    /// Flashes `updates` in order. A long update returns [`Outcome::Poll`] with its progress
    /// in `driver_internal_info` and is called again until it returns `Done`.
    async fn update(
        &self,
        node: &mut Node,
        updates: &[FirmwareUpdate],
    ) -> Result<Outcome, DriverError>;
}

/// RAID: build the node's `target_raid_config` (`raid.create_configuration`, or
/// `raid.apply_configuration` with the configuration as an argument in deploy steps) or remove
/// every volume (`raid.delete_configuration`). What was built is stored in `raid_config`, and
/// the root volume's hint becomes `properties.root_device` (see [`crate::raid`]).
#[async_trait]
pub trait RaidInterface: Validate {
    /// The steps this interface offers in flows of `kind`: `raid::raid_steps` for every
    /// implementation that builds RAID, none for `no-raid`.
    fn steps(&self, kind: StepKind) -> Vec<StepDef>;
    /// Whether this implementation's steps run in the agent ramdisk.
    fn needs_agent(&self) -> bool {
        false
    }
    /// Checks a target configuration before `PUT /v1/nodes/{node}/states/raid` stores it:
    /// the common schema, then what this implementation can build.
    fn validate_target(&self, node: &Node, target: &JsonObject) -> Result<(), DriverError>;
    /// Runs one `raid.*` step; a step that runs elsewhere (on the agent) answers
    /// [`Outcome::Poll`] until it ends.
    async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError>;
}

/// One vendor passthru method (`GET /v1/nodes/{node}/vendor_passthru/methods`), as Ironic
/// describes its `@passthru` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VendorMethod {
    pub name: &'static str,
    /// The HTTP methods it answers, upper case.
    pub http_methods: &'static [&'static str],
    /// Runs in the background (the API answers 202 with no body) rather than while the
    /// caller waits (200 with its return value).
    pub is_async: bool,
    pub description: &'static str,
    /// The return value is the response body itself, not JSON.
    pub attach: bool,
    /// Node methods only: whether it runs under the node's lease. Methods that do not must
    /// not change the node (nothing they write is saved).
    pub require_exclusive_lock: bool,
}

impl VendorMethod {
    /// The method's entry in a methods listing; `require_exclusive_lock` only for node
    /// methods, as Ironic lists them.
    pub fn metadata(&self, node_level: bool) -> Value {
        let mut object = JsonObject::new();
        object.insert("async".into(), self.is_async.into());
        object.insert("attach".into(), self.attach.into());
        object.insert("description".into(), self.description.into());
        object.insert(
            "http_methods".into(),
            Value::Array(
                self.http_methods
                    .iter()
                    .map(|method| Value::from(*method))
                    .collect(),
            ),
        );
        if node_level {
            object.insert(
                "require_exclusive_lock".into(),
                self.require_exclusive_lock.into(),
            );
        }
        Value::Object(object)
    }

    /// A methods listing: `{"<name>": {metadata}}`.
    pub fn listing(methods: &[VendorMethod], node_level: bool) -> Value {
        Value::Object(
            methods
                .iter()
                .map(|method| (method.name.to_owned(), method.metadata(node_level)))
                .collect(),
        )
    }

    /// Finds the method a call names among `methods` (those of `driver`'s vendor interface)
    /// and checks it answers `http_method`, with Ironic's words: an interface with no methods
    /// at all (`no-vendor`) is UnsupportedDriverExtension, an unknown name "No handler for
    /// method", a wrong HTTP method "does not support HTTP"; all are the caller's error (400).
    pub fn find<'a>(
        methods: &'a [VendorMethod],
        driver: &str,
        name: &str,
        http_method: &str,
    ) -> Result<&'a VendorMethod, DriverError> {
        if methods.is_empty() {
            return Err(DriverError::Unsupported {
                driver: driver.to_owned(),
                kind: InterfaceKind::Vendor,
            });
        }
        let method = methods
            .iter()
            .find(|method| method.name == name)
            .ok_or_else(|| {
                let known: Vec<&str> = methods.iter().map(|method| method.name).collect();
                DriverError::invalid(
                    "argument.method",
                    format!(
                        "No handler for method {name}; the methods are: {}.",
                        known.join(", ")
                    ),
                )
            })?;
        let http_method = http_method.to_ascii_uppercase();
        if !method.http_methods.contains(&http_method.as_str()) {
            return Err(DriverError::invalid(
                "argument.http_method",
                format!(
                    "The method {name} does not support HTTP {http_method}; use {}.",
                    method.http_methods.join(" or ")
                ),
            ));
        }
        Ok(method)
    }
}

/// Vendor passthru (`/v1/nodes/{node}/vendor_passthru?method=…` and the driver-level
/// `/v1/drivers/{driver}/vendor_passthru?method=…`): methods a driver offers beyond the
/// standard interfaces, called by name with a JSON object of arguments.
#[async_trait]
pub trait VendorInterface: Validate {
    /// The methods called on a node.
    fn methods(&self) -> &'static [VendorMethod];

    /// The methods called on the hardware type, without a node.
    fn driver_methods(&self) -> &'static [VendorMethod] {
        &[]
    }

    /// Checks a node call's arguments before anything runs (a missing parameter is the
    /// caller's error, answered 400 before an asynchronous method is started).
    async fn check_call(
        &self,
        node: &Node,
        method: &VendorMethod,
        args: &JsonObject,
    ) -> Result<(), DriverError>;

    /// Runs a node method; its return value is what a synchronous call answers.
    async fn call(
        &self,
        node: &mut Node,
        method: &VendorMethod,
        http_method: &str,
        args: &JsonObject,
    ) -> Result<Value, DriverError>;

    /// Checks a driver-level call's arguments before anything runs.
    async fn check_driver_call(
        &self,
        _driver: &str,
        _method: &VendorMethod,
        _args: &JsonObject,
    ) -> Result<(), DriverError> {
        Ok(())
    }

    /// Runs a driver-level method.
    async fn driver_call(
        &self,
        driver: &str,
        method: &VendorMethod,
        _http_method: &str,
        _args: &JsonObject,
    ) -> Result<Value, DriverError> {
        Err(DriverError::invalid(
            "argument.method",
            format!("No handler for method {} in driver {driver}.", method.name),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn vendor_methods_are_found_or_refused_in_ironics_words() {
        const METHODS: &[VendorMethod] = &[VendorMethod {
            name: "send_raw",
            http_methods: &["POST", "PUT"],
            is_async: true,
            description: "",
            attach: false,
            require_exclusive_lock: true,
        }];
        let found = VendorMethod::find(METHODS, "ipmi", "send_raw", "put").unwrap();
        assert_eq!(found.name, "send_raw");
        let unknown = VendorMethod::find(METHODS, "ipmi", "reset", "POST").unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "No handler for method reset; the methods are: send_raw."
        );
        let wrong = VendorMethod::find(METHODS, "ipmi", "send_raw", "GET").unwrap_err();
        assert!(
            wrong
                .to_string()
                .starts_with("The method send_raw does not support HTTP GET"),
            "{wrong}"
        );
        let none = VendorMethod::find(&[], "ipmi", "send_raw", "POST").unwrap_err();
        assert!(matches!(none, DriverError::Unsupported { .. }), "{none}");
        assert!(
            [unknown, wrong, none]
                .iter()
                .all(DriverError::is_caller_error)
        );
        let listing = VendorMethod::listing(METHODS, false);
        assert_eq!(
            listing,
            json!({"send_raw": {"async": true, "attach": false, "description": "",
                "http_methods": ["POST", "PUT"]}})
        );
        assert_eq!(
            VendorMethod::listing(METHODS, true)["send_raw"]["require_exclusive_lock"],
            true
        );
    }

    #[test]
    fn step_arguments_are_read_or_refused_with_what_to_send() {
        let changes = BiosChange::from_args(&args(json!({"settings": [
            {"name": "BootMode", "value": "Uefi"}, {"name": "Cores", "value": 4}]})))
        .unwrap();
        assert_eq!(changes[1].value, "4");
        for bad in [json!({}), json!({"settings": [{"name": "", "value": "x"}]})] {
            let error = BiosChange::from_args(&args(bad)).unwrap_err();
            assert!(error.is_caller_error(), "{error}");
        }
        let digest = "AB".repeat(32);
        let updates = FirmwareUpdate::from_args(&args(json!({"settings": [
            {"component": "bmc", "url": "http://x/bmc.bin", "checksum": digest}]})))
        .unwrap();
        let checksum = updates[0].checksum.as_ref().unwrap();
        assert_eq!(checksum.to_string(), format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(
            ImageChecksum::parse(&format!("sha512:{}", "0".repeat(128)))
                .unwrap()
                .algorithm,
            "sha512"
        );
        for bad in [
            "ab",
            "md5:0123",
            &format!("sha512:{}", "0".repeat(64)),
            &"z".repeat(64),
        ] {
            let error = FirmwareUpdate::from_args(&args(json!({"settings": [
                {"component": "bmc", "url": "http://x/bmc.bin", "checksum": bad}]})))
            .unwrap_err();
            assert!(error.to_string().contains("SHA-256"), "{bad}: {error}");
        }
        let unknown = FirmwareUpdate::from_args(&args(json!({"settings": [
            {"component": "nic", "url": "http://x"}]})))
        .unwrap_err();
        assert!(
            unknown.to_string().contains("known: bios, bmc"),
            "{unknown}"
        );
        let no_url = FirmwareUpdate::from_args(&args(json!({"settings": [{"component": "bios"}]})))
            .unwrap_err();
        assert!(no_url.to_string().contains("\"url\""), "{no_url}");
    }
}
