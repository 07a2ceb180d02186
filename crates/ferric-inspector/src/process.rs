//! Processing of what an inspection ramdisk sends (`reference/ironic.md` §4.4, §5.1 hooks):
//! the one piece of code both inspection paths share — the inspection service's
//! `POST /v1/continue` and the conductor's `agent` inspect interface behind
//! `POST /v1/continue_inspection`.
//!
//! It is pure: it reads the node, its ports and the payload and says what should change
//! ([`Processed`]); whoever calls it (the service or the conductor) writes the result.
//! The steps follow ironic-inspector's default hooks in their order: `ramdisk_error`,
//! `root_disk_selection`, `scheduler`, `validate_interfaces` (ports per `add_ports`), then
//! Ironic's `parse-lldp` (`lldp.rs`: `plugin_data.parsed_lldp`, whenever a NIC reported LLDP)
//! and `local-link-connection` (`Processed::local_links`, for the ports).

use crate::mac::normalize_mac;
use std::collections::BTreeSet;

use ferric_model::resources::{JsonObject, Node, Port};
use serde_json::Value;

const GIB: u64 = 1 << 30;
/// Disks smaller than this are never picked as the root disk without hints (IPA's rule).
const MIN_ROOT_DISK: u64 = 4 * GIB;
/// The scheduler properties inspection fills.
pub const SCHEDULER_PROPERTIES: [&str; 4] = ["cpus", "memory_mb", "local_gb", "cpu_arch"];

/// Which NICs get a port (`[processing]add_ports`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AddPorts {
    /// Only the NIC the machine network-booted from; `active` when the ramdisk did not say.
    #[default]
    Pxe,
    /// NICs with an IP address.
    Active,
    /// Every NIC with a MAC.
    All,
    /// None.
    Disabled,
}

impl std::str::FromStr for AddPorts {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "pxe" => Ok(Self::Pxe),
            "active" => Ok(Self::Active),
            "all" => Ok(Self::All),
            "disabled" => Ok(Self::Disabled),
            other => Err(format!(
                "Invalid add_ports \"{other}\"; expected pxe, active, all or disabled."
            )),
        }
    }
}

/// How processing treats a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessingConfig {
    pub add_ports: AddPorts,
    /// Replace scheduler properties the node already has. Off by default: seed 002's policy
    /// (the callback is unauthenticated, so it only fills what is missing).
    pub overwrite_existing: bool,
    /// `local_gb` is the root disk's size in GiB minus one, leaving room for partitioning.
    pub disk_partitioning_spacing: bool,
    /// Data without a NIC is invalid (a ramdisk always has one; a BMC may list none).
    pub require_interfaces: bool,
}

impl Default for ProcessingConfig {
    fn default() -> Self {
        Self {
            add_ports: AddPorts::Pxe,
            overwrite_existing: false,
            disk_partitioning_spacing: true,
            require_interfaces: true,
        }
    }
}

/// Why the data cannot be used; the inspection fails with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessingError {
    #[error("The inspection ramdisk reported an error: {0}")]
    Ramdisk(String),
    #[error("Invalid inspection data: {0}")]
    Invalid(String),
    #[error("No disk matches the root device hints {hints}; fix properties.root_device.")]
    NoRootDisk { hints: String },
}

/// One network interface of the inventory, as far as processing needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub mac: String,
    pub has_ip: bool,
}

/// What processing decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Processed {
    /// The node's properties after processing (the whole object).
    pub properties: JsonObject,
    /// The scheduler properties that were set (names), for logs.
    pub updated: Vec<&'static str>,
    /// MACs (lower case) that need a new port, with whether the port boots from the network.
    pub new_ports: Vec<(String, bool)>,
    /// Per MAC (lower case), the `local_link_connection` its port gets from LLDP (Ironic's
    /// `local-link-connection` hook; [`crate::service::fill_local_links`] writes it).
    pub local_links: Vec<(String, JsonObject)>,
    /// The chosen root disk, as the inventory describes it.
    pub root_disk: Option<Value>,
    /// Every valid interface of the inventory.
    pub interfaces: Vec<Interface>,
    /// The inventory (`GET …/inventory`) and everything else the ramdisk sent (plugin data).
    pub inventory: JsonObject,
    pub plugin_data: JsonObject,
}

