//! node-0's phases (Redfish, fast track on): each takes the scene and prints its time as
//! `lab_lifecycle: phase …` (docs/lab.md reads these lines), so a phase can be run, moved or
//! reused on its own. [`lifecycle`] runs them in order, each starting where the one before
//! left the node.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::ensure;
use serde_json::{Value, json};

use super::{
    Client, Lab, MD_MAGIC, PHASE_TIMEOUT, bmc_patch, bmc_power, firmware_starts, image_info, lab,
    phase, read_at, set_power,
};

/// What node-0's phases share: the API, the run directory, the machine and its node.
#[derive(Clone, Copy)]
pub(super) struct Scene<'a> {
    pub(super) lab: &'a Lab,
    pub(super) client: &'a Client,
    pub(super) dir: &'a Path,
    /// The node's UUID.
    pub(super) uuid: &'a str,
    /// The lab machine (`lab.json`'s entry).
    pub(super) machine: &'a Value,
    /// The machine's name (`node-0`).
    pub(super) name: &'a str,
    /// The test image's SHA-256.
    pub(super) digest: &'a str,
}

impl Scene<'_> {
    /// The machine's serial console log.
    fn console(&self) -> PathBuf {
        self.lab.console(self.name)
    }

    /// What the test image prints on the console once booted.
    fn marker(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.dir.join("marker"))?)
    }
}

/// node-0 (Redfish, fast track on): inspect; provide and deploy through the agent left
/// running by the phase before (no reboot into the ramdisk); boot from disk; undeploy (a cold
/// boot of the ramdisk); then, fast track off, the aborts: `abort` in `wait call-back`, and
/// seed 001's `DELETE /v1/nodes/{node}/provision` with nothing running (404) and during the
/// image write (202).
pub(super) fn lifecycle(scene: &Scene<'_>) -> anyhow::Result<()> {
    manage(scene)?;
    inspect(scene)?;
    software_raid(scene)?;
    fast_track_provide(scene)?;
    fast_track_deploy(scene)?;
    cold_power_cycle(scene)?;
    raid_mirrored_the_image(scene)?;
    undeploy(scene)?;
    abort_in_wait_call_back(scene)?;
    delete_during_write_image(scene)?;
    delete_in_wait_step(scene)
}

/// Fast track on, then manage: verifying reads the power state from the BMC.
pub(super) fn manage(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene { client, uuid, .. } = *scene;
    let started = Instant::now();
    client.patch(
        uuid,
        json!([{"op": "add", "path": "/driver_info/fast_track", "value": true}]),
    )?;
    client.provision(uuid, json!({"target": "manage"}))?;
    let node = client.wait_for(uuid, "manageable")?;
    ensure!(
        node["power_state"] == "power off",
        "verifying read the power state: {node}"
    );
    phase("enroll + manage (verifying)", started);
    Ok(())
}

/// In-band inspection through the agent; fast track leaves the machine on with its agent
/// heartbeating while the node rests in `manageable`.
pub(super) fn inspect(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene { client, uuid, .. } = *scene;
    // A property set before inspection keeps its value.
    let started = Instant::now();
    client.provision(uuid, json!({"target": "inspect"}))?;
    let node = client.wait_for(uuid, "manageable")?;
    phase("inspection (in-band, through the agent)", started);
    let properties = &node["properties"];
    ensure!(
        properties["memory_mb"] == 1234,
        "inspection overwrote memory_mb: {properties}"
    );
    ensure!(properties["cpus"].as_u64() == Some(1), "cpus: {properties}");
    ensure!(properties["cpu_arch"] == "x86_64", "cpu_arch: {properties}");
    ensure!(
        properties["local_gb"].as_u64().is_some_and(|gb| gb >= 2),
        "local_gb: {properties}"
    );
    let inventory = client.get(&format!("/v1/nodes/{uuid}/inventory"))?;
    ensure!(
        inventory["inventory"]["cpu"]["architecture"] == "x86_64",
        "the stored inventory: {inventory}"
    );
    // Fast track: the machine stays on and its agent heartbeats while the node rests.
    ensure!(
        node["power_state"] == "power on",
        "fast track leaves the machine on after inspection: {node}"
    );
    client.wait_for_heartbeat(uuid, None)?;
    phase(
        "inspection start to first heartbeat in manageable (fast track)",
        started,
    );
    Ok(())
}

