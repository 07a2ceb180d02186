//! The `redfish` inspect interface: out-of-band inspection through the BMC, no ramdisk
//! (`reference/ironic.md` §5.2, last paragraph; Ironic's `redfish` inspect interface).
//!
//! Theory of operation: the ComputerSystem and the collections it links — `Processors`,
//! `Memory`, `SimpleStorage`, `Storage` (volumes, else drives) and `EthernetInterfaces` — are
//! read and described in the ramdisk's inspection data format (§4.4), so the conductor
//! processes them with the same code as an agent's data (`ferric_inspector::process`: the
//! scheduler properties without overwriting what the operator set, the root disk — the
//! smallest of at least 4 GiB, or the one `properties.root_device` names — and `local_gb`,
//! the stored inventory) and the inspection ends at once. What the BMC does not link is not
//! asked for; a linked collection it cannot serve (4xx, 5xx, not JSON) counts as absent, as
//! Ironic's does; only authentication and connection failures fail the inspection. Without a
//! CPU count, CPU architecture or memory size (from the BMC or already in the node's
//! properties) the inspection fails naming the BMC and what it lacked.
//!
//! Mappings (Ironic's): CPUs are the processors' `TotalThreads` summed, else
//! `ProcessorSummary.LogicalProcessorCount`, else `ProcessorSummary.Count`; the architecture is
//! the first processor's `InstructionSet` (`x86-64` → `x86_64`, `ARM-A64` → `aarch64`, …), else
//! its `ProcessorArchitecture` (`x86` → `x86_64`, `ARM` → `arm`, …); memory is
//! `MemorySummary.TotalSystemMemoryGiB` × 1024, else the DIMMs' `CapacityMiB` summed. Ports
//! are only created for NICs whose `Status.State` is `Enabled`.

use async_trait::async_trait;
use ferric_model::resources::Node;
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::Redfish;
use super::client::RedfishError;
use super::info::RedfishInfo;
use crate::Component;
use crate::DriverError;
use crate::interfaces::{InspectInterface, Inspection, OutOfBand, Validate};

/// `InstructionSet` → `cpu_arch` (Ironic's `PROCESSOR_INSTRUCTION_SET_MAP`).
const INSTRUCTION_SETS: [(&str, &str); 7] = [
    ("x86-64", "x86_64"),
    ("x86", "i686"),
    ("ARM-A64", "aarch64"),
    ("ARM-A32", "arm"),
    ("IA-64", "ia64"),
    ("MIPS64", "mips64"),
    ("MIPS32", "mips"),
];

/// `ProcessorArchitecture` → `cpu_arch` (Ironic's `CPU_ARCH_MAP`).
const ARCHITECTURES: [(&str, &str); 4] = [
    ("x86", "x86_64"),
    ("IA-64", "ia64"),
    ("ARM", "arm"),
    ("MIPS", "mips"),
];

const MIB: u64 = 1 << 20;

/// The `redfish` inspect interface.
#[derive(Debug, Clone)]
pub(crate) struct RedfishInspect {
    pub(crate) redfish: Redfish,
}

/// One ComputerSystem being read.
struct Reader<'a> {
    redfish: &'a Redfish,
    info: &'a RedfishInfo,
}

