//! Resource records shared by storage, API and conductor: nodes, ports, portgroups, chassis,
//! conductors, leases, history, allocations, BIOS settings, inventories, deploy templates,
//! runbooks and inspection rules.
//!
//! These are plain data: what the database stores and hands back. They hold no behaviour beyond
//! sane defaults, so the API can map them to its wire views and the conductor can change them
//! without either depending on the storage crate's internals. Every JSON-ish field is a
//! [`JsonObject`] (never `null`), which is how the Bare Metal API shows them (`{}` when empty).

mod allocation;
mod conductor;
mod ident;
mod inspection_rule;
mod interface;
mod node;
mod port;
mod template;
mod volume;

pub use allocation::{
    Allocation, AllocationState, BiosSetting, FirmwareComponent, NodeInventory,
    UnknownAllocationState,
};
pub use conductor::{Conductor, NodeHistoryEntry, NodeLease};
pub use ident::Ident;
pub use inspection_rule::{INSPECTION_PHASE_MAIN, InspectionRule};
pub use interface::InterfaceKind;
pub use node::{Node, PowerState, UnknownPowerState};
pub use port::{Chassis, Port, Portgroup, TENANT_VIF_KEY, clear_vif};
pub use template::{DeployStep, DeployTemplate, Runbook, RunbookStep, STEP_INTERFACES};
pub use volume::{VOLUME_CONNECTOR_TYPES, VolumeConnector, VolumeTarget};

/// A JSON object, as stored in `driver_info`, `properties`, `extra` and friends.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
