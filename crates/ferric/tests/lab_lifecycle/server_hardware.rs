//! Real-server hardware (issue 22): node-3 is a lab machine with an e1000e NIC, an NVMe disk
//! and a disk behind a MegaRAID SAS controller (`lab up --hardware …,server`), which the agent
//! ramdisk drives with the drivers and tools it packs for real servers.
//!
//! It is inspected with LLDP collection on (`ipa-collect-lldp=1` in the node's
//! `kernel_append_params`): both disks are in the inventory, the NIC is driven by e1000e, and
//! the lab bridge's LLDP announcement of node-3's port is in the inventory, parsed into
//! `plugin_data.parsed_lldp` and written into the port's `local_link_connection`. Then a manual clean runs `erase_devices` on the agent left up
//! by fast track: the NVMe disk is erased by an NVMe format (the agent's log on the console
//! says so), the SCSI disk, which has no secure erase, is overwritten; a marker written into
//! the middle of each disk beforehand is gone.

use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};

use super::{Client, NAMESPACE, enroll_machine, phase, read_at};

/// Where the marker goes: past the first and last MiB a metadata erase would clear.
const MARKER_OFFSET: u64 = 256 << 20;
const MARKER: &[u8] = b"FERRIC-E2E-DISK-MARKER";

pub(super) fn server_hardware(client: &Client, dir: &Path, machine: &Value) -> anyhow::Result<()> {
    let name = machine["name"].as_str().unwrap_or("node-3");
    let tap = machine["tap"].as_str().context("the machine has no tap")?;
    ensure!(
        machine["hardware"] == "server",
        "{name} is not a server machine: {machine}"
    );
    let disks = ["disk.img", "disk1.img"].map(|disk| dir.join(format!("lab/{name}/{disk}")));
    for disk in &disks {
        std::fs::OpenOptions::new()
            .write(true)
            .open(disk)
            .and_then(|file| file.write_all_at(MARKER, MARKER_OFFSET))
            .with_context(|| format!("cannot write the marker into {}", disk.display()))?;
    }

    let uuid = enroll_machine(
        client,
        machine,
        json!({
            "boot_interface": "ipxe",
            "inspect_interface": "agent",
            "driver_info": {
                "fast_track": true,
                "kernel_append_params": "ipa-collect-lldp=1 ipa-lldp-timeout=20",
            },
        }),
    )?;
    let uuid = uuid.as_str();
    client.provision(uuid, json!({"target": "manage"}))?;
    client.wait_for(uuid, "manageable")?;

    let started = Instant::now();
    client.provision(uuid, json!({"target": "inspect"}))?;
    client.wait_for(uuid, "manageable")?;
    phase(
        "inspection of a server machine (e1000e, NVMe, MegaRAID)",
        started,
    );
    let stored = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/inventory"),
        None,
        200,
    )?;
    let inventory = &stored["inventory"];
    let disk_names: Vec<&str> = inventory["disks"]
        .as_array()
        .context("no disks in the inventory")?
        .iter()
        .filter_map(|disk| disk["name"].as_str())
        .collect();
    ensure!(
        disk_names.contains(&"/dev/nvme0n1") && disk_names.contains(&"/dev/sda"),
        "the NVMe and the MegaRAID disk are not both in the inventory: {disk_names:?}"
    );
    let mac = machine["mac"].as_str().unwrap_or("");
    let nic = inventory["interfaces"]
        .as_array()
        .and_then(|interfaces| {
            interfaces
                .iter()
                .find(|interface| interface["mac_address"] == mac)
        })
        .context("the machine's NIC is not in the inventory")?;
    ensure!(nic["driver"] == "e1000e", "the NIC's driver: {nic}");
    ensure!(
        nic["lldp"].as_array().is_some_and(|tlvs| !tlvs.is_empty()),
        "no LLDP heard on {}: {nic}",
        nic["name"]
    );
    let interface = nic["name"].as_str().unwrap_or("?");
    let neighbour = &stored["plugin_data"]["parsed_lldp"][interface];
    ensure!(
        neighbour["switch_port_id"] == tap
            && neighbour["switch_system_name"] == NAMESPACE
            && neighbour["switch_chassis_id"].is_string(),
        "parsed_lldp does not name the lab bridge's port {tap}: {}",
        stored["plugin_data"]["parsed_lldp"]
    );
    // Ironic's local-link-connection hook: the port says where the NIC is plugged.
    let ports = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/ports?detail=true"),
        None,
        200,
    )?;
    let link = &ports["ports"][0]["local_link_connection"];
    ensure!(
        link["port_id"] == tap
            && link["switch_info"] == NAMESPACE
            && link["switch_id"] == neighbour["switch_chassis_id"],
        "the port's local_link_connection does not come from LLDP: {ports}"
    );
    eprintln!(
        "lab_lifecycle: {name} inspected: disks {disk_names:?}, NIC {interface} (e1000e), \
         LLDP neighbour {neighbour}, port local_link_connection {link}"
    );

    client.wait_for_heartbeat(uuid, None)?;
    let console = dir.join(format!("lab/{name}/console.log"));
    let console_before = std::fs::metadata(&console).map_or(0, |meta| meta.len());
    let started = Instant::now();
    client.provision(
        uuid,
        json!({"target": "clean", "clean_steps": [
            {"interface": "deploy", "step": "erase_devices"},
        ]}),
    )?;
    client.wait_for(uuid, "manageable")?;
    phase(
        "erase_devices on the server machine (manual clean)",
        started,
    );
    let log = String::from_utf8_lossy(&std::fs::read(&console)?)
        .get(console_before as usize..)
        .unwrap_or_default()
        .to_owned();
    let erased = |disk: &str| {
        log.lines()
            .find(|line| line.contains("disk erased") && line.contains(disk))
            .map(str::to_owned)
    };
    let nvme = erased("/dev/nvme0n1").with_context(|| {
        format!(
            "the agent's log has no erase of /dev/nvme0n1; see {}",
            console.display()
        )
    })?;
    ensure!(
        nvme.contains("nvme format -s"),
        "/dev/nvme0n1 was not erased with an NVMe format: {nvme}"
    );
    let scsi = erased("/dev/sda").context("the agent's log has no erase of /dev/sda")?;
    eprintln!(
        "lab_lifecycle: {name}: {}\nlab_lifecycle: {name}: {}",
        nvme.trim(),
        scsi.trim()
    );
    for disk in &disks {
        ensure!(
            read_at(disk, MARKER_OFFSET, MARKER.len())? != MARKER,
            "{} still holds the marker after erase_devices",
            disk.display()
        );
    }

    client.expect(
        reqwest::Method::PUT,
        &format!("/v1/nodes/{uuid}/states/power"),
        Some(json!({"target": "power off"})),
        202,
    )?;
    Ok(())
}
