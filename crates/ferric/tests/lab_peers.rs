//! End-to-end: three UEFI lab machines deploy one raw image at once with peer-assisted
//! delivery (`image_peer_delivery`, docs/peers.md), through the real agent ramdisk and the
//! conductor's image cache (`image_download_source = local`): the agents trade the image's
//! pieces over the lab's bridge, and the boot file server's log shows that the conductor sent
//! fewer than three copies of it.
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`; the agent built
//! beside the `ferric` binary, or named by `FERRIC_E2E_AGENT`): `cargo test -p ferric --features
//! lab-e2e --test lab_peers`. Like `lab_partition` it is a `harness = false` binary that runs
//! itself again inside the lab's namespace.
//!
//! Phases, each timed: manage and provide the three nodes (no cleaning); deploy them at once
//! (power-on → agents → pieces from each other and the conductor → `active`). Then the checks:
//! every disk holds the image, and the bytes the conductor served from its cache (its log's
//! "image cache token served" lines, one per request, whole or by range) add up to fewer than
//! three images.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferric_testkit::lab::{self, API, Client, Lab, enroll_machine};
use serde_json::json;

const SUITE: &str = "lab_peers";
const NAMESPACE: &str = "ferric-peers-e2e";
/// Generous: boots under TCG on a busy 2-core host take several times what lab-facts measured.
const PHASE_TIMEOUT: Duration = Duration::from_secs(900);
/// The image: 12 pieces of the conductor's 4 MiB.
const IMAGE_MIB: usize = 48;
/// Where the lab's boot file server serves the run's `boot/` directory.
const BOOT_URL: &str = "http://10.231.0.1:8080";

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

/// Builds the ramdisk and the image, brings a three-machine lab up, runs the scenario inside
/// its namespace, and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(
        SUITE,
        NAMESPACE,
        "ferric-peers-e2e",
        env!("CARGO_BIN_EXE_ferric"),
    );
    lab.outside("server.log, lab/node-*/console.log", || {
        let started = Instant::now();
        lab.build_ramdisk()?;
        build_image(&lab.dir)?;
        phase("ramdisk and image built", started);
        lab.up(&["--nodes", "3", "--memory", "512"])?;
        lab.run_inside()
    })
}

/// `boot/images/peers.img`: a GPT with one partition, then pseudo-random bytes (nothing in it
/// compresses or is skipped); its SHA-256 in `peers.img.sha256`.
fn build_image(dir: &Path) -> anyhow::Result<()> {
    let mut image = std::io::Cursor::new(vec![0u8; IMAGE_MIB << 20]);
    let mut gpt = gptman::GPT::new_from(&mut image, 512, [5; 16])?;
    gpt[1] = gptman::GPTPartitionEntry {
        partition_type_guid: [0x11; 16],
        unique_partition_guid: [0x55; 16],
        starting_lba: 2048,
        ending_lba: ((IMAGE_MIB << 20) / 512) as u64 - 100,
        attribute_bits: 0,
        partition_name: "root".into(),
    };
    gpt.write_into(&mut image)?;
    let mut image = image.into_inner();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for byte in &mut image[1 << 20..] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    std::fs::create_dir_all(dir.join("boot/images"))?;
    std::fs::write(dir.join("boot/images/peers.img"), &image)?;
    std::fs::write(dir.join("peers.img.sha256"), lab::sha256_hex(&image))?;
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
    ensure!(machines.len() >= 3, "lab.json: fewer than three machines");
    let client = Client::new(SUITE, API, Duration::from_secs(60), PHASE_TIMEOUT)?;
    let mut command = lab.server_command();
    command
        .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
        .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "5")
        .env("FERRIC_IMAGE_DOWNLOAD_SOURCE", "local")
        .env("FERRIC_IMAGE_PEER_DELIVERY", "true");
    let _server = lab.server(command, &client)?;
    let digest = std::fs::read_to_string(dir.join("peers.img.sha256"))?;
    let mut nodes = Vec::new();
    for machine in &machines[..3] {
        nodes.push(enroll_machine(
            &client,
            machine,
            json!({
                "automated_clean": false,
                "properties": {"capabilities": "boot_mode:uefi"},
                "instance_info": {
                    "image_source": format!("{BOOT_URL}/images/peers.img"),
                    "image_disk_format": "raw",
                    "image_os_hash_algo": "sha256",
                    "image_os_hash_value": digest.trim(),
                },
            }),
        )?);
    }

    let started = Instant::now();
    for (target, rest) in [("manage", "manageable"), ("provide", "available")] {
        for uuid in &nodes {
            client.put_provision(uuid, target)?;
        }
        for uuid in &nodes {
            client.wait_for(uuid, rest)?;
        }
    }
    phase("manage and provide (no cleaning)", started);
    let started = Instant::now();
    for uuid in &nodes {
        client.put_provision(uuid, "active")?;
    }
    for uuid in &nodes {
        client.wait_for(uuid, "active")?;
    }
    phase(
        "deploy three at once (power-on → agents → pieces from each other → active)",
        started,
    );

    let image = std::fs::read(dir.join("boot/images/peers.img"))?;
    for machine in &machines[..3] {
        let name = machine["name"].as_str().context("lab.json: no node name")?;
        let disk = dir.join(format!("lab/{name}/disk.img"));
        // From 1 MiB on: the agent fixes the GPT's first sectors for the disk's size.
        let written = lab::read_at(&disk, 1 << 20, image.len() - (1 << 20))?;
        ensure!(
            written == image[1 << 20..],
            "{name}'s disk does not hold the image"
        );
    }
    // What each agent says it took from where (its log is on the machine's console).
    for machine in &machines[..3] {
        let name = machine["name"].as_str().context("lab.json: no node name")?;
        for line in lab.console_since(name, 0).lines().filter(|line| {
            [
                "image delivered",
                "peer failed",
                "tracker",
                "conductor failed",
            ]
            .iter()
            .any(|needle| line.contains(needle))
        }) {
            eprintln!("{SUITE}: {name}: {}", line.trim());
        }
    }
    let log = std::fs::read_to_string(dir.join("server.log"))?;
    let sent = served_bytes(&log, image.len() as u64);
    let copies = sent as f64 / image.len() as f64;
    eprintln!(
        "{SUITE}: the conductor served {sent} bytes of the {} byte image from its cache: {copies:.2} copies for three machines",
        image.len()
    );
    ensure!(
        copies < 3.0,
        "the conductor sent {copies:.2} copies: the agents did not take pieces from each other"
    );
    Ok(())
}

/// The bytes the conductor's cache served, from its log's "image cache token served" lines:
/// a whole file (`whole`), or a range `bytes=<first>-<last>`.
fn served_bytes(log: &str, size: u64) -> u64 {
    log.lines()
        .filter(|line| line.contains("image cache token served"))
        .map(|line| {
            let Some(at) = line.find("bytes=") else {
                return size;
            };
            let range = line[at + "bytes=".len()..]
                .split(|c: char| !(c.is_ascii_digit() || c == '-'))
                .next()
                .unwrap_or_default();
            match range.split_once('-') {
                Some((first, last)) => match (first.parse::<u64>(), last.parse::<u64>()) {
                    (Ok(first), Ok(last)) if last >= first => last - first + 1,
                    _ => size,
                },
                None => size,
            }
        })
        .sum()
}
