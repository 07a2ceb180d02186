//! End-to-end: a node's whole life on QEMU machines of the virtual lab, through a real
//! `ferric server`, the lab's virtual BMCs, network boot of the real agent ramdisk, and an
//! image that boots from the disk the agent wrote.
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`; the agent built
//! beside the `ferric` binary): `cargo xtask e2e`, or
//! `cargo test -p ferric --features lab-e2e --test lab_lifecycle`. It is a `harness = false`
//! binary: the lab's network exists only inside its namespace, so after `ferric lab up` the
//! binary runs itself again inside the namespace (`inside DIR`) for the scenario.
//!
//! Phases, each timed: enroll and manage (verifying against the BMC); inspection; a software
//! RAID-1 over the machine's two disks built by a manual clean step; provide (cleaning
//! through the agent: power-on → first heartbeat, then the wipe); deploy a test image (the
//! machine then boots it from its own disk and prints a marker; both disks hold the image and
//! an md superblock); undeploy (cleaning wipes the
//! partition table, checked on the disk file); abort in `wait call-back`; a callback timeout;
//! then node-3, a server machine (e1000e, NVMe, MegaRAID SAS), inspected with LLDP and
//! cleaned with an NVMe format (`lab_lifecycle/server_hardware.rs`); then discovery
//! (`lab_lifecycle/discovery.rs`): node-2, enrolled nowhere, PXE-boots the
//! inspection ramdisk and becomes a node in `enroll`.
//! The lab's machines are UEFI (OVMF, no iPXE ROM): node-0 boots its ramdisk through the
//! firmware's PXE client, TFTP and iPXE (`pxe` boot interface), boots its GPT/ESP image from
//! disk after deploy and again after a cold power cycle with no boot override; its abort
//! phases boot the ramdisk in legacy BIOS mode (`boot_mode:bios`: SeaBIOS and the NIC's iPXE
//! ROM) and by UEFI HTTP boot (`http` boot interface). Each path's power-on → first
//! heartbeat is printed as a phase.
//! When it fails it keeps the directory with consoles, logs and the database, and says where.
//!
//! The harness (lab up/down, the server, the client and its waits) is `ferric_testkit::lab`;
//! node-0's phases are functions of their own in `lab_lifecycle/node0.rs`.
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferric_testkit::lab::{self, API, Client, Lab, enroll_machine, read_at};
use serde_json::{Value, json};

#[path = "lab_lifecycle/bmc.rs"]
mod bmc;
#[path = "lab_lifecycle/discovery.rs"]
mod discovery;
#[path = "lab_lifecycle/node0.rs"]
mod node0;
#[path = "lab_lifecycle/server_hardware.rs"]
mod server_hardware;
#[path = "lab_lifecycle/silent_node.rs"]
mod silent_node;

use bmc::{bmc_patch, bmc_power, set_power};
use silent_node::silent_node;

const SUITE: &str = "lab_lifecycle";
const NAMESPACE: &str = "ferric-e2e";
/// Generous: boots under TCG on a busy 2-core host take several times what lab-facts measured.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a node may wait for its agent before the callback timeout fails it.
const CALLBACK_TIMEOUT_SECS: u64 = 120;
/// How long an inspection may wait for the ramdisk's data.
const INSPECT_WAIT_TIMEOUT_SECS: u64 = 90;

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

/// This suite's lab in the run directory `dir`.
fn lab_at(dir: &Path) -> Lab {
    Lab::at(
        SUITE,
        NAMESPACE,
        dir.to_owned(),
        env!("CARGO_BIN_EXE_ferric"),
    )
}

/// Prints a phase's time as `lab_lifecycle: phase NAME: 12.3 s`.
fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

/// A client of the API the scenario's server answers on.
fn client() -> anyhow::Result<Client> {
    Client::new(SUITE, API, Duration::from_secs(60), PHASE_TIMEOUT)
}

/// Builds the ramdisk and the test image, brings the lab up, runs the scenario inside its
/// namespace, and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(SUITE, NAMESPACE, "ferric-e2e", env!("CARGO_BIN_EXE_ferric"));
    let kept = "server.log, ferric.db, lab/node-*/console.log, lab/dnsmasq.log, lab/bmc.log";
    lab.outside(kept, || {
        let started = Instant::now();
        let ramdisk = lab.build_ramdisk()?;
        eprintln!("lab_lifecycle: ramdisk built:\n{}", ramdisk.trim_end());
        lab::build_marker_image(&lab.dir, "FERRIC-E2E-MARKER")?;
        eprintln!(
            "lab_lifecycle: ramdisk and test image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        lab.up(&[
            "--nodes",
            "4",
            // node-3 has a real server's NIC and disk controllers.
            "--hardware",
            "virtio,virtio,virtio,server",
            "--memory",
            "512",
        ])?;
        lab.run_inside()
    })
}

/// The scenario, run inside the lab's namespace.
fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab = lab_at(dir);
    let client = client()?;
    let mut command = lab.server_command();
    command
        .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
        .env(
            "FERRIC_DEPLOY_CALLBACK_TIMEOUT",
            CALLBACK_TIMEOUT_SECS.to_string(),
        )
        .env(
            "FERRIC_INSPECT_WAIT_TIMEOUT",
            INSPECT_WAIT_TIMEOUT_SECS.to_string(),
        )
        .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "5")
        .env("FERRIC_LOG_LEVEL", "info,ferric_api=debug");
    let server = lab.server(command, &client)?;

    let digest = std::fs::read_to_string(dir.join("marker.img.sha256"))?;
    let nodes = lab.machines()?;
    let enroll = |machine: &Value, extra: Value| -> anyhow::Result<String> {
        let mut extra = extra;
        if let Some(fields) = extra.as_object_mut() {
            fields.insert("instance_info".to_owned(), image_info(&digest));
        }
        enroll_machine(&client, machine, extra)
    };

    // node-1 never finds its ramdisk: its inspections and its deploy end in aborts and
    // timeouts. It is enrolled over IPMI (verifying and its power actions go through the
    // lab's RMCP+ BMC) and runs on its own thread beside node-0's phases.
    let late = enroll(
        &nodes[1],
        json!({"automated_clean": false, "driver": "ipmi", "inspect_interface": "agent",
        "driver_info": {
            "ipmi_address": nodes[1]["ipmi_address"],
            "ipmi_port": nodes[1]["ipmi_port"],
            "ipmi_username": nodes[1]["ipmi_username"],
            "ipmi_password": nodes[1]["ipmi_password"],
            "deploy_ramdisk": "no-such-ramdisk",
        }}),
    )?;
    let uuid = enroll(
        &nodes[0],
        json!({"inspect_interface": "agent", "properties": {"memory_mb": 1234}}),
    )?;
    // FERRIC_E2E_ONLY=server_hardware runs that phase alone (a quick check of the ramdisk on
    // server hardware without the whole scenario).
    if std::env::var("FERRIC_E2E_ONLY").as_deref() == Ok("server_hardware") {
        return server_hardware::server_hardware(&client, dir, &nodes[3])
            .context("node-3 (server hardware)");
    }
    let scene = node0::Scene {
        lab: &lab,
        client: &client,
        dir,
        uuid: &uuid,
        machine: &nodes[0],
        name: nodes[0]["name"].as_str().unwrap_or("node-0"),
        digest: &digest,
    };
    let (node0, node1) = std::thread::scope(|scope| {
        let node1 = scope.spawn(|| silent_node(&client, &late, &nodes[1], &digest));
        let node0 = node0::lifecycle(&scene);
        (node0, node1.join())
    });
    let node1 = node1.map_err(|_| anyhow::anyhow!("node-1's thread panicked"))?;
    match (node0, node1) {
        (Ok(()), Ok(())) => {
            server_hardware::server_hardware(&client, dir, &nodes[3])
                .context("node-3 (server hardware)")?;
            // node-2 is known to no one: discovery, with a server of its own.
            drop(server);
            discovery::discovery(&lab, &nodes[2]).context("node-2 (discovery)")
        }
        (Err(error), Ok(())) => Err(error.context("node-0")),
        (Ok(()), Err(error)) => Err(error.context("node-1")),
        (Err(first), Err(second)) => Err(first.context(format!("node-0 (and node-1: {second:#})"))),
    }
}

/// How many times the machine's firmware started (power-on or reset): SeaBIOS prints its
/// banner on the serial console at each start, OVMF its boot manager's first load, and the
/// console keeps every boot.
fn firmware_starts(lab: &Lab, machine: &str) -> usize {
    let text = lab.console_since(machine, 0);
    text.matches("SeaBIOS (version").count() + text.matches(OVMF_START).count()
}

/// What OVMF writes on the serial console when it starts: its terminal's mode escape (its
/// release build prints no banner).
const OVMF_START: &str = "\x1b[=3h";

/// The magic number that opens an md superblock.
const MD_MAGIC: u32 = 0xa92b_4efc;

fn image_info(digest: &str) -> Value {
    json!({
        "image_source": "marker.img",
        "image_disk_format": "raw",
        "image_os_hash_algo": "sha256",
        "image_os_hash_value": digest.trim(),
    })
}
