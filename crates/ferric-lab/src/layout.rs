//! The lab's shape: addresses, node identities derived from their index, and the files in the
//! state directory (`lab.json` is the record every command reads).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::hardware::Hardware;
use crate::machine::{Firmware, MachineInfo};

pub const DEFAULT_NAMESPACE: &str = "ferric-lab";
pub const BRIDGE: &str = "ferric-br0";
pub const BRIDGE_ADDRESS: &str = "10.231.0.1";
pub const BRIDGE_PREFIX: u8 = 24;
/// A ULA on the bridge lets dnsmasq send router advertisements: without one iPXE waits ~13 s
/// for IPv6 autoconfiguration before it does DHCPv4 (lab-facts).
pub const BRIDGE_ULA: &str = "fd0f:e771:1ab0::1/64";
pub const DHCP_RANGE: (&str, &str) = ("10.231.0.100", "10.231.0.199");
pub const DEFAULT_BOOT_URL: &str = "http://10.231.0.1:8080/boot.ipxe";
/// BMC `i` listens on the bridge address at this port + i.
pub const BMC_PORT_BASE: u16 = 8000;
/// BMC `i` answers IPMI (RMCP+, UDP) on the bridge address at this port + i: the 623 of a real
/// BMC cannot serve several machines on one address; 6230+ is VirtualBMC's convention.
pub const IPMI_PORT_BASE: u16 = 6230;
pub const MAX_NODES: u32 = 32;
pub const BMC_USERNAME: &str = "admin";
/// Random bytes in a generated BMC password (hex: twice as many characters, 20 here, IPMI
/// 2.0's limit, so Redfish and IPMI share it).
pub const PASSWORD_BYTES: usize = 10;
pub const DISK_SIZE: &str = "4G";
/// Disks per machine: two, so software RAID-1 can be shown.
pub const DISKS: usize = 2;
/// [`DISK_SIZE`] in bytes, as the BMCs report each disk.
pub const DISK_BYTES: u64 = 4 << 30;

/// Everything `lab up` decided, written to `lab.json`; later commands only read it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    pub namespace: String,
    pub bridge: String,
    pub bridge_address: String,
    pub boot_url: String,
    pub nodes: Vec<NodeState>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeState {
    #[serde(flatten)]
    pub info: MachineInfo,
    pub tap: String,
    pub bmc_port: u16,
    pub redfish_address: String,
    pub redfish_system_id: String,
    pub redfish_username: String,
    pub redfish_password: String,
    /// IPMI over LAN: the same machine and credentials on UDP. Defaults let a `lab.json` from
    /// before IPMI still load.
    #[serde(default = "bridge_address")]
    pub ipmi_address: String,
    #[serde(default)]
    pub ipmi_port: u16,
    #[serde(default)]
    pub ipmi_username: String,
    #[serde(default)]
    pub ipmi_password: String,
    /// `lab up --firmware`; a `lab.json` from before it had BIOS machines.
    #[serde(default = "Firmware::legacy")]
    pub firmware: Firmware,
    /// The machine's devices; a `lab.json` from before profiles is all virtio.
    #[serde(default)]
    pub hardware: Hardware,
}

fn bridge_address() -> String {
    BRIDGE_ADDRESS.to_owned()
}

impl NodeState {
    /// Node `index`'s identity: stable across `lab up` runs so enrolled nodes keep matching.
    pub fn new(index: u32, memory_mib: u32, password: String) -> Self {
        let name = format!("node-{index}");
        let offset = u16::try_from(index).unwrap_or(0);
        let bmc_port = BMC_PORT_BASE + offset;
        Self {
            info: MachineInfo {
                uuid: format!("f3e7a1b0-1ab0-4000-8000-{index:012x}"),
                serial: format!("FERRIC-LAB-{index:04}"),
                // 52:54:00 is QEMU's locally administered prefix; fe:1a marks this lab.
                mac: format!("52:54:00:fe:1a:{index:02x}"),
                memory_mib,
                cpus: 1,
                name: name.clone(),
            },
            tap: format!("ferric-tap{index}"),
            bmc_port,
            redfish_address: format!("http://{BRIDGE_ADDRESS}:{bmc_port}"),
            redfish_system_id: format!("/redfish/v1/Systems/{name}"),
            redfish_username: BMC_USERNAME.to_owned(),
            redfish_password: password.clone(),
            ipmi_address: BRIDGE_ADDRESS.to_owned(),
            ipmi_port: IPMI_PORT_BASE + offset,
            ipmi_username: BMC_USERNAME.to_owned(),
            ipmi_password: password,
            firmware: Firmware::default(),
            hardware: Hardware::Virtio,
        }
    }

    /// The node in the input format of `baremetal create` (Ironic's bulk enrollment file), with
    /// the `redfish` driver.
    pub fn enrollment(&self) -> Value {
        self.enrollment_with("redfish")
    }

    /// The node for `driver` (`redfish` or `ipmi`). `driver_info` carries both protocols'
    /// fields, as Ironic allows, so switching a node's driver needs no new credentials.
    pub fn enrollment_with(&self, driver: &str) -> Value {
        json!({
            "name": self.info.name,
            "driver": driver,
            "driver_info": {
                "redfish_address": self.redfish_address,
                "redfish_system_id": self.redfish_system_id,
                "redfish_username": self.redfish_username,
                "redfish_password": self.redfish_password,
                "ipmi_address": self.ipmi_address,
                "ipmi_port": self.ipmi_port,
                "ipmi_username": self.ipmi_username,
                "ipmi_password": self.ipmi_password,
            },
            "properties": {
                "cpus": self.info.cpus,
                "memory_mb": self.info.memory_mib,
                "local_gb": 4,
                "cpu_arch": "x86_64",
            },
            "ports": [{"address": self.info.mac}],
        })
    }
}

