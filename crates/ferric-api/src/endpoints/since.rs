//! The microversion each endpoint appeared in, by name: the declarations in this module's
//! parent and the handlers' finer checks name these instead of repeating numbers.

use ferric_model::Microversion;
use ferric_model::microversion::gate;

/// `PUT /v1/nodes/{node}/states/raid` and the RAID logical disk properties of a driver.
pub(crate) const RAID: Microversion = Microversion::new(12);
/// The ramdisk agent's `lookup` and `heartbeat`.
pub(crate) const RAMDISK: Microversion = Microversion::new(22);
/// Portgroups.
pub(crate) const PORTGROUPS: Microversion = Microversion::new(23);
/// A portgroup's ports and a node's portgroups.
pub(crate) const PORTGROUP_SUBRESOURCES: Microversion = Microversion::new(24);
/// A node's VIFs.
pub(crate) const VIFS: Microversion = Microversion::new(28);
/// `PUT /v1/nodes/{node}/management/inject_nmi`.
pub(crate) const INJECT_NMI: Microversion = Microversion::new(29);
/// Attaching and detaching virtual media (`POST`/`DELETE …/vmedia`).
pub(crate) const VMEDIA: Microversion = Microversion::new(89);
/// Listing virtual media (`GET …/vmedia`).
pub(crate) const VMEDIA_LIST: Microversion = Microversion::new(93);
/// Volume connectors and targets.
pub(crate) const VOLUME: Microversion = Microversion::new(32);
/// A node's traits.
pub(crate) const TRAITS: Microversion = Microversion::new(37);
/// A node's BIOS settings.
pub(crate) const BIOS: Microversion = Microversion::new(40);
/// Conductors.
pub(crate) const CONDUCTORS: Microversion = Microversion::new(49);
/// Allocations.
pub(crate) const ALLOCATIONS: Microversion = Microversion::new(52);
/// `POST /v1/events`.
pub(crate) const EVENTS: Microversion = Microversion::new(54);
/// Deploy templates.
pub(crate) const DEPLOY_TEMPLATES: Microversion = Microversion::new(55);
/// A node's boot mode and secure boot.
pub(crate) const BOOT_MODE: Microversion = Microversion::new(76);
/// A node's history.
pub(crate) const HISTORY: Microversion = Microversion::new(78);
/// A node's inventory.
pub(crate) const INVENTORY: Microversion = Microversion::new(81);
/// Shards.
pub(crate) const SHARDS: Microversion = Microversion::new(82);
/// A node's children.
pub(crate) const CHILDREN: Microversion = Microversion::new(83);
/// Built-in inspection's `continue_inspection` answer (1.1 keeps the inspector's form).
pub(crate) const CONTINUE_INSPECTION: Microversion = Microversion::new(84);
/// A node's firmware components.
pub(crate) const FIRMWARE: Microversion = Microversion::new(86);
/// Inspection rules.
pub(crate) const INSPECTION_RULES: Microversion = Microversion::new(96);
/// Runbooks.
pub(crate) const RUNBOOKS: Microversion = Microversion::new(92);
/// A runbook's traits.
pub(crate) const RUNBOOK_TRAITS: Microversion = gate::RUNBOOK_TRAITS;
