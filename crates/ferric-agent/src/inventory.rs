//! The hardware inventory in IPA's format (§4.4), read from `/proc`, `/sys` and SMBIOS
//! (`/sys/class/dmi/id`, `/sys/firmware/dmi/entries`). Every root is injectable, so tests run on
//! fixture directories.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use crate::agent::Invocation;
use crate::commands::CommandError;
use crate::config::AgentConfig;

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}

/// `poll.get_hardware_info` / `poll.list_hardware_info`.
pub(crate) fn get_hardware_info_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    let skip_bmc = invocation
        .agent
        .node_info()
        .is_some_and(|info| info.config["agent_skip_bmc_detect"] == true);
    collect(&invocation.agent.config, skip_bmc).map(Some)
}

/// The whole inventory.
pub fn collect(config: &AgentConfig, skip_bmc: bool) -> Result<Value, CommandError> {
    let disks = crate::disk::list(config).map_err(|error| {
        CommandError::new("HardwareError", "Cannot list disks", error.to_string())
    })?;
    let (bmc_address, bmc_v6address) = if skip_bmc {
        (None, None)
    } else {
        bmc_addresses()
    };
    Ok(json!({
        "interfaces": interfaces(config, true),
        "cpu": cpu(config),
        "disks": disks,
        "memory": memory(config),
        "bmc_address": bmc_address,
        "bmc_v6address": bmc_v6address,
        "system_vendor": system_vendor(config),
        "boot": {
            "current_boot_mode": if config.sys_root.join("firmware/efi").exists() { "uefi" } else { "bios" },
            "pxe_interface": config.pxe_mac,
        },
        "hostname": read_trimmed(&config.proc_root.join("sys/kernel/hostname")),
    }))
}

/// The MACs of the physical NICs, for the lookup.
pub fn mac_addresses(config: &AgentConfig) -> Vec<String> {
    interfaces(config, false)
        .iter()
        .filter_map(|interface| interface["mac_address"].as_str().map(str::to_owned))
        .collect()
}

/// The physical NICs; with `lldp`, each with what its switch port announced (when the agent
/// was asked to collect LLDP).
fn interfaces(config: &AgentConfig, lldp: bool) -> Vec<Value> {
    let net = config.sys_root.join("class/net");
    let Ok(entries) = fs::read_dir(&net) else {
        return Vec::new();
    };
    let addresses = if_addrs::get_if_addrs().unwrap_or_default();
    let mut names: Vec<String> = entries
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut found = Vec::new();
    let mut physical = Vec::new();
    for name in names {
        let dir = net.join(&name);
        // Physical NICs only (virtual ones have no `device`), as IPA does by default.
        let device = dir.join("device");
        if name == "lo" || !device.exists() {
            continue;
        }
        let Some(mac) = read_trimmed(&dir.join("address")) else {
            continue;
        };
        let ipv4 = addresses
            .iter()
            .find(|address| address.name == name && address.ip().is_ipv4())
            .map(|address| address.ip().to_string());
        let ipv6 = addresses
            .iter()
            .find(|address| address.name == name && address.ip().is_ipv6())
            .map(|address| address.ip().to_string());
        let link_name = |path: &Path| {
            fs::read_link(path)
                .ok()
                .and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()))
        };
        let pci_address = link_name(&device).filter(|address| address.matches(':').count() == 2);
        found.push(json!({
            "name": name,
            "mac_address": mac.to_ascii_lowercase(),
            "ipv4_address": ipv4,
            "ipv6_address": ipv6,
            "has_carrier": read_trimmed(&dir.join("carrier")).as_deref() == Some("1"),
            "lldp": null,
            "vendor": read_trimmed(&device.join("vendor")),
            "product": read_trimmed(&device.join("device")),
            "client_id": null,
            "biosdevname": null,
            "speed_mbps": read_trimmed(&dir.join("speed")).and_then(|s| s.parse::<i64>().ok()).filter(|s| *s > 0),
            "pci_address": pci_address,
            "driver": link_name(&device.join("driver")),
        }));
        physical.push(name);
    }
    // IPA's format: `[[type, hex], …]` per NIC when collected (empty when nothing was heard),
    // null when not.
    if let Some(timeout) = config.lldp_timeout.filter(|_| lldp) {
        let heard = crate::lldp::collect(&physical, timeout);
        for (interface, name) in found.iter_mut().zip(&physical) {
            interface["lldp"] = json!(heard.get(name).cloned().unwrap_or_default());
        }
    }
    found
}