/// Paths inside the state directory.
#[derive(Debug, Clone)]
pub struct LabPaths {
    pub dir: PathBuf,
}

impl LabPaths {
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        let dir = if dir.is_absolute() {
            dir.to_owned()
        } else {
            std::env::current_dir()?.join(dir)
        };
        Ok(Self { dir })
    }

    pub fn state_file(&self) -> PathBuf {
        self.dir.join("lab.json")
    }
    pub fn bmc_pid(&self) -> PathBuf {
        self.dir.join("bmc.pid")
    }
    pub fn bmc_log(&self) -> PathBuf {
        self.dir.join("bmc.log")
    }
    pub fn dnsmasq_pid(&self) -> PathBuf {
        self.dir.join("dnsmasq.pid")
    }
    pub fn dnsmasq_log(&self) -> PathBuf {
        self.dir.join("dnsmasq.log")
    }
    pub fn dnsmasq_leases(&self) -> PathBuf {
        self.dir.join("dnsmasq.leases")
    }
    pub fn dhcp_hosts(&self) -> PathBuf {
        self.dir.join("dhcp-hosts")
    }
    pub fn sercon(&self) -> PathBuf {
        self.dir.join("sercon-port")
    }
    pub fn node_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    /// The machine's first disk (the one it boots from).
    pub fn disk(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("disk.img")
    }
    /// Every disk of the machine: [`Self::disk`], then `disk1.img`, … ([`DISKS`] in all).
    pub fn disks(&self, name: &str) -> Vec<PathBuf> {
        std::iter::once(self.disk(name))
            .chain((1..DISKS).map(|index| self.node_dir(name).join(format!("disk{index}.img"))))
            .collect()
    }
    pub fn console(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("console.log")
    }
    pub fn qmp_socket(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("qmp.sock")
    }
    pub fn qemu_pid(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("qemu.pid")
    }
    pub fn qemu_log(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("qemu.log")
    }
    /// The machine's UEFI variables (its NVRAM), a copy of OVMF's template.
    pub fn nvram(&self, name: &str) -> PathBuf {
        self.node_dir(name).join("OVMF_VARS.fd")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_size_and_bytes_agree() {
        assert_eq!(DISK_SIZE, format!("{}G", DISK_BYTES >> 30));
    }

    #[test]
    fn identities_are_stable_and_distinct() {
        let first = NodeState::new(0, 512, "pw".into());
        let again = NodeState::new(0, 512, "other".into());
        let second = NodeState::new(1, 512, "pw".into());
        assert_eq!(first.info.mac, again.info.mac);
        assert_eq!(first.info.uuid, again.info.uuid);
        assert_ne!(first.info.mac, second.info.mac);
        assert_eq!(second.info.mac, "52:54:00:fe:1a:01");
        assert_eq!(second.redfish_address, "http://10.231.0.1:8001");
        assert_eq!(
            (second.ipmi_address.as_str(), second.ipmi_port),
            ("10.231.0.1", 6231)
        );
        assert_eq!(second.ipmi_password, "pw");
        assert!(
            second.tap.len() <= 15,
            "Linux interface names are at most 15 bytes"
        );
    }

    #[test]
    fn enrollment_uses_ironic_driver_info_names() {
        let node = NodeState::new(2, 448, "pw".into());
        let enrollment = node.enrollment();
        assert_eq!(enrollment["driver"], "redfish");
        assert_eq!(
            enrollment["driver_info"]["redfish_system_id"],
            "/redfish/v1/Systems/node-2"
        );
        assert_eq!(enrollment["driver_info"]["redfish_password"], "pw");
        assert_eq!(enrollment["ports"][0]["address"], "52:54:00:fe:1a:02");
        let ipmi = node.enrollment_with("ipmi");
        assert_eq!(ipmi["driver"], "ipmi");
        assert_eq!(ipmi["driver_info"]["ipmi_port"], 6232);
        assert_eq!(ipmi["driver_info"]["ipmi_username"], "admin");
        assert_eq!(ipmi["driver_info"]["ipmi_password"], "pw");
    }

    #[test]
    fn lab_files_from_before_ipmi_still_load() {
        let mut old = serde_json::to_value(NodeState::new(0, 512, "pw".into())).unwrap();
        for key in [
            "ipmi_address",
            "ipmi_port",
            "ipmi_username",
            "ipmi_password",
        ] {
            old.as_object_mut().unwrap().remove(key);
        }
        old.as_object_mut().unwrap().remove("firmware");
        old.as_object_mut().unwrap().remove("hardware");
        let node: NodeState = serde_json::from_value(old).unwrap();
        assert_eq!(node.hardware, Hardware::Virtio);
        assert_eq!(node.ipmi_address, BRIDGE_ADDRESS);
        assert_eq!(node.ipmi_port, 0);
        assert_eq!(
            node.firmware,
            Firmware::Bios,
            "older labs were BIOS machines"
        );
        assert_eq!(NodeState::new(0, 512, "pw".into()).firmware, Firmware::Uefi);
        // A secure-boot machine is recorded as `lab up --firmware secure-boot` names it, and
        // boots UEFI only.
        let mut secure = NodeState::new(0, 512, "pw".into());
        secure.firmware = Firmware::SecureBoot;
        let saved = serde_json::to_value(&secure).unwrap();
        assert_eq!(saved["firmware"], "secure-boot");
        let loaded: NodeState = serde_json::from_value(saved).unwrap();
        assert_eq!(
            loaded.firmware.boot_modes(),
            [crate::machine::BootMode::Uefi]
        );
    }
}