/// Every MAC the payload names (interfaces, the boot interface), for looking the node up.
pub fn payload_macs(payload: &Value) -> BTreeSet<String> {
    let mut macs = BTreeSet::new();
    if let Some(interfaces) = payload
        .pointer("/inventory/interfaces")
        .and_then(Value::as_array)
    {
        for interface in interfaces {
            if let Some(mac) = interface
                .get("mac_address")
                .and_then(Value::as_str)
                .and_then(normalize_mac)
            {
                macs.insert(mac);
            }
        }
    }
    if let Some(mac) = boot_interface(payload) {
        macs.insert(mac);
    }
    macs
}

/// The BMC addresses the payload reports (v4 and v6), for looking the node up.
pub fn payload_bmc_addresses(payload: &Value) -> BTreeSet<String> {
    ["bmc_address", "bmc_v6address"]
        .iter()
        .filter_map(|key| {
            payload
                .pointer(&format!("/inventory/{key}"))
                .and_then(Value::as_str)
        })
        .filter(|address| !address.is_empty() && *address != "0.0.0.0" && *address != "::/0")
        .map(str::to_owned)
        .collect()
}

/// The MAC the machine booted the ramdisk from, as IPA reports it (`boot_interface` may be
/// `01-aa-bb-…` from `BOOTIF`).
fn boot_interface(payload: &Value) -> Option<String> {
    let text = payload
        .get("boot_interface")
        .and_then(Value::as_str)
        .or_else(|| {
            payload
                .pointer("/inventory/boot/pxe_interface")
                .and_then(Value::as_str)
        })?;
    let text = match text.split_once('-') {
        Some(("01", rest)) if rest.len() == 17 => rest,
        _ => text,
    };
    normalize_mac(text)
}

/// Runs the processing steps on `payload` for `node`, whose ports are `ports`.
pub fn process(
    node: &Node,
    ports: &[Port],
    payload: &Value,
    config: &ProcessingConfig,
) -> Result<Processed, ProcessingError> {
    let body = payload
        .as_object()
        .ok_or_else(|| ProcessingError::Invalid("the payload is not a JSON object".to_owned()))?;
    // ramdisk_error
    if let Some(error) = body.get("error").filter(|error| !error.is_null()) {
        let message = error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_owned);
        return Err(ProcessingError::Ramdisk(message));
    }
    let inventory = body
        .get("inventory")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ProcessingError::Invalid("the payload has no \"inventory\" object".to_owned())
        })?;

    let interfaces = valid_interfaces(inventory, config.require_interfaces)?;
    let root_disk = select_root_disk(node, inventory)?;

    let mut properties = node.properties.clone();
    let mut updated = Vec::new();
    let mut set = |name: &'static str, value: Option<Value>| {
        let Some(value) = value else { return };
        let present = properties.get(name).is_some_and(|old| !old.is_null());
        if present && !config.overwrite_existing {
            return;
        }
        properties.insert(name.to_owned(), value);
        updated.push(name);
    };
    let cpu = inventory.get("cpu");
    set(
        "cpus",
        cpu.and_then(|cpu| cpu.get("count"))
            .and_then(as_u64)
            .map(Value::from),
    );
    set(
        "cpu_arch",
        cpu.and_then(|cpu| cpu.get("architecture"))
            .and_then(Value::as_str)
            .filter(|arch| !arch.is_empty())
            .map(Value::from),
    );
    set("memory_mb", memory_mb(inventory).map(Value::from));
    let local_gb = root_disk
        .as_ref()
        .and_then(|disk| disk.get("size"))
        .and_then(as_u64)
        .map(|size| {
            let gib = size / GIB;
            if config.disk_partitioning_spacing {
                gib.saturating_sub(1)
            } else {
                gib
            }
        })
        .unwrap_or(0);
    set("local_gb", Some(local_gb.into()));

    let new_ports = ports_to_add(
        &interfaces,
        boot_interface(payload),
        ports,
        config.add_ports,
    );

    let mut plugin_data = body.clone();
    plugin_data.remove("inventory");
    let mut inventory = inventory.clone();
    let dropped = crate::lldp::drop_impossible_tlvs(&mut inventory, &mut plugin_data);
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "inspection data: dropped LLDP TLVs longer than 802.1AB allows"
        );
    }
    let inventory = &inventory;
    if let Some(disk) = &root_disk {
        plugin_data.insert("root_disk".to_owned(), disk.clone());
    }
    // parse_lldp: what each NIC's switch port announced, readable.
    if let Some(parsed) = crate::lldp::parsed_lldp(inventory, &plugin_data) {
        plugin_data.insert("parsed_lldp".to_owned(), parsed);
    }
    // local_link_connection: where each NIC is plugged, for the ports.
    let local_links = crate::lldp::local_link_connections(inventory, &plugin_data);
    Ok(Processed {
        properties,
        updated,
        new_ports,
        local_links,
        root_disk,
        interfaces,
        inventory: inventory.clone(),
        plugin_data,
    })
}