fn cpu(config: &AgentConfig) -> Value {
    let cpuinfo = fs::read_to_string(config.proc_root.join("cpuinfo")).unwrap_or_default();
    let mut count = 0;
    let mut model = None;
    let mut frequency = None;
    let mut flags = Vec::new();
    let mut sockets = BTreeSet::new();
    for line in cpuinfo.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => count += 1,
            "model name" if model.is_none() => model = Some(value.to_owned()),
            "cpu MHz" if frequency.is_none() => frequency = Some(value.to_owned()),
            "flags" if flags.is_empty() => {
                flags = value.split_whitespace().map(str::to_owned).collect()
            }
            "physical id" => {
                sockets.insert(value.to_owned());
            }
            _ => {}
        }
    }
    json!({
        "model_name": model,
        "frequency": frequency,
        "count": count,
        "architecture": std::env::consts::ARCH,
        "flags": flags,
        "socket_count": sockets.len().max(1),
    })
}

fn memory(config: &AgentConfig) -> Value {
    let total = fs::read_to_string(config.proc_root.join("meminfo"))
        .ok()
        .and_then(|meminfo| {
            meminfo.lines().find_map(|line| {
                let rest = line.strip_prefix("MemTotal:")?;
                let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
                Some(kib * 1024)
            })
        });
    json!({"total": total, "physical_mb": physical_memory_mb(config)})
}

/// Sums the SMBIOS type 17 (memory device) sizes the kernel exposes as raw structures.
fn physical_memory_mb(config: &AgentConfig) -> Option<u64> {
    let entries = fs::read_dir(config.sys_root.join("firmware/dmi/entries")).ok()?;
    let mut total = 0u64;
    let mut seen = false;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("17-") {
            continue;
        }
        let Ok(raw) = fs::read(entry.path().join("raw")) else {
            continue;
        };
        let word = |at: usize| {
            raw.get(at..at + 2)
                .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
        };
        let Some(size) = word(0x0c) else { continue };
        seen = true;
        total += match size {
            0 | 0xffff => 0,
            0x7fff => raw
                .get(0x1c..0x20)
                .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .unwrap_or(0),
            size if size & 0x8000 != 0 => (size & 0x7fff) / 1024,
            size => size,
        };
    }
    seen.then_some(total)
}

fn system_vendor(config: &AgentConfig) -> Value {
    let dmi = config.sys_root.join("class/dmi/id");
    let field = |name: &str| read_trimmed(&dmi.join(name));
    json!({
        "product_name": field("product_name"),
        "serial_number": field("product_serial"),
        "manufacturer": field("sys_vendor"),
        "sku": field("product_sku"),
        "firmware": {
            "vendor": field("bios_vendor"),
            "version": field("bios_version"),
            "build_date": field("bios_date"),
        },
    })
}

/// The BMC's addresses through `ipmitool lan print CHANNEL`, when the machine has an IPMI
/// device (the ramdisk loads `ipmi_si` + `ipmi_devintf`). As IPA does, channels 1–11 are tried
/// in turn and the first with a configured address wins.
fn bmc_addresses() -> (Option<String>, Option<String>) {
    if !Path::new("/dev/ipmi0").exists() {
        return (None, None);
    }
    for channel in 1..=11 {
        let output = std::process::Command::new("ipmitool")
            .args(["lan", "print", &channel.to_string()])
            .output();
        let Ok(output) = output else {
            tracing::warn!("ipmitool is missing: no BMC address in the inventory");
            return (None, None);
        };
        if let Some(address) = lan_print_address(&String::from_utf8_lossy(&output.stdout)) {
            return (Some(address), None);
        }
    }
    (None, None)
}

/// The `IP Address` line of `ipmitool lan print`, unless unconfigured (0.0.0.0) or not an
/// address.
fn lan_print_address(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let address = value.trim();
        (key.trim() == "IP Address"
            && address != "0.0.0.0"
            && address.parse::<std::net::IpAddr>().is_ok())
        .then(|| address.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bmc_address_comes_from_lan_print() {
        let text = "Set in Progress         : Set Complete\n\
                    IP Address Source       : Static Address\n\
                    IP Address              : 10.1.2.3\n\
                    Subnet Mask             : 255.255.255.0\n";
        assert_eq!(lan_print_address(text).as_deref(), Some("10.1.2.3"));
        assert_eq!(lan_print_address("IP Address : 0.0.0.0\n"), None);
        assert_eq!(lan_print_address("Invalid channel 5\n"), None);
    }
}
