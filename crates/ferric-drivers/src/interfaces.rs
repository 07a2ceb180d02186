//! The driver interfaces as traits (`reference/ironic.md` §7): what the conductor asks of a
//! node's hardware. Every implementation takes the node it works on; the ones that record
//! something on the node (a boot device, an inspection result) take it mutably and the
//! conductor saves it afterwards.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use ferric_model::resources::{InterfaceKind, JsonObject, Node, PowerState};
use serde_json::Value;

use crate::DriverError;

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

impl fmt::Display for PowerAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PowerAction {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|action| action.as_str() == name)
            .ok_or(())
    }
}

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

impl fmt::Display for BootDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BootDevice {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|device| device.as_str() == name)
            .ok_or(())
    }
}

/// A node's firmware boot mode (`PUT /v1/nodes/{node}/states/boot_mode`, the node's
/// `boot_mode` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BootMode {
    Uefi,
    Bios,
}

impl BootMode {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Uefi => "uefi",
            Self::Bios => "bios",
        }
    }
}

impl fmt::Display for BootMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BootMode {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        [Self::Uefi, Self::Bios]
            .into_iter()
            .find(|mode| mode.as_str() == name)
            .ok_or(())
    }
}

/// The boot device a BMC reports; either part may be unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BootDeviceSetting {
    pub device: Option<BootDevice>,
    pub persistent: Option<bool>,
}

/// Which list of steps: cleaning, deploying or servicing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    Clean,
    Deploy,
    Service,
}

impl StepKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Deploy => "deploy",
            Self::Service => "service",
        }
    }
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

/// One step to run, as the API receives it or the conductor schedules it.
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
    /// Removes the instance (undeploy), before automated cleaning.
    async fn tear_down(&self, node: &mut Node) -> Result<(), DriverError>;
    /// Undoes what a failed or aborted deployment left behind.
    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError>;
}

/// Network boot: what makes a machine boot the agent ramdisk, and stop doing so.
#[async_trait]
pub trait BootInterface: Validate {
    /// Makes the node boot the agent ramdisk from the network at its next power-on.
    async fn prepare_ramdisk(&self, node: &Node) -> Result<(), DriverError>;
    /// Stops the node from booting the ramdisk (it boots its own disk again).
    async fn clean_up_ramdisk(&self, node: &Node) -> Result<(), DriverError>;
    /// [`BootInterface::prepare_ramdisk`] with extra kernel parameters for the ramdisk (the
    /// inspection callback URL). Interfaces that cannot pass parameters ignore them.
    async fn prepare_ramdisk_with(
        &self,
        node: &Node,
        _kernel_params: &[String],
    ) -> Result<(), DriverError> {
        self.prepare_ramdisk(node).await
    }
}

/// Where an inspection that finishes elsewhere (the inspection service) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InspectionStatus {
    Running,
    Finished,
    Failed(String),
}

#[async_trait]
pub trait InspectInterface: Validate {
    async fn inspect(&self, node: &mut Node) -> Result<Outcome, DriverError>;
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
    async fn unrescue(&self, node: &mut Node) -> Result<(), DriverError>;
    /// Undoes what a failed or aborted rescue left behind.
    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError>;
}
