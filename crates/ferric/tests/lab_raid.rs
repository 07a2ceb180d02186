//! End-to-end: a RAID-1 built out of band by the lab's Redfish BMC and deployed onto, and a
//! live-ISO boot with the `ramdisk` deploy interface (issue 27), on QEMU machines of the
//! virtual lab through a real `ferric server`.
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`; the agent built
//! beside the `ferric` binary): `cargo test -p ferric --features lab-e2e --test lab_raid`.
//! Like `lab_lifecycle` it is a `harness = false` binary that runs itself again inside the
//! lab's namespace.
//!
//! One machine (`node-0`, UEFI). Its node has `raid_interface: redfish` and a target RAID
//! config of one RAID-1 root volume. Phases, each timed: enroll and manage; manual cleaning
//! `raid.create_configuration` without the ramdisk (`disable_ramdisk`): the BMC's Volumes
//! collection takes the POST, builds the volume at the reboot the driver does, and gives the
//! machine one new SCSI disk (its backing file `lab/node-0/volume1.img`); Ferric records
//! `raid_config` and the volume's WWN as `properties.root_device`; deploy through the agent
//! (network boot), which picks the volume by that hint; the machine boots the image from the
//! volume and prints a marker. The volume's file holds the image, the machine's own disk
//! does not. Then `node-1`: a node with `deploy_interface: ramdisk`, `boot_interface:
//! redfish-virtual-media` and `instance_info.boot_iso` naming a live ISO the test builds (GRUB,
//! `grub-mkrescue`, the marker's kernel and initramfs); deploy inserts it through the BMC and
//! boots the CD, the node goes `active` and the machine runs the ISO (its marker on node-1's
//! console). When it fails it keeps the directory with consoles and logs, and says where.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferric_testkit::lab::{self, API, Client, Lab, enroll_machine};
use serde_json::{Value, json};

const SUITE: &str = "lab_raid";
const NAMESPACE: &str = "ferric-raid-e2e";
/// Generous: boots under TCG on a busy 2-core host take several times what lab-facts measured.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

/// A live ISO (BIOS and UEFI, `grub-mkrescue`) whose GRUB entry boots `kernel` and
/// `initramfs` from the CD with the serial console (`boot/images/live.iso`).
fn build_live_iso(dir: &Path, kernel: &Path, initramfs: &Path) -> anyhow::Result<()> {
    let tree = dir.join("live-tree");
    std::fs::create_dir_all(tree.join("boot/grub"))?;
    std::fs::copy(kernel, tree.join("boot/vmlinuz"))?;
    std::fs::copy(initramfs, tree.join("boot/initrd"))?;
    std::fs::write(
        tree.join("boot/grub/grub.cfg"),
        "serial --unit=0 --speed=115200\n\
         terminal_input serial console\n\
         terminal_output serial console\n\
         set timeout=0\n\
         menuentry \"Ferric live ISO\" {\n\
         \tlinux /boot/vmlinuz console=ttyS0 quiet\n\
         \tinitrd /boot/initrd\n\
         }\n",
    )?;
    lab::run(
        Command::new("grub-mkrescue")
            .arg("-o")
            .arg(dir.join("boot/images/live.iso"))
            .arg(&tree),
        "grub-mkrescue (grub-common, grub-pc-bin, grub-efi-amd64-bin, xorriso, mtools)",
    )?;
    Ok(())
}

/// Builds the ramdisk, the test image (a 64 MiB disk whose `/init` prints a marker) and a live
/// ISO of the same kernel and initramfs, brings up a two-machine lab, runs the scenario inside
/// the namespace and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(
        SUITE,
        NAMESPACE,
        "ferric-raid",
        env!("CARGO_BIN_EXE_ferric"),
    );
    let kept = "server.log, lab/node-0/console.log, lab/bmc.log";
    lab.outside(kept, || {
        let started = Instant::now();
        lab.build_ramdisk()?;
        let boot = lab::build_marker_image(&lab.dir, "FERRIC-RAID-MARKER")?;
        build_live_iso(&lab.dir, &boot.kernel, &boot.initramfs)?;
        eprintln!(
            "lab_raid: ramdisk and test image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        lab.up(&["--nodes", "2", "--memory", "512"])?;
        lab.run_inside()
    })
}

fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab = Lab::at(
        SUITE,
        NAMESPACE,
        dir.to_owned(),
        env!("CARGO_BIN_EXE_ferric"),
    );
    let machines = lab.machines()?;
    let machine = machines.first().context("lab.json: no node-0")?;
    let client = Client::new(SUITE, API, Duration::from_secs(120), PHASE_TIMEOUT)?;
    let mut command = lab.server_command();
    command.env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"));
    let _server = lab.server(command, &client)?;
    let digest = std::fs::read_to_string(dir.join("marker.img.sha256"))?;
    let marker = std::fs::read_to_string(dir.join("marker"))?;

    let started = Instant::now();
    let uuid = enroll_machine(
        &client,
        machine,
        json!({
            "raid_interface": "redfish",
            "automated_clean": false,
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
    client.put(
        &format!("/v1/nodes/{uuid}/states/raid"),
        Some(json!({"logical_disks": [
            {"size_gb": "MAX", "raid_level": "1", "is_root_volume": true},
        ]})),
        204,
    )?;
    phase("enroll + manage + target RAID config", started);

    // Out of band: no ramdisk; the BMC builds the volume at the reboot the driver does.
    let started = Instant::now();
    client.provision(
        &uuid,
        json!({"target": "clean", "disable_ramdisk": true,
               "clean_steps": [{"interface": "raid", "step": "create_configuration"}]}),
    )?;
    let built = client.wait_for(&uuid, "manageable")?;
    phase(
        "raid.create_configuration (out of band, BMC reboot)",
        started,
    );
    let disk = &built["raid_config"]["logical_disks"][0];
    ensure!(
        disk["raid_level"] == "1" && disk["size_gb"] == 2,
        "raid_config does not record the RAID-1: {}",
        built["raid_config"]
    );
    let hint = &built["properties"]["root_device"];
    let wwn = hint["wwn"]
        .as_str()
        .filter(|wwn| wwn.starts_with("0x5"))
        .with_context(|| format!("no WWN root device hint: {hint}"))?
        .to_owned();
    let volume = dir.join("lab/node-0/volume1.img");
    let size = std::fs::metadata(&volume)
        .with_context(|| format!("the BMC made no backing file {}", volume.display()))?
        .len();
    ensure!(
        size == 2 << 30,
        "the volume's file has {size} bytes, not 2 GiB"
    );
    eprintln!("lab_raid: RAID-1 volume {} (wwn {wwn})", volume.display());

    let started = Instant::now();
    client.put_provision(&uuid, "provide")?;
    client.wait_for(&uuid, "available")?;
    client.put_provision(&uuid, "active")?;
    let deployed = client.wait_for(&uuid, "active")?;
    phase("deploy onto the volume (agent, root device hint)", started);
    ensure!(
        deployed["driver_internal_info"]["root_uuid_or_disk_id"].is_string()
            || deployed["last_error"].is_null(),
        "deploy ended with an error: {}",
        deployed["last_error"]
    );

    let booted = Instant::now();
    lab.wait_for_console(
        "node-0",
        marker.trim(),
        0,
        PHASE_TIMEOUT,
        "the deployed image did not print its marker",
    )?;
    phase("boot from the RAID volume", booted);

    // The image is on the volume (its GPT's primary header may differ: the agent moves the
    // backup header to the end of the disk), and not on the machine's own disk.
    let image = std::fs::read(dir.join("boot/images/marker.img"))?;
    let without_gpt_header = |bytes: &[u8]| [&bytes[..512], &bytes[1024..]].concat();
    let written = lab::read_at(&volume, 0, image.len())?;
    ensure!(
        without_gpt_header(&written) == without_gpt_header(&image),
        "{} does not hold the deployed image",
        volume.display()
    );
    let own = lab::read_at(&dir.join("lab/node-0/disk.img"), 512, 8)?;
    ensure!(
        own != *b"EFI PART",
        "the machine's own disk got the image too: the root device hint was not followed"
    );
    let live = machines.get(1).context("lab.json: no node-1")?;
    live_iso(&lab, &client, live, marker.trim())
}

/// node-1: the `ramdisk` deploy interface boots `instance_info.boot_iso` from virtual media.
fn live_iso(lab: &Lab, client: &Client, machine: &Value, marker: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let uuid = enroll_machine(
        client,
        machine,
        json!({
            "boot_interface": "redfish-virtual-media",
            "deploy_interface": "ramdisk",
            "automated_clean": false,
            "instance_info": {"boot_iso": "images/live.iso"},
        }),
    )?;
    client.put_provision(&uuid, "manage")?;
    client.wait_for(&uuid, "manageable")?;
    client.put_provision(&uuid, "provide")?;
    client.wait_for(&uuid, "available")?;
    phase("live ISO node: enroll + manage + provide", started);

    let started = Instant::now();
    client.put_provision(&uuid, "active")?;
    client.wait_for(&uuid, "active")?;
    phase(
        "live ISO deploy (ramdisk interface: ISO inserted, CD boot)",
        started,
    );
    let media = client.get(&format!("/v1/nodes/{uuid}/vmedia"))?;
    ensure!(
        media["vmedia"]
            .as_array()
            .is_some_and(|slots| slots.iter().any(|slot| slot["inserted"] == true
                && slot["image_url"]
                    .as_str()
                    .is_some_and(|image| image.ends_with("live.iso")))),
        "the live ISO is not in the machine's CD drive: {media}"
    );
    let booted = Instant::now();
    lab.wait_for_console(
        "node-1",
        marker,
        0,
        PHASE_TIMEOUT,
        "the live ISO did not print its marker",
    )?;
    phase("live ISO: active to its marker on the console", booted);
    Ok(())
}
