//! The discovery phase (issue 21): a lab machine no node knows is powered on at its BMC,
//! PXE-boots the inspection ramdisk (the PXE filter's wildcard, then `ipxe/discovery.ipxe`)
//! and posts its inventory to the inspection service, which enrolls it: a node in `enroll`
//! with its inventory, a port per NIC and the BMC address it reported.
//!
//! It runs its own `ferric server` (inspection service in-process, discovery on) on a database
//! of its own, after the main scenario's server has stopped: discovery changes the PXE filter
//! for every machine on the segment, which the other phases do not expect.

use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};

use super::{Lab, PHASE_TIMEOUT, client, phase};

/// A Redfish `ComputerSystem.Reset` at the machine's BMC.
fn bmc_reset(machine: &Value, reset_type: &str) -> anyhow::Result<()> {
    let url = format!(
        "{}{}/Actions/ComputerSystem.Reset",
        machine["redfish_address"].as_str().unwrap_or(""),
        machine["redfish_system_id"].as_str().unwrap_or("")
    );
    let response = reqwest::blocking::Client::new()
        .post(&url)
        .basic_auth(
            machine["redfish_username"].as_str().unwrap_or(""),
            machine["redfish_password"].as_str(),
        )
        .json(&json!({"ResetType": reset_type}))
        .send()
        .with_context(|| format!("POST {url}"))?;
    ensure!(
        response.status().is_success(),
        "{reset_type} at the BMC: {}",
        response.status()
    );
    Ok(())
}

pub(super) fn discovery(lab: &Lab, machine: &Value) -> anyhow::Result<()> {
    let dir = lab.dir.as_path();
    let started = Instant::now();
    let client = client()?;
    let mut command = lab.server_command();
    command
        .arg("--database-url")
        .arg(dir.join("discovery.db"))
        .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
        .env("FERRIC_INSPECTOR_ENABLED", "true")
        .env("FERRIC_INSPECTOR_DISCOVERY", "true")
        .env("FERRIC_INSPECTOR_LISTEN", "10.231.0.1:5050");
    let _server = lab
        .server_logged(command, &client, "server-discovery.log")
        .context("cannot start ferric server for discovery")?;
    let script = dir.join("boot/ipxe/discovery.ipxe");
    ensure!(script.exists(), "no {} was written", script.display());

    // Nothing knows the machine; it boots from the network (its disk is empty).
    let mac = machine["mac"].as_str().context("the machine has no MAC")?;
    bmc_reset(machine, "On")?;
    let port = loop {
        let (_, ports) = client.send(
            reqwest::Method::GET,
            &format!("/v1/ports?address={mac}&fields=node_uuid,address,pxe_enabled"),
            None,
        )?;
        if let Some(port) = ports["ports"].as_array().and_then(|ports| ports.first()) {
            break port.clone();
        }
        ensure!(
            started.elapsed() < PHASE_TIMEOUT,
            "the machine was not enrolled within {PHASE_TIMEOUT:?}; see lab/{}/console.log and \
             server-discovery.log",
            machine["name"].as_str().unwrap_or("?")
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let uuid = port["node_uuid"]
        .as_str()
        .context("no node_uuid")?
        .to_owned();
    // The port comes first, the processed data right after: wait for the inventory.
    let inventory = loop {
        let (status, body) = client.send(
            reqwest::Method::GET,
            &format!("/v1/nodes/{uuid}/inventory"),
            None,
        )?;
        if status == 200 {
            break body;
        }
        ensure!(
            started.elapsed() < PHASE_TIMEOUT,
            "node {uuid} has no inventory: {body}"
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    let node = client.node(&uuid)?;
    ensure!(node["provision_state"] == "enroll", "{node:#}");
    ensure!(node["driver"] == "fake-hardware", "{node:#}");
    ensure!(port["pxe_enabled"] == true, "{port}");
    let interfaces = inventory["inventory"]["interfaces"]
        .as_array()
        .context("no interfaces in the inventory")?;
    ensure!(
        interfaces
            .iter()
            .any(|interface| interface["mac_address"].as_str() == Some(mac)),
        "{inventory:#}"
    );
    ensure!(
        inventory["inventory"]["cpu"]["count"].as_u64() > Some(0),
        "{inventory:#}"
    );
    ensure!(inventory["plugin_data"]["auto_discovered"] == true);
    // The BMC address is whatever the ramdisk reported (QEMU machines have no IPMI device,
    // so usually none).
    let reported = inventory["inventory"]["bmc_address"]
        .as_str()
        .filter(|address| !address.is_empty() && *address != "0.0.0.0");
    ensure!(
        node["driver_info"]["ipmi_address"].as_str() == reported,
        "driver_info {} but the ramdisk reported {reported:?}",
        node["driver_info"]
    );
    let (_, ports) = client.send(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/ports"),
        None,
    )?;
    let n_ports = ports["ports"].as_array().map_or(0, Vec::len);
    let nics = interfaces
        .iter()
        .filter(|interface| {
            interface["name"] != "lo"
                && interface["mac_address"]
                    .as_str()
                    .is_some_and(|mac| mac != "00:00:00:00:00:00")
        })
        .count();
    ensure!(
        n_ports == nics,
        "a port per NIC: {ports} for {interfaces:?}"
    );
    eprintln!(
        "lab_lifecycle: {} enrolled as node {uuid} ({} CPU, {n_ports} port)",
        machine["name"].as_str().unwrap_or("?"),
        inventory["inventory"]["cpu"]["count"]
    );
    bmc_reset(machine, "ForceOff")?;
    phase("discovery", started);
    Ok(())
}