/// A software RAID-1 over the machine's two disks, built by a manual clean step.
pub(super) fn software_raid(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene { client, uuid, .. } = *scene;
    // Software RAID-1 over the machine's two disks, built by a manual clean step on the
    // agent that is up; its array becomes the root device the deploy below writes to.
    let started = Instant::now();
    client.patch(
        uuid,
        json!([{"op": "add", "path": "/raid_interface", "value": "agent"}]),
    )?;
    client.expect(
        reqwest::Method::PUT,
        &format!("/v1/nodes/{uuid}/states/raid"),
        Some(json!({"logical_disks": [{
            "size_gb": "MAX", "raid_level": "1", "is_root_volume": true,
            "controller": "software", "volume_name": "root",
            "physical_disks": [{"name": "/dev/vda"}, {"name": "/dev/vdb"}],
        }]})),
        204,
    )?;
    client.provision(
        uuid,
        json!({"target": "clean", "clean_steps": [
            {"interface": "raid", "step": "delete_configuration"},
            {"interface": "raid", "step": "create_configuration"},
        ]}),
    )?;
    let node = client.wait_for(uuid, "manageable")?;
    phase("software RAID-1 (manual clean, fast track)", started);
    let built = &node["raid_config"]["logical_disks"][0];
    ensure!(
        built["raid_level"] == "1"
            && built["physical_disks"] == json!(["/dev/vda", "/dev/vdb"])
            && built["size_gb"].as_u64() == Some(3),
        "raid_config after create_configuration: {}",
        node["raid_config"]
    );
    ensure!(
        node["properties"]["root_device"] == json!({"name": "/dev/md0"}),
        "the root volume became the root device: {}",
        node["properties"]
    );
    Ok(())
}

/// provide: cleaning on the agent that is up (fast track: no reboot, no `clean wait`).
pub(super) fn fast_track_provide(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene {
        lab,
        client,
        uuid,
        name,
        ..
    } = *scene;
    // provide: cleaning runs on the agent that is up — no reboot, no `clean wait`.
    let starts = firmware_starts(lab, name);
    let (_, seen) = client.history_since(uuid, 0)?;
    let started = Instant::now();
    client.provision(uuid, json!({"target": "provide"}))?;
    let node = client.wait_for(uuid, "available")?;
    phase("cleaning (fast track: no reboot)", started);
    let (events, _) = client.history_since(uuid, seen)?;
    ensure!(
        !events.iter().any(|event| event.contains("clean wait")),
        "fast-tracked cleaning waited for an agent: {events:?}"
    );
    ensure!(
        firmware_starts(lab, name) == starts,
        "the machine restarted during fast-tracked cleaning"
    );
    ensure!(
        node["power_state"] == "power on" && node["driver_internal_info"]["agent_url"].is_string(),
        "fast track keeps the machine on with its agent after cleaning: {node}"
    );

    Ok(())
}

/// deploy: the image goes onto the disk through the same agent (no reboot into the ramdisk),
/// then the machine boots it from its disk.
pub(super) fn fast_track_deploy(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene {
        lab,
        client,
        uuid,
        name,
        ..
    } = *scene;
    let marker = scene.marker()?;
    let (_, seen) = client.history_since(uuid, 0)?;
    let started = Instant::now();
    client.provision(uuid, json!({"target": "active"}))?;
    let node = client.wait_for(uuid, "active")?;
    phase("deploy (fast track: no reboot into the ramdisk)", started);
    let (events, _) = client.history_since(uuid, seen)?;
    ensure!(
        !events.iter().any(|event| event.contains("wait call-back")),
        "the fast-tracked deploy waited for an agent: {events:?}"
    );
    ensure!(
        node["driver_internal_info"]["deploy_progress"]["bytes_written"].as_u64() == Some(64 << 20),
        "the agent reported the bytes it wrote: {}",
        node["driver_internal_info"]
    );
    let booted = Instant::now();
    lab.wait_for_console(
        name,
        marker.trim(),
        0,
        PHASE_TIMEOUT,
        "the deployed image did not print its marker",
    )?;
    phase("boot from disk", booted);
    Ok(())
}

