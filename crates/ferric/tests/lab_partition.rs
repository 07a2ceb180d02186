//! End-to-end: a partition image (`instance_info.image_type=partition`) deployed to a UEFI lab
//! machine through the real agent ramdisk, which partitions the disk (ESP + root), writes the
//! root filesystem into the root partition, copies the image's `/boot/efi/EFI` into the ESP
//! and adds an NVRAM boot entry (`image.install_bootloader`); the machine then boots the
//! image from its disk and prints a marker.
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`; the agent built
//! beside the `ferric` binary, or named by `FERRIC_E2E_AGENT`): `cargo xtask e2e`, or
//! `cargo test -p ferric --features lab-e2e --test lab_partition`. Like `lab_lifecycle` it is
//! a `harness = false` binary that runs itself again inside the lab's namespace.
//!
//! Phases, each timed: manage; provide (no cleaning); deploy (power-on → agent → partitions,
//! root filesystem, bootloader → `active`); boot from disk (the marker on the console). Then
//! the checks: `root_uuid_or_disk_id` is the image's filesystem UUID, the agent reported an
//! NVRAM entry and the machine's OVMF variable store holds it, and the disk file holds a GPT
//! with the ESP first and the root filesystem in the second partition.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferric_testkit::lab::{self, API, Client, Lab, enroll_machine};
use serde_json::json;

const SUITE: &str = "lab_partition";
const NAMESPACE: &str = "ferric-part-e2e";
/// Generous: boots under TCG on a busy 2-core host take several times what lab-facts measured.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// The root filesystem's UUID, given to mkfs.ext4: the agent must report it.
const ROOT_UUID: &str = "6f3a2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
/// The test image's root filesystem size.
const ROOT_FS_MIB: u64 = 64;

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

/// Builds the ramdisk and the root filesystem image, brings a one-machine lab up, runs the
/// scenario inside its namespace, and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(
        SUITE,
        NAMESPACE,
        "ferric-partition-e2e",
        env!("CARGO_BIN_EXE_ferric"),
    );
    lab.outside("server.log, lab/node-0/console.log", || {
        let started = Instant::now();
        lab.build_ramdisk()?;
        build_root_image(&lab.dir)?;
        phase("ramdisk and root filesystem image built", started);
        lab.up(&["--nodes", "1", "--memory", "512"])?;
        lab.run_inside()
    })
}

/// The root filesystem image (`boot/images/root.img`, its digest in `root.img.sha256`): its
/// kernel boots an initramfs whose `/init` prints the marker.
fn build_root_image(dir: &Path) -> anyhow::Result<()> {
    let boot = lab::marker_boot(dir, "FERRIC-PARTITION-MARKER")?;
    let image = dir.join("boot/images/root.img");
    ferric_lab::image::RootFsImage {
        kernel: boot.kernel,
        initramfs: boot.initramfs,
        append: "console=ttyS0 quiet".into(),
        size_mib: ROOT_FS_MIB,
        uuid: ROOT_UUID.into(),
    }
    .build(&image, &dir.join("image-work"))?;
    std::fs::write(
        dir.join("root.img.sha256"),
        lab::sha256_hex(&std::fs::read(&image)?),
    )?;
    Ok(())
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
    let machine = machines.first().context("lab.json: no node-0")?;
    let name = machine["name"].as_str().context("lab.json: no node name")?;
    let client = Client::new(SUITE, API, Duration::from_secs(60), PHASE_TIMEOUT)?;
    let mut command = lab.server_command();
    command
        .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
        .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "5");
    let _server = lab.server(command, &client)?;
    let digest = std::fs::read_to_string(dir.join("root.img.sha256"))?;
    let uuid = enroll_machine(
        &client,
        machine,
        json!({
            "automated_clean": false,
            "properties": {"capabilities": "boot_mode:uefi"},
            "instance_info": {
                "image_source": "root.img",
                "image_type": "partition",
                "root_gb": 1,
                "image_disk_format": "raw",
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": digest.trim(),
            },
        }),
    )?;

    let started = Instant::now();
    client.put_provision(&uuid, "manage")?;
    client.wait_for(&uuid, "manageable")?;
    phase("manage", started);
    let started = Instant::now();
    client.put_provision(&uuid, "provide")?;
    client.wait_for(&uuid, "available")?;
    phase("provide (no cleaning)", started);
    let started = Instant::now();
    client.put_provision(&uuid, "active")?;
    let node = client.wait_for(&uuid, "active")?;
    phase(
        "deploy (power-on → agent → partitions, root filesystem, bootloader → active)",
        started,
    );
    let internal = &node["driver_internal_info"];
    ensure!(
        internal["root_uuid_or_disk_id"] == ROOT_UUID && internal["is_whole_disk_image"] == false,
        "the root partition's UUID is the image's filesystem UUID: {internal}"
    );

    let marker = std::fs::read_to_string(dir.join("marker"))?;
    let booted = Instant::now();
    lab.wait_for_console(
        name,
        marker.trim(),
        0,
        PHASE_TIMEOUT,
        "the deployed partition image did not print its marker",
    )?;
    phase("boot from disk (UEFI, the ESP the agent filled)", booted);

    // The agent's NVRAM entry: reported to the conductor, and in the machine's OVMF variables.
    let log = std::fs::read_to_string(dir.join("server.log"))?;
    let installed = log
        .lines()
        .find(|line| line.contains("installed the partition image's bootloader"))
        .context("server.log: no bootloader installation")?;
    eprintln!("lab_partition: {}", installed.trim());
    ensure!(
        installed.contains("NVRAM entry Boot"),
        "the agent wrote no NVRAM boot entry: {installed}"
    );
    let utf16 =
        |text: &str| -> Vec<u8> { text.encode_utf16().flat_map(u16::to_le_bytes).collect() };
    let nvram = std::fs::read(dir.join(format!("lab/{name}/OVMF_VARS.fd")))?;
    for wanted in ["ferric1", "\\EFI\\BOOT\\BOOTX64.EFI"] {
        let bytes = utf16(wanted);
        ensure!(
            nvram.windows(bytes.len()).any(|window| window == bytes),
            "the machine's NVRAM has no {wanted:?}"
        );
    }

    // The disk: a GPT whose first partition is the ESP and whose second holds the image.
    let disk = dir.join(format!("lab/{name}/disk.img"));
    ensure!(
        lab::read_at(&disk, 512, 8)? == b"EFI PART",
        "the disk has no GPT"
    );
    let entries = lab::read_at(&disk, 1024, 256)?;
    let esp_type = uuid::uuid!("C12A7328-F81F-11D2-BA4B-00A0C93EC93B").to_bytes_le();
    ensure!(entries[..16] == esp_type, "partition 1 is not an ESP");
    let root_start = u64::from_le_bytes(entries[128 + 32..128 + 40].try_into()?) * 512;
    let image = std::fs::read(dir.join("boot/images/root.img"))?;
    let written = lab::read_at(&disk, root_start, 1 << 20)?;
    ensure!(
        written == image[..written.len()],
        "partition 2 does not start with the root filesystem image"
    );
    Ok(())
}