/// Numbers IPA sends as numbers or as strings.
fn as_u64(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
}

/// `memory.physical_mb` (from DMI), else the usable `total` in bytes rounded up to MiB.
fn memory_mb(inventory: &JsonObject) -> Option<u64> {
    let memory = inventory.get("memory")?;
    memory
        .get("physical_mb")
        .and_then(as_u64)
        .filter(|mb| *mb > 0)
        .or_else(|| {
            memory
                .get("total")
                .and_then(as_u64)
                .map(|bytes| bytes.div_ceil(1 << 20))
        })
}

/// `validate_interfaces`: the inventory's NICs with valid MACs, loopback dropped; at least one.
fn valid_interfaces(
    inventory: &JsonObject,
    required: bool,
) -> Result<Vec<Interface>, ProcessingError> {
    let listed = match inventory.get("interfaces").and_then(Value::as_array) {
        Some(listed) => listed.as_slice(),
        None if !required => &[],
        None => {
            return Err(ProcessingError::Invalid(
                "the inventory has no \"interfaces\" list".to_owned(),
            ));
        }
    };
    let mut interfaces = Vec::new();
    for interface in listed {
        let name = interface
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name == "lo" {
            continue;
        }
        let Some(mac) = interface
            .get("mac_address")
            .and_then(Value::as_str)
            .and_then(normalize_mac)
        else {
            tracing::debug!(
                interface = name,
                "inspection: skipping a NIC without a valid MAC"
            );
            continue;
        };
        if mac == "00:00:00:00:00:00" {
            continue;
        }
        let has_ip = ["ipv4_address", "ipv6_address"].iter().any(|key| {
            interface
                .get(*key)
                .and_then(Value::as_str)
                .is_some_and(|ip| !ip.is_empty())
        });
        interfaces.push(Interface {
            name: name.to_owned(),
            mac,
            has_ip,
        });
    }
    if interfaces.is_empty() && required {
        return Err(ProcessingError::Invalid(
            "no network interface with a valid MAC address was reported".to_owned(),
        ));
    }
    Ok(interfaces)
}

fn ports_to_add(
    interfaces: &[Interface],
    pxe_mac: Option<String>,
    ports: &[Port],
    policy: AddPorts,
) -> Vec<(String, bool)> {
    let chosen: Vec<&Interface> = match policy {
        AddPorts::Disabled => Vec::new(),
        AddPorts::All => interfaces.iter().collect(),
        AddPorts::Active => interfaces.iter().filter(|i| i.has_ip).collect(),
        AddPorts::Pxe => match &pxe_mac {
            Some(mac) if interfaces.iter().any(|i| &i.mac == mac) => {
                interfaces.iter().filter(|i| &i.mac == mac).collect()
            }
            _ => interfaces.iter().filter(|i| i.has_ip).collect(),
        },
    };
    let known: BTreeSet<String> = ports
        .iter()
        .map(|port| port.address.to_ascii_lowercase())
        .collect();
    chosen
        .into_iter()
        .filter(|interface| !known.contains(&interface.mac))
        .map(|interface| {
            let pxe = pxe_mac
                .as_ref()
                .is_none_or(|boot_mac| boot_mac == &interface.mac);
            (interface.mac.clone(), pxe)
        })
        .collect()
}