/// A cold power cycle with no boot override: the machine boots its disk by itself.
pub(super) fn cold_power_cycle(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene {
        lab,
        client,
        uuid,
        machine,
        name,
        ..
    } = *scene;
    let console = scene.console();
    let marker = scene.marker()?;
    // A cold power cycle with no boot override at the BMC: the machine boots its disk by
    // itself (UEFI: the ESP's \EFI\BOOT\BOOTX64.EFI, no boot entry needed).
    let cycled = Instant::now();
    bmc_patch(
        machine,
        json!({"Boot": {"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled"}}),
    )?;
    let console_before = lab::file_len(&console);
    set_power(client, uuid, "power off")?;
    ensure!(bmc_power(machine)? == "Off", "{name} did not power off");
    set_power(client, uuid, "power on")?;
    lab.wait_for_console(
        name,
        marker.trim(),
        console_before,
        PHASE_TIMEOUT,
        "after a cold power cycle with no boot override the image did not boot",
    )?;
    phase("cold power cycle, no boot override: boot from disk", cycled);
    Ok(())
}

/// Both RAID members hold the deployed image and an md superblock.
pub(super) fn raid_mirrored_the_image(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene { dir, name, .. } = *scene;
    // The image went onto the array, so both disks hold it, each with an md superblock at
    // its end; the machine booted the first one like a plain disk. The agent moved the GPT's
    // backup header to the end of the array, so the primary header (LBA 1) differs from the
    // image's in its backup-header location and checksum; everything else is the image.
    let image = std::fs::read(dir.join("boot/images/marker.img"))?;
    let without_gpt_header = |bytes: &[u8]| [&bytes[..512], &bytes[1024..]].concat();
    for disk in ["disk.img", "disk1.img"] {
        let path = dir.join(format!("lab/{name}/{disk}"));
        let written = read_at(&path, 0, image.len())?;
        ensure!(
            written[512..520] == *b"EFI PART"
                && without_gpt_header(&written) == without_gpt_header(&image),
            "{} does not hold the deployed image: the RAID-1 did not mirror it",
            path.display()
        );
        let size = std::fs::metadata(&path)?.len();
        // Metadata 1.0: the superblock sits 8 KiB before the end, 4 KiB aligned.
        let superblock = (size - 8192) & !4095;
        ensure!(
            read_at(&path, superblock, 4)? == MD_MAGIC.to_le_bytes(),
            "{} has no md superblock at {superblock}",
            path.display()
        );
    }
    Ok(())
}

/// undeploy: cleaning boots the ramdisk cold (UEFI PXE → TFTP → iPXE) and wipes both disks.
pub(super) fn undeploy(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene {
        client,
        dir,
        uuid,
        name,
        ..
    } = *scene;
    // undeploy: the machine is off after the tear-down, so cleaning boots the ramdisk cold.
    let before = client.node(uuid)?["driver_internal_info"]["agent_last_heartbeat"].clone();
    let started = Instant::now();
    client.provision(uuid, json!({"target": "deleted"}))?;
    client.wait_for_heartbeat(uuid, before.as_str())?;
    phase(
        "power-on to first heartbeat (undeploy's cleaning; UEFI PXE → TFTP → iPXE)",
        started,
    );
    let dhcp = std::fs::read_to_string(dir.join("lab/dnsmasq.log")).unwrap_or_default();
    ensure!(
        dhcp.contains("sent /usr/lib/ipxe/snponly.efi"),
        "the firmware's PXE client never fetched iPXE over TFTP; see lab/dnsmasq.log"
    );
    client.wait_for(uuid, "available")?;
    phase("undeploy (cleaning)", started);
    // The array stays (cleaning erases it, not its members): both disks lose the table.
    for disk in ["disk.img", "disk1.img"] {
        ensure!(
            !ferric_lab::image::has_partition_table(&dir.join(format!("lab/{name}/{disk}")))?,
            "cleaning left the partition table on {name}'s {disk}"
        );
    }
    Ok(())
}

