//! End-to-end: Ferric drives the **unmodified ironic-python-agent** (IPA, a pinned PyPI
//! release) on a QEMU machine of the virtual lab — inspection, cleaning and a whole-disk
//! deploy that then boots from the disk IPA wrote.
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`, plus
//! `mmdebstrap` and `zstd` for the ramdisk's first build): `cargo xtask e2e`, or
//! `cargo test -p ferric --features lab-e2e --test lab_ipa`. The ramdisk comes from
//! `scripts/build-ipa-ramdisk.sh` (cached under `~/.cache/ferric/ipa-ramdisk`). Like
//! `lab_lifecycle`, a `harness = false` binary that runs itself again inside the lab's
//! namespace (`inside DIR`) for the scenario.
//!
//! Phases, each timed: enroll and manage; inspection (IPA posts its inventory to
//! `/v1/continue_inspection`; the stored data names IPA's hardware manager); cleaning
//! (automated: IPA's `erase_devices_metadata` wipes a partition table planted on the disk);
//! deploy of a whole-disk image and the boot from disk (the image prints a marker). When it
//! fails it keeps the directory with the consoles (IPA logs to the console), the server's log
//! and the database, and says where.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferric_testkit::lab::{self, API, Client, Lab, enroll_machine};
use serde_json::{Value, json};

const SUITE: &str = "lab_ipa";
const NAMESPACE: &str = "ferric-ipa-e2e";
/// Generous: IPA's ramdisk is ~80 MiB and starts Python under TCG on a busy 2-core host.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a node may wait for its agent, and an inspection for its data.
const CALLBACK_TIMEOUT_SECS: u64 = 420;
/// IPA's Python, udev and the ramdisk's size need more than the lab's default 512 MiB.
const MEMORY_MIB: &str = "2048";

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

/// Builds (or takes from the cache) the IPA ramdisk and the test image, brings the lab up,
/// runs the scenario inside its namespace, and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(
        SUITE,
        NAMESPACE,
        "ferric-ipa-e2e",
        env!("CARGO_BIN_EXE_ferric"),
    );
    let kept = "server.log, ferric.db, lab/node-0/console.log with IPA's log, lab/dnsmasq.log, \
                lab/bmc.log";
    lab.outside(kept, || {
        let started = Instant::now();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-ipa-ramdisk.sh");
        let built = lab::run(
            Command::new(&script).arg(lab.dir.join("boot")),
            "scripts/build-ipa-ramdisk.sh",
        )?;
        eprintln!("lab_ipa: IPA ramdisk:\n{}", built.trim_end());
        lab::build_marker_image(&lab.dir, "FERRIC-IPA-E2E-MARKER")?;
        eprintln!(
            "lab_ipa: ramdisk and test image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        lab.up(&["--nodes", "1", "--memory", MEMORY_MIB])?;
        lab.run_inside()
    })
}

/// The scenario, run inside the lab's namespace.
fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab = Lab::at(
        SUITE,
        NAMESPACE,
        dir.to_owned(),
        env!("CARGO_BIN_EXE_ferric"),
    );
    let machines = lab.machines()?;
    let machine = &machines[0];
    let name = machine["name"].as_str().unwrap_or("node-0");
    let client = Client::new(SUITE, API, Duration::from_secs(60), PHASE_TIMEOUT)?;
    let mut command = lab.server_command();
    command
        .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
        .env("FERRIC_DEPLOY_KERNEL", "ipa.kernel")
        .env("FERRIC_DEPLOY_RAMDISK", "ipa.initramfs")
        .env(
            "FERRIC_DEPLOY_CALLBACK_TIMEOUT",
            CALLBACK_TIMEOUT_SECS.to_string(),
        )
        .env(
            "FERRIC_INSPECT_WAIT_TIMEOUT",
            CALLBACK_TIMEOUT_SECS.to_string(),
        )
        .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "5")
        .env("FERRIC_LOG_LEVEL", "info,ferric_api=debug");
    let _server = lab.server(command, &client)?;

    let digest = std::fs::read_to_string(dir.join("marker.img.sha256"))?;
    let started = Instant::now();
    let uuid = enroll_machine(
        &client,
        machine,
        json!({
            "boot_interface": "ipxe",
            "inspect_interface": "agent",
            "instance_info": {
                "image_source": "marker.img",
                "image_disk_format": "raw",
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": digest.trim(),
            },
        }),
    )?;
    client.put_provision(&uuid, "manage")?;
    client.wait_for(&uuid, "manageable")?;
    phase("enroll + manage", started);

    let started = Instant::now();
    client.put_provision(&uuid, "inspect")?;
    let node = client.wait_for(&uuid, "manageable")?;
    phase("inspection (IPA → /v1/continue_inspection)", started);
    check_inspection(&client, &uuid, &node)?;

    // A partition table for cleaning to wipe: the machine is off after the inspection.
    let disk = dir.join(format!("lab/{name}/disk.img"));
    let image = std::fs::read(dir.join("boot/images/marker.img"))?;
    plant_partition_table(&disk, &image)?;
    ensure!(
        ferric_lab::image::has_partition_table(&disk)?,
        "no partition table planted on {}",
        disk.display()
    );
    let started = Instant::now();
    client.put_provision(&uuid, "provide")?;
    let node = client.wait_for(&uuid, "available")?;
    phase("cleaning (IPA's erase_devices_metadata)", started);
    ensure!(
        !ferric_lab::image::has_partition_table(&disk)?,
        "cleaning left the partition table on {}",
        disk.display()
    );
    let agent_url = node["driver_internal_info"]["agent_url"]
        .as_str()
        .unwrap_or("");
    eprintln!("lab_ipa: IPA's callback URL during cleaning: {agent_url:?}");

    let started = Instant::now();
    client.put_provision(&uuid, "active")?;
    client.wait_for(&uuid, "active")?;
    phase("deploy (IPA writes the image)", started);
    // IPA moves the GPT's backup header to the end of the disk after writing (as Ferric's
    // agent does), so the primary header (LBA 1) differs from the image's in the backup
    // header's location and the checksum; everything after it is the image.
    let written = lab::read_at(&disk, 0, image.len())?;
    // Its protective MBR's partition entry grows to the whole disk with it (LBA 0).
    let without_gpt_headers = |bytes: &[u8]| bytes.get(1024..).unwrap_or_default().to_vec();
    ensure!(
        written.get(510..512) == Some([0x55, 0xaa].as_slice())
            && written.get(512..520) == Some(b"EFI PART".as_slice())
            && without_gpt_headers(&written) == without_gpt_headers(&image),
        "{} does not hold the deployed image",
        disk.display()
    );
    let marker = std::fs::read_to_string(dir.join("marker"))?;
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

/// What IPA's inspection left: the properties Ferric derives, and the stored data, which
/// names IPA's hardware manager (ferric-agent names none) and the machine's NIC.
fn check_inspection(client: &Client, uuid: &str, node: &Value) -> anyhow::Result<()> {
    let properties = &node["properties"];
    ensure!(
        properties["cpu_arch"] == "x86_64" && properties["cpus"].as_u64() == Some(1),
        "cpu properties after inspection: {properties}"
    );
    ensure!(
        properties["memory_mb"]
            .as_u64()
            .is_some_and(|mb| (1536..=2048).contains(&mb)),
        "memory_mb after inspection: {properties}"
    );
    ensure!(
        properties["local_gb"].as_u64().is_some_and(|gb| gb >= 2),
        "local_gb after inspection: {properties}"
    );
    let data = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/inventory"),
        None,
        200,
    )?;
    let managers = &data["plugin_data"]["configuration"]["managers"];
    ensure!(
        managers
            .as_array()
            .is_some_and(|all| all.iter().any(|m| m["name"] == "generic_hardware_manager")),
        "the inspection data does not come from IPA (no generic_hardware_manager): {}",
        data["plugin_data"]
    );
    let interfaces = data["inventory"]["interfaces"]
        .as_array()
        .context("no interfaces in the inventory")?;
    ensure!(
        !interfaces.is_empty()
            && data["inventory"]["disks"]
                .as_array()
                .is_some_and(|d| !d.is_empty()),
        "IPA's inventory lacks NICs or disks: {}",
        data["inventory"]
    );
    eprintln!(
        "lab_ipa: inspected by IPA ({managers}); {} NIC(s), {} disk(s)",
        interfaces.len(),
        data["inventory"]["disks"].as_array().map_or(0, Vec::len)
    );
    Ok(())
}

/// Writes the first MiB of `image` (its MBR and partition table) over the start of `disk`.
fn plant_partition_table(disk: &Path, image: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::FileExt;
    let head = &image[..image.len().min(1 << 20)];
    std::fs::OpenOptions::new()
        .write(true)
        .open(disk)
        .and_then(|file| file.write_all_at(head, 0))
        .with_context(|| format!("cannot write {}", disk.display()))
}