/// `root_disk_selection`: the disk matching `properties.root_device` hints, else the smallest
/// disk of at least 4 GiB (ties by name). `None` when the machine has no usable disk.
fn select_root_disk(node: &Node, inventory: &JsonObject) -> Result<Option<Value>, ProcessingError> {
    let disks: Vec<&Value> = inventory
        .get("disks")
        .and_then(Value::as_array)
        .map(|disks| disks.iter().collect())
        .unwrap_or_default();
    let hints = node
        .properties
        .get("root_device")
        .and_then(Value::as_object)
        .filter(|hints| !hints.is_empty());
    if let Some(hints) = hints {
        return disks
            .into_iter()
            .find(|disk| {
                hints
                    .iter()
                    .all(|(key, hint)| hint_matches(disk, key, hint))
            })
            .cloned()
            .map(Some)
            .ok_or_else(|| ProcessingError::NoRootDisk {
                hints: Value::Object(hints.clone()).to_string(),
            });
    }
    let mut candidates: Vec<(u64, &str, &Value)> = disks
        .into_iter()
        .filter_map(|disk| {
            let size = disk.get("size").and_then(as_u64)?;
            let name = disk.get("name").and_then(Value::as_str).unwrap_or_default();
            (size >= MIN_ROOT_DISK).then_some((size, name, disk))
        })
        .collect();
    candidates.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    Ok(candidates.first().map(|(_, _, disk)| (*disk).clone()))
}

/// One root device hint against one disk. `size` is in GiB and may carry an operator
/// (`>= 100`); strings compare exactly (`name` also without `/dev/`); `rotational` as a bool.
fn hint_matches(disk: &Value, key: &str, hint: &Value) -> bool {
    let field = disk.get(key);
    match key {
        "size" => {
            let Some(size) = disk.get("size").and_then(as_u64) else {
                return false;
            };
            let gib = size / GIB;
            match hint {
                Value::Number(number) => number.as_u64() == Some(gib),
                Value::String(text) => size_hint_matches(text, gib),
                _ => false,
            }
        }
        "rotational" => {
            let wanted = match hint {
                Value::Bool(flag) => Some(*flag),
                Value::String(text) => match text.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => Some(true),
                    "false" | "0" | "no" | "off" => Some(false),
                    _ => None,
                },
                _ => None,
            };
            wanted.is_some() && field.and_then(Value::as_bool) == wanted
        }
        "name" => {
            let (Some(name), Some(hint)) = (field.and_then(Value::as_str), hint.as_str()) else {
                return false;
            };
            let hint = hint.strip_prefix("s== ").unwrap_or(hint);
            name == hint || name.trim_start_matches("/dev/") == hint.trim_start_matches("/dev/")
        }
        _ => match (field, hint) {
            (Some(Value::String(value)), Value::String(hint)) => {
                let hint = hint.strip_prefix("s== ").unwrap_or(hint);
                value.eq_ignore_ascii_case(hint)
            }
            (Some(value), hint) => value == hint,
            (None, _) => false,
        },
    }
}

fn size_hint_matches(text: &str, gib: u64) -> bool {
    let text = text.trim();
    for (op, test) in [
        (">=", gib_ge as fn(u64, u64) -> bool),
        ("<=", gib_le),
        ("==", gib_eq),
        ("!=", gib_ne),
        (">", gib_gt),
        ("<", gib_lt),
    ] {
        if let Some(rest) = text.strip_prefix(op) {
            return rest.trim().parse().is_ok_and(|wanted| test(gib, wanted));
        }
    }
    text.parse().is_ok_and(|wanted: u64| wanted == gib)
}

fn gib_ge(a: u64, b: u64) -> bool {
    a >= b
}
fn gib_le(a: u64, b: u64) -> bool {
    a <= b
}
fn gib_eq(a: u64, b: u64) -> bool {
    a == b
}
fn gib_ne(a: u64, b: u64) -> bool {
    a != b
}
fn gib_gt(a: u64, b: u64) -> bool {
    a > b
}
fn gib_lt(a: u64, b: u64) -> bool {
    a < b
}