impl Reader<'_> {
    fn bmc(&self) -> String {
        format!("Redfish BMC {}", self.info.address)
    }

    /// A resource the BMC may not offer: `None` when it refuses or fails to serve it (logged);
    /// authentication, connection and timeout failures are errors.
    async fn optional(&self, path: &str) -> Result<Option<Value>, DriverError> {
        match self
            .redfish
            .clients()
            .send(self.info, Method::GET, path, None)
            .await
        {
            Ok(answer) => Ok(Some(answer.body)),
            Err(
                error @ (RedfishError::Refused { .. }
                | RedfishError::Server { .. }
                | RedfishError::Protocol { .. }),
            ) => {
                tracing::debug!(bmc = %self.info.address, %path, %error, "inspection: resource not available");
                Ok(None)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The members of the collection `resource[link]` links, read one by one; empty when the
    /// resource links none or the BMC cannot serve it.
    async fn linked_members(
        &self,
        resource: &Value,
        link: &str,
    ) -> Result<Vec<Value>, DriverError> {
        let Some(path) = odata_id(resource.get(link)) else {
            return Ok(Vec::new());
        };
        let Some(collection) = self.optional(path).await? else {
            return Ok(Vec::new());
        };
        self.members_of(&collection).await
    }

    async fn members_of(&self, collection: &Value) -> Result<Vec<Value>, DriverError> {
        let mut members = Vec::new();
        for path in super::system_members(collection) {
            if let Some(member) = self.optional(path).await? {
                members.push(member);
            }
        }
        Ok(members)
    }

    /// The disks: `SimpleStorage` devices, plus per `Storage` its volumes (what an operating
    /// system sees), else its drives.
    async fn disks(&self, system: &Value) -> Result<Vec<Value>, DriverError> {
        let mut disks = Vec::new();
        for storage in self.linked_members(system, "SimpleStorage").await? {
            for device in array(&storage, "Devices") {
                if enabled_or_unknown(device) {
                    disks.extend(disk(device, None));
                }
            }
        }
        for storage in self.linked_members(system, "Storage").await? {
            let volumes = self.linked_members(&storage, "Volumes").await?;
            let volumes: Vec<Value> = volumes
                .iter()
                .filter(|volume| enabled_or_unknown(volume))
                .filter_map(|volume| disk(volume, None))
                .collect();
            if !volumes.is_empty() {
                disks.extend(volumes);
                continue;
            }
            for link in array(&storage, "Drives") {
                let Some(path) = odata_id(Some(link)) else {
                    continue;
                };
                if let Some(drive) = self.optional(path).await?
                    && enabled_or_unknown(&drive)
                {
                    let rotational = match drive.get("MediaType").and_then(Value::as_str) {
                        Some("HDD") => Some(true),
                        Some("SSD") => Some(false),
                        _ => None,
                    };
                    disks.extend(disk(&drive, rotational));
                }
            }
        }
        Ok(disks)
    }

    /// Reads the system at `path` and describes it.
    async fn read(&self, path: &str, system: &Value) -> Result<Hardware, DriverError> {
        let processors: Vec<Value> = self
            .linked_members(system, "Processors")
            .await?
            .into_iter()
            .filter(|processor| {
                processor
                    .get("ProcessorType")
                    .and_then(Value::as_str)
                    .is_none_or(|kind| kind == "CPU")
            })
            .collect();
        let memory = match memory_summary_mb(system) {
            Some(mb) => Some(mb),
            None => dimms_mb(&self.linked_members(system, "Memory").await?),
        };
        let disks = self.disks(system).await?;
        let nics = self.linked_members(system, "EthernetInterfaces").await?;
        Ok(Hardware::describe(
            self.bmc(),
            path,
            &self.info.address,
            system,
            &processors,
            memory,
            disks,
            &nics,
        ))
    }
}

/// What was read, in the ramdisk's format.
struct Hardware {
    bmc: String,
    system_path: String,
    inventory: Map<String, Value>,
    port_macs: Vec<String>,
}

impl Hardware {
    #[allow(clippy::too_many_arguments)]
    fn describe(
        bmc: String,
        system_path: &str,
        address: &str,
        system: &Value,
        processors: &[Value],
        memory_mb: Option<u64>,
        disks: Vec<Value>,
        nics: &[Value],
    ) -> Self {
        let mut inventory = Map::new();

        let mut cpu = Map::new();
        if let Some(count) = cpu_count(system, processors) {
            cpu.insert("count".into(), count.into());
        }
        if let Some(arch) = cpu_arch(processors) {
            cpu.insert("architecture".into(), arch.into());
        }
        let first = processors.first();
        if let Some(model) = first
            .and_then(|processor| processor.get("Model"))
            .or_else(|| system.pointer("/ProcessorSummary/Model"))
            .and_then(Value::as_str)
        {
            cpu.insert("model_name".into(), model.into());
        }
        if let Some(mhz) = first
            .and_then(|processor| processor.get("MaxSpeedMHz"))
            .and_then(Value::as_u64)
        {
            // IPA reports the frequency as a string.
            cpu.insert("frequency".into(), mhz.to_string().into());
        }
        let sockets = if processors.is_empty() {
            system
                .pointer("/ProcessorSummary/Count")
                .and_then(Value::as_u64)
        } else {
            Some(processors.len() as u64)
        };
        if let Some(sockets) = sockets {
            cpu.insert("socket_count".into(), sockets.into());
        }
        inventory.insert("cpu".into(), Value::Object(cpu));

        if let Some(mb) = memory_mb {
            inventory.insert(
                "memory".into(),
                json!({"physical_mb": mb, "total": mb * MIB}),
            );
        }
        inventory.insert("disks".into(), Value::Array(disks));

        let mut interfaces = Vec::new();
        let mut port_macs = Vec::new();
        for nic in nics {
            let Some(mac) = ["MACAddress", "PermanentMACAddress"]
                .iter()
                .filter_map(|key| nic.get(*key).and_then(Value::as_str))
                .find_map(normalize_mac)
            else {
                continue;
            };
            if nic.pointer("/Status/State").and_then(Value::as_str) == Some("Enabled") {
                port_macs.push(mac.clone());
            }
            let mut interface = Map::new();
            let name = nic
                .get("Id")
                .or_else(|| nic.get("Name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            interface.insert("name".into(), name.into());
            interface.insert("mac_address".into(), mac.into());
            let ipv4 = nic
                .pointer("/IPv4Addresses/0/Address")
                .and_then(Value::as_str);
            interface.insert("ipv4_address".into(), ipv4.into());
            let ipv6 = nic
                .pointer("/IPv6Addresses/0/Address")
                .and_then(Value::as_str);
            interface.insert("ipv6_address".into(), ipv6.into());
            if let Some(link) = nic.get("LinkStatus").and_then(Value::as_str) {
                interface.insert("has_carrier".into(), (link == "LinkUp").into());
            }
            if let Some(speed) = nic.get("SpeedMbps").and_then(Value::as_u64) {
                interface.insert("speed_mbps".into(), speed.into());
            }
            interfaces.push(Value::Object(interface));
        }
        inventory.insert("interfaces".into(), Value::Array(interfaces));

        let mut vendor = Map::new();
        for (key, field) in [
            ("product_name", "Model"),
            ("serial_number", "SerialNumber"),
            ("manufacturer", "Manufacturer"),
        ] {
            if let Some(value) = system.get(field).and_then(Value::as_str) {
                vendor.insert(key.into(), value.into());
            }
        }
        if let Some(version) = system.get("BiosVersion").and_then(Value::as_str) {
            vendor.insert("firmware".into(), json!({"version": version}));
        }
        inventory.insert("system_vendor".into(), Value::Object(vendor));
        if let Some(mode) = boot_mode(system) {
            inventory.insert("boot".into(), json!({"current_boot_mode": mode}));
        }
        if let Some(hostname) = system.get("HostName").and_then(Value::as_str) {
            inventory.insert("hostname".into(), hostname.into());
        }
        if let Some(host) = reqwest::Url::parse(address).ok().and_then(|url| {
            url.host_str()
                .map(|host| host.trim_matches(['[', ']']).to_owned())
        }) {
            let key = if host.contains(':') {
                "bmc_v6address"
            } else {
                "bmc_address"
            };
            inventory.insert(key.into(), host.into());
        }
        Self {
            bmc,
            system_path: system_path.to_owned(),
            inventory,
            port_macs,
        }
    }

    /// Fails when neither the BMC nor the node's properties give a scheduler property the
    /// BMC is expected to report (Ironic's `ESSENTIAL_PROPERTIES` check).
    fn check_complete(&self, node: &Node) -> Result<(), DriverError> {
        let known = |property: &str| node.properties.get(property).is_some_and(|v| !v.is_null());
        let cpu = self.inventory.get("cpu");
        let mut missing = Vec::new();
        if cpu.and_then(|cpu| cpu.get("count")).is_none() && !known("cpus") {
            missing.push(
                "the CPU count (cpus: no ProcessorSummary.Count, LogicalProcessorCount or \
                 Processors with TotalThreads)",
            );
        }
        if cpu.and_then(|cpu| cpu.get("architecture")).is_none() && !known("cpu_arch") {
            missing.push(
                "the CPU architecture (cpu_arch: no Processors with a known InstructionSet or \
                 ProcessorArchitecture)",
            );
        }
        if self.inventory.get("memory").is_none() && !known("memory_mb") {
            missing.push(
                "the memory size (memory_mb: no MemorySummary.TotalSystemMemoryGiB and no \
                 Memory with CapacityMiB)",
            );
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(DriverError::failed(
            Component::Bmc,
            format!(
                "{}: the system {} does not report {}. Set the missing properties on the node \
             (baremetal node set --property …) and inspect again, or inspect in-band with \
             inspect_interface=agent.",
                self.bmc,
                self.system_path,
                missing.join(", nor ")
            ),
        ))
    }
}

fn odata_id(link: Option<&Value>) -> Option<&str> {
    link?.get("@odata.id")?.as_str()
}

fn array<'a>(resource: &'a Value, key: &str) -> &'a [Value] {
    resource
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Absent, disabled or failed parts are left out; parts without a status are counted.
fn enabled_or_unknown(resource: &Value) -> bool {
    resource
        .pointer("/Status/State")
        .and_then(Value::as_str)
        .is_none_or(|state| state == "Enabled")
}

/// A disk in the inventory's format, or `None` without a size.
fn disk(resource: &Value, rotational: Option<bool>) -> Option<Value> {
    let size = resource.get("CapacityBytes").and_then(Value::as_u64)?;
    let text = |key: &str| resource.get(key).and_then(Value::as_str);
    let name = text("Name").or_else(|| text("Id")).unwrap_or_default();
    let mut disk = json!({
        "name": name,
        "size": size,
        "model": text("Model"),
        "serial": text("SerialNumber"),
        "vendor": text("Manufacturer"),
    });
    if let Some(rotational) = rotational {
        disk["rotational"] = rotational.into();
    }
    Some(disk)
}

fn cpu_count(system: &Value, processors: &[Value]) -> Option<u64> {
    let threads: u64 = processors
        .iter()
        .filter_map(|processor| processor.get("TotalThreads").and_then(Value::as_u64))
        .sum();
    if threads > 0 {
        return Some(threads);
    }
    [
        "/ProcessorSummary/LogicalProcessorCount",
        "/ProcessorSummary/Count",
    ]
    .iter()
    .filter_map(|pointer| system.pointer(pointer).and_then(Value::as_u64))
    .find(|count| *count > 0)
}

fn cpu_arch(processors: &[Value]) -> Option<&'static str> {
    let lookup = |table: &[(&str, &'static str)], key: &str| {
        processors.iter().find_map(|processor| {
            let name = processor.get(key).and_then(Value::as_str)?;
            table
                .iter()
                .find(|(redfish, _)| *redfish == name)
                .map(|(_, arch)| *arch)
        })
    };
    lookup(&INSTRUCTION_SETS, "InstructionSet")
        .or_else(|| lookup(&ARCHITECTURES, "ProcessorArchitecture"))
}

fn memory_summary_mb(system: &Value) -> Option<u64> {
    let gib = system
        .pointer("/MemorySummary/TotalSystemMemoryGiB")
        .and_then(Value::as_f64)
        .filter(|gib| *gib > 0.0)?;
    // Whole MiB: `TotalSystemMemoryGiB` may be fractional (1.5 GiB → 1536).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Some((gib * 1024.0).round() as u64)
}

fn dimms_mb(dimms: &[Value]) -> Option<u64> {
    let mb: u64 = dimms
        .iter()
        .filter(|dimm| enabled_or_unknown(dimm))
        .filter_map(|dimm| dimm.get("CapacityMiB").and_then(Value::as_u64))
        .sum();
    (mb > 0).then_some(mb)
}

fn boot_mode(system: &Value) -> Option<&'static str> {
    match system
        .pointer("/Boot/BootSourceOverrideMode")
        .and_then(Value::as_str)
    {
        Some("UEFI") => Some("uefi"),
        Some("Legacy") => Some("bios"),
        _ => None,
    }
}

/// A MAC in lower-case colon form.
fn normalize_mac(text: &str) -> Option<String> {
    let parts: Vec<&str> = text.trim().split([':', '-']).collect();
    let valid = parts.len() == 6
        && parts
            .iter()
            .all(|part| part.len() == 2 && part.chars().all(|c| c.is_ascii_hexdigit()));
    let mac = parts.join(":").to_ascii_lowercase();
    (valid && mac != "00:00:00:00:00:00").then_some(mac)
}

/// Adds `boot_mode:<mode>` to `properties.capabilities` unless it names a boot mode already
/// (Ironic's redfish inspection does the same).
fn add_boot_mode_capability(node: &mut Node, mode: &str) {
    let current = node
        .properties
        .get("capabilities")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let has_mode = current
        .split(',')
        .any(|pair| pair.split(':').next().map(str::trim) == Some("boot_mode"));
    if has_mode
        || node
            .properties
            .get("capabilities")
            .is_some_and(|v| !v.is_string() && !v.is_null())
    {
        return;
    }
    let updated = if current.trim().is_empty() {
        format!("boot_mode:{mode}")
    } else {
        format!("{current},boot_mode:{mode}")
    };
    node.properties
        .insert("capabilities".to_owned(), updated.into());
}

#[async_trait]
impl Validate for RedfishInspect {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        RedfishInfo::parse(node).map(|_| ())
    }
}

#[async_trait]
impl InspectInterface for RedfishInspect {
    async fn inspect(&self, node: &mut Node) -> Result<Inspection, DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (path, system) = self.redfish.system(&info).await?;
        let reader = Reader {
            redfish: &self.redfish,
            info: &info,
        };
        let hardware = reader.read(&path, &system).await?;
        hardware.check_complete(node)?;
        if let Some(mode) = boot_mode(&system) {
            add_boot_mode_capability(node, mode);
        }
        let count = |key: &str| {
            hardware
                .inventory
                .get(key)
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        };
        let (disks, nics) = (count("disks"), count("interfaces"));
        tracing::info!(node = %node.uuid, bmc = %info.address, disks, nics, "out-of-band inspection read the system");
        Ok(Inspection::Data(OutOfBand {
            payload: json!({ "inventory": hardware.inventory }),
            port_macs: hardware.port_macs,
            bmc: hardware.bmc,
        }))
    }

    /// Nothing waits: the inspection is over by the time `inspect` returns.
    async fn abort(&self, node: &mut Node) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: ferric_model::resources::InterfaceKind::Inspect,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processors_give_threads_and_instruction_set() {
        let processors = [
            json!({"ProcessorType": "CPU", "TotalThreads": 8, "InstructionSet": "ARM-A64",
                   "ProcessorArchitecture": "ARM"}),
            json!({"ProcessorType": "CPU", "TotalThreads": 8}),
        ];
        let system = json!({"ProcessorSummary": {"Count": 2}});
        assert_eq!(cpu_count(&system, &processors), Some(16));
        assert_eq!(cpu_arch(&processors), Some("aarch64"));
        assert_eq!(
            cpu_arch(&[json!({"ProcessorArchitecture": "x86"})]),
            Some("x86_64")
        );
        assert_eq!(cpu_arch(&[json!({"ProcessorArchitecture": "OEM"})]), None);
        let summary = json!({"ProcessorSummary": {"Count": 2, "LogicalProcessorCount": 48}});
        assert_eq!(cpu_count(&summary, &[]), Some(48));
        assert_eq!(cpu_count(&json!({"ProcessorSummary": {}}), &[]), None);
    }

    #[test]
    fn memory_from_summary_or_dimms() {
        let system = json!({"MemorySummary": {"TotalSystemMemoryGiB": 1.5}});
        assert_eq!(memory_summary_mb(&system), Some(1536));
        assert_eq!(memory_summary_mb(&json!({"MemorySummary": {}})), None);
        let dimms = [
            json!({"CapacityMiB": 8192, "Status": {"State": "Enabled"}}),
            json!({"CapacityMiB": 8192, "Status": {"State": "Absent"}}),
            json!({"CapacityMiB": 4096}),
        ];
        assert_eq!(dimms_mb(&dimms), Some(12288));
        assert_eq!(dimms_mb(&[]), None);
    }

    #[test]
    fn boot_mode_capability_is_added_once() {
        let mut node = Node::new(
            uuid::Uuid::nil(),
            "redfish",
            ferric_model::ProvisionState::Manageable,
        );
        add_boot_mode_capability(&mut node, "uefi");
        assert_eq!(node.properties["capabilities"], "boot_mode:uefi");
        add_boot_mode_capability(&mut node, "bios");
        assert_eq!(node.properties["capabilities"], "boot_mode:uefi");
        node.properties
            .insert("capabilities".into(), "secure_boot:true".into());
        add_boot_mode_capability(&mut node, "bios");
        assert_eq!(
            node.properties["capabilities"],
            "secure_boot:true,boot_mode:bios"
        );
    }

    #[test]
    fn missing_essentials_name_the_bmc_and_what_is_missing() {
        let hardware = Hardware::describe(
            "Redfish BMC http://127.0.0.1:1".to_owned(),
            "/redfish/v1/Systems/1",
            "http://127.0.0.1:1",
            &json!({"Boot": {"BootSourceOverrideMode": "UEFI"}}),
            &[],
            None,
            Vec::new(),
            &[
                json!({"MACAddress": "52:54:00:AA:BB:01", "Status": {"State": "Enabled"}}),
                json!({"MACAddress": "52:54:00:aa:bb:02", "Status": {"State": "Disabled"}}),
            ],
        );
        assert_eq!(hardware.port_macs, ["52:54:00:aa:bb:01"]);
        assert_eq!(hardware.inventory["bmc_address"], "127.0.0.1");
        assert_eq!(hardware.inventory["boot"]["current_boot_mode"], "uefi");
        let mut node = Node::new(
            uuid::Uuid::nil(),
            "redfish",
            ferric_model::ProvisionState::Manageable,
        );
        let error = hardware.check_complete(&node).unwrap_err().to_string();
        assert!(error.starts_with("Redfish BMC http://127.0.0.1:1: the system /redfish/v1/Systems/1 does not report the CPU count"), "{error}");
        assert!(
            error.contains("CPU architecture") && error.contains("memory size"),
            "{error}"
        );
        for (key, value) in [
            ("cpus", json!(2)),
            ("cpu_arch", json!("x86_64")),
            ("memory_mb", json!(2048)),
        ] {
            node.properties.insert(key.into(), value);
        }
        hardware.check_complete(&node).unwrap();
    }
}