/// Fast track off, legacy BIOS boot: `abort` in `wait call-back`.
pub(super) fn abort_in_wait_call_back(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene {
        client,
        uuid,
        machine,
        name,
        digest,
        ..
    } = *scene;
    // Fast track off from here: the aborts need the node to wait for a freshly booted agent.
    // They boot it in legacy BIOS mode (SeaBIOS, the NIC's iPXE ROM), then by UEFI HTTP boot.
    let mut patch = vec![
        json!({"op": "replace", "path": "/driver_info/fast_track", "value": false}),
        json!({"op": "add", "path": "/properties/capabilities", "value": "boot_mode:bios"}),
    ];
    // Undeploy forgot the instance; name the image again.
    patch.extend(
        image_info(digest)
            .as_object()
            .into_iter()
            .flatten()
            .map(|(key, value)| json!({"op": "add", "path": format!("/instance_info/{key}"), "value": value})),
    );
    client.patch(uuid, Value::Array(patch))?;
    let started = Instant::now();
    client.provision(uuid, json!({"target": "active"}))?;
    client.wait_for(uuid, "wait call-back")?;
    client.provision(uuid, json!({"target": "abort"}))?;
    let node = client.wait_for(uuid, "deploy failed")?;
    ensure!(
        node["power_state"] == "power off",
        "abort powers the node off: {node}"
    );
    let bmc = bmc_power(machine)?;
    ensure!(bmc == "Off", "the BMC says {name} is {bmc} after the abort");
    phase("abort in wait call-back", started);
    Ok(())
}

