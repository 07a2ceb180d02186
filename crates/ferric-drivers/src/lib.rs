//! Ferric's drivers: the interfaces the conductor drives a machine through (power,
//! management, deploy, inspect, rescue, …) as traits, their implementations, and the hardware
//! types that compose them (`reference/ironic.md` §7).
//!
//! Theory of operation: a node names a hardware type (`driver`) and, per interface kind, an
//! implementation (`power_interface`, …). [`Drivers`] holds the enabled hardware types, fills
//! a new node's unset interfaces with defaults and builds a node's [`Interfaces`]. Drivers do
//! no bookkeeping of their own: they act on the hardware and write what they learn into the
//! node they are handed; the conductor owns leases, states and saving.

pub mod agent_client;
mod agent_pin;
pub mod agent_rescue;
pub mod agent_steps;
pub mod autodetect;
mod bmc;
mod bmc_state;
pub mod boot_arch;
pub mod boot_iso;
pub mod boot_mode;
mod configdrive;
pub mod console;
pub mod dhcp;
pub mod direct;
mod enabled;
mod error;
pub mod fake;
pub mod fast_track;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod given_iso;
pub mod glance;
mod hardware;
mod hardware_types;
pub mod image_cache;
pub mod images;
pub mod inspect;
pub mod interfaces;
pub mod ipmi;
pub mod ipxe;
pub mod kernel_params;
pub mod keystone_session;
mod measured;
pub mod network;
pub mod noop;
pub mod oci;
pub mod oci_registry;
pub mod partition_image;
pub mod peers;
pub mod raid;
pub mod ramdisk_deploy;
pub mod ramdisk_logs;
mod redfish;
pub mod settings;
#[cfg(feature = "simulator")]
pub mod simulator;
mod step_kind;
pub mod switch;
pub mod vmedia;

pub use bmc::BmcSettings;
pub use enabled::{InterfaceSettings, known_implementations};
pub use error::{Component, DriverError};
pub use fast_track::FastTrackSettings;
pub use hardware::{Drivers, HARDWARE_TYPES, HardwareType, Interfaces, OfferedStep};
pub use interfaces::{
    BiosChange, BiosValue, BootDevice, BootDeviceSetting, BootMode, FirmwareUpdate, ImageChecksum,
    Indicator, IndicatorState, Inspection, InspectionStatus, OutOfBand, Outcome, PowerAction,
    StepCall, StepDef, StepKind, VendorInterface, VendorMethod,
};
pub use network::{Network, NetworkInterface, PortDrift};
pub use settings::{
    AgentVerifyCa, BootSettings, DeploySettings, DownloadSource, DriverSettings, EraseSettings,
    InspectorSettings, LogsCollect,
};