/// Seed 001's `DELETE /v1/nodes/{node}/provision`: 404 with nothing running, 202 during
/// `write_image`.
pub(super) fn delete_during_write_image(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene {
        lab,
        client,
        uuid,
        machine,
        name,
        ..
    } = *scene;
    let console = scene.console();
    // Seed 001: DELETE /v1/nodes/{node}/provision.
    let abort_path = format!("/v1/nodes/{uuid}/provision");
    let refused = client.expect(reqwest::Method::DELETE, &abort_path, None, 404)?;
    eprintln!("lab_lifecycle: DELETE with nothing running: 404 {refused}");
    let started = Instant::now();
    let console_before = lab::file_len(&console);
    let before = client.node(uuid)?["driver_internal_info"]["agent_last_heartbeat"].clone();
    client.provision(uuid, json!({"target": "active"}))?;
    client.wait_while(uuid, "deploy failed")?;
    client.wait_for_heartbeat(uuid, before.as_str())?;
    phase(
        "power-on to first heartbeat (BIOS: SeaBIOS, iPXE ROM)",
        started,
    );
    ensure!(
        lab.console_since(name, console_before)
            .contains("SeaBIOS (version"),
        "boot_mode:bios did not boot {name} in legacy mode; see {}",
        console.display()
    );
    wait_for_deploy_step(
        scene,
        "write_image",
        Instant::now(),
        "the image being written",
    )?;
    client.expect(reqwest::Method::DELETE, &abort_path, None, 202)?;
    eprintln!("lab_lifecycle: DELETE during write_image: 202");
    let node = client.wait_for(uuid, "deploy failed")?;
    ensure!(
        node["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("By request, the deployment was aborted"),
        "the DELETE did not abort the write: {}",
        node["last_error"]
    );
    let bmc = bmc_power(machine)?;
    ensure!(
        bmc == "Off" && node["power_state"] == "power off",
        "the BMC says {name} is {bmc} after the DELETE"
    );
    phase("deploy aborted by DELETE during write_image", started);
    Ok(())
}

/// UEFI HTTP boot, then a DELETE in the reserved `wait` deploy step (issue 21).
pub(super) fn delete_in_wait_step(scene: &Scene<'_>) -> anyhow::Result<()> {
    let Scene {
        client,
        dir,
        uuid,
        machine,
        name,
        ..
    } = *scene;
    let abort_path = format!("/v1/nodes/{uuid}/provision");
    // UEFI HTTP boot from here: interfaces change only at rest or in maintenance.
    client.expect(
        reqwest::Method::PUT,
        &format!("/v1/nodes/{uuid}/maintenance"),
        Some(json!({"reason": "switching to UEFI HTTP boot"})),
        202,
    )?;
    client.patch(
        uuid,
        json!([
            {"op": "replace", "path": "/boot_interface", "value": "http"},
            {"op": "replace", "path": "/properties/capabilities", "value": "boot_mode:uefi"},
        ]),
    )?;
    client.expect(
        reqwest::Method::DELETE,
        &format!("/v1/nodes/{uuid}/maintenance"),
        None,
        202,
    )?;

    // Issue 21: a DELETE in the reserved `wait` step (after the agent booted, before the
    // image) is carried out at once, not when the pause ends.
    let started = Instant::now();
    let dhcp_log = dir.join("lab/dnsmasq.log");
    let dhcp_before = lab::file_len(&dhcp_log);
    let before = client.node(uuid)?["driver_internal_info"]["agent_last_heartbeat"].clone();
    let wait = json!({"interface": "deploy", "step": "wait", "priority": 90,
                      "args": {"seconds": 3600}});
    client.provision(uuid, json!({"target": "active", "deploy_steps": [wait]}))?;
    client.wait_while(uuid, "deploy failed")?;
    client.wait_for_heartbeat(uuid, before.as_str())?;
    phase("power-on to first heartbeat (UEFI HTTP boot)", started);
    let dhcp = std::fs::read(&dhcp_log).unwrap_or_default();
    ensure!(
        String::from_utf8_lossy(dhcp.get(dhcp_before..).unwrap_or_default())
            .contains("vendor class: HTTPClient"),
        "{name} did not boot by UEFI HTTP boot; see lab/dnsmasq.log"
    );
    wait_for_deploy_step(scene, "wait", started, "the wait step")?;
    client.expect(reqwest::Method::DELETE, &abort_path, None, 202)?;
    let node = client.wait_for(uuid, "deploy failed")?;
    let bmc = bmc_power(machine)?;
    ensure!(
        node["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("during step \"deploy.wait\"")
            && bmc == "Off"
            && node["power_state"] == "power off",
        "the DELETE in the wait step was not carried out (BMC {bmc}): {}",
        node["last_error"]
    );
    phase(
        "deploy aborted by DELETE in the reserved wait step",
        started,
    );
    Ok(())
}

/// Waits until the node is `deploying` in the deploy step `step` (`what` names it in the
/// error), from a new deploy that may still be leaving `deploy failed` or waiting for its
/// agent; at most [`PHASE_TIMEOUT`] from `since`.
fn wait_for_deploy_step(
    scene: &Scene<'_>,
    step: &str,
    since: Instant,
    what: &str,
) -> anyhow::Result<()> {
    let Scene {
        client, uuid, name, ..
    } = *scene;
    loop {
        let node = client.node(uuid)?;
        let state = node["provision_state"].as_str().unwrap_or("?");
        if state == "deploying" && node["deploy_step"]["step"] == step {
            return Ok(());
        }
        ensure!(
            matches!(state, "deploying" | "wait call-back" | "deploy failed")
                && since.elapsed() < PHASE_TIMEOUT,
            "{name} never showed {what} (now {state}): {}",
            node["last_error"]
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
