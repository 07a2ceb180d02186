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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

#[path = "lab_lifecycle/bmc.rs"]
mod bmc;
#[path = "lab_lifecycle/discovery.rs"]
mod discovery;
#[path = "lab_lifecycle/server_hardware.rs"]
mod server_hardware;
#[path = "lab_lifecycle/silent_node.rs"]
mod silent_node;

use bmc::{bmc_patch, bmc_power, set_power};
use silent_node::silent_node;

const NAMESPACE: &str = "ferric-e2e";
const API: &str = "http://10.231.0.1:6385";
/// Generous: boots under TCG on a busy 2-core host take several times what lab-facts measured.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a node may wait for its agent before the callback timeout fails it.
const CALLBACK_TIMEOUT_SECS: u64 = 120;
/// How long an inspection may wait for the ramdisk's data.
const INSPECT_WAIT_TIMEOUT_SECS: u64 = 90;

fn ferric() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferric"))
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    ensure!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("inside"), Some(dir)) => inside(Path::new(dir)),
        _ => outside(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lab_lifecycle: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Builds the ramdisk and the test image, brings the lab up, runs the scenario inside its
/// namespace, and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/tmp/ferric-e2e-{}", std::process::id()));
    let boot = dir.join("boot");
    std::fs::create_dir_all(boot.join("images"))?;
    let started = Instant::now();
    let result = (|| {
        let mut build = ferric();
        build.args(["ramdisk", "build", "--output"]).arg(&boot);
        if let Some(agent) = std::env::var_os("FERRIC_E2E_AGENT") {
            build.arg("--agent").arg(agent);
        }
        let ramdisk = run(&mut build, "ferric ramdisk build")?;
        eprintln!("lab_lifecycle: ramdisk built:\n{}", ramdisk.trim_end());
        build_test_image(&dir)?;
        eprintln!(
            "lab_lifecycle: ramdisk and test image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        run(
            ferric()
                .args([
                    "lab",
                    "up",
                    "--nodes",
                    "4",
                    // node-3 has a real server's NIC and disk controllers.
                    "--hardware",
                    "virtio,virtio,virtio,server",
                    "--memory",
                    "512",
                    "--namespace",
                    NAMESPACE,
                ])
                .arg("--dir")
                .arg(dir.join("lab")),
            "ferric lab up",
        )?;
        let status = Command::new("ip")
            .args(["netns", "exec", NAMESPACE])
            .arg(std::env::current_exe()?)
            .arg("inside")
            .arg(&dir)
            .status()
            .context("cannot run the scenario inside the lab's namespace")?;
        ensure!(status.success(), "the scenario failed ({status})");
        Ok(())
    })();
    let down = run(
        ferric()
            .args(["lab", "down", "--namespace", NAMESPACE])
            .arg("--dir")
            .arg(dir.join("lab")),
        "ferric lab down",
    );
    match (result, down) {
        (Ok(()), Ok(_)) => {
            eprintln!(
                "lab_lifecycle: passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        (result, down) => {
            eprintln!(
                "lab_lifecycle: kept for inspection: {} (server.log, ferric.db, lab/node-*/console.log, lab/dnsmasq.log, lab/bmc.log)",
                dir.display()
            );
            result?;
            down.map(|_| ())
        }
    }
}

/// A 64 MiB disk whose `/init` prints `marker` on the serial console forever.
fn build_test_image(dir: &Path) -> anyhow::Result<()> {
    let marker = format!("FERRIC-E2E-MARKER-{}", std::process::id());
    let init = format!(
        "#!/bin/busybox sh\n\
         /bin/busybox mkdir -p /dev /proc\n\
         /bin/busybox mount -t devtmpfs dev /dev\n\
         while true; do echo {marker} > /dev/ttyS0; /bin/busybox sleep 2; done\n"
    );
    let busybox = std::fs::read("/bin/busybox").context("busybox-static is missing")?;
    let mut archive = Vec::new();
    {
        let mut gzip = flate2::write::GzEncoder::new(&mut archive, flate2::Compression::fast());
        let mut out: &mut dyn std::io::Write = &mut gzip;
        let entries: [(&str, u32, &[u8]); 4] = [
            ("bin", 0o040755, b""),
            ("dev", 0o040755, b""),
            ("bin/busybox", 0o100755, &busybox),
            ("init", 0o100755, init.as_bytes()),
        ];
        for (inode, (name, mode, data)) in (1u32..).zip(entries) {
            let mut writer = cpio::newc::Builder::new(name)
                .ino(inode)
                .mode(mode)
                .nlink(1)
                .write(out, u32::try_from(data.len())?);
            std::io::Write::write_all(&mut writer, data)?;
            out = writer.finish()?;
        }
        cpio::newc::trailer(out)?;
        gzip.finish()?;
    }
    let initramfs = dir.join("marker.initramfs");
    std::fs::write(&initramfs, archive)?;
    let kernel = std::fs::read_dir("/boot")?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("vmlinuz-"))
        })
        .max()
        .context("no /boot/vmlinuz-*: install linux-image-amd64")?;
    let image = dir.join("boot/images/marker.img");
    ferric_lab::image::BootImage {
        kernel,
        initramfs,
        append: "console=ttyS0 quiet".into(),
        size_mib: 64,
    }
    .build(&image, &dir.join("image-work"))?;
    std::fs::write(dir.join("marker"), &marker)?;
    let digest = sha256_hex(&std::fs::read(&image)?);
    std::fs::write(dir.join("marker.img.sha256"), digest)?;
    Ok(())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The API, as the test sees it.
struct Client {
    http: reqwest::blocking::Client,
}

impl Client {
    fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = self
            .http
            .request(method.clone(), format!("{API}{path}"))
            .header("X-OpenStack-Ironic-API-Version", "1.110");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().with_context(|| format!("{method} {path}"))?;
        let status = response.status().as_u16();
        let text = response.text()?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    fn expect(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        status: u16,
    ) -> anyhow::Result<Value> {
        let (got, body) = self.send(method.clone(), path, body)?;
        ensure!(
            got == status,
            "{method} {path}: expected {status}, got {got}: {body}"
        );
        Ok(body)
    }

    /// PUT …/states/provision, expecting 202. A 409 "locked" (the conductor still holds the
    /// node for a moment after it reached the state the test waited for) is retried for a
    /// while, as openstacksdk and the `baremetal` CLI retry NodeLocked.
    fn provision(&self, uuid: &str, body: Value) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let result = self.expect(
                reqwest::Method::PUT,
                &format!("/v1/nodes/{uuid}/states/provision"),
                Some(body.clone()),
                202,
            );
            match result {
                Err(error)
                    if error.to_string().contains("is locked by host")
                        && started.elapsed() < Duration::from_secs(60) =>
                {
                    eprintln!(
                        "lab_lifecycle: node {uuid} locked {:.1} s after the wait; retrying",
                        started.elapsed().as_secs_f64()
                    );
                    std::thread::sleep(Duration::from_millis(500));
                }
                result => return result.map(|_| ()),
            }
        }
    }

    fn node(&self, uuid: &str) -> anyhow::Result<Value> {
        self.expect(
            reqwest::Method::GET,
            &format!("/v1/nodes/{uuid}"),
            None,
            200,
        )
    }

    /// Waits until the node rests in `target`; a different resting or failed state is an
    /// error with the node's `last_error`.
    fn wait_for(&self, uuid: &str, target: &str) -> anyhow::Result<Value> {
        let started = Instant::now();
        loop {
            let node = self.node(uuid)?;
            let state = node["provision_state"].as_str().unwrap_or("?");
            // At rest: no task holds the node (an abort's clean-up runs after the state).
            if state == target {
                if node["reservation"].is_null() {
                    return Ok(node);
                }
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            let resting = node["target_provision_state"].is_null();
            let failed = state.ends_with("failed") || state == "error";
            if failed || (resting && !state.ends_with("wait")) {
                bail!(
                    "node {uuid} rests in {state}, not {target}: last_error {}",
                    node["last_error"]
                );
            }
            ensure!(
                started.elapsed() < PHASE_TIMEOUT,
                "node {uuid} still in {state} after {PHASE_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    fn patch(&self, uuid: &str, patch: Value) -> anyhow::Result<()> {
        self.expect(
            reqwest::Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(patch),
            200,
        )
        .map(|_| ())
    }

    /// Waits until the node has left `state` (a request to move on was accepted).
    fn wait_while(&self, uuid: &str, state: &str) -> anyhow::Result<()> {
        let started = Instant::now();
        while self.node(uuid)?["provision_state"] == state {
            ensure!(
                started.elapsed() < PHASE_TIMEOUT,
                "node {uuid} still in {state} after {PHASE_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Waits until the node's agent heartbeats (a heartbeat time other than `before`).
    fn wait_for_heartbeat(&self, uuid: &str, before: Option<&str>) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let node = self.node(uuid)?;
            let last = node["driver_internal_info"]["agent_last_heartbeat"].as_str();
            if last.is_some() && last != before {
                return Ok(());
            }
            ensure!(
                !node["provision_state"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("failed"),
                "node {uuid} failed while waiting for its agent: {}",
                node["last_error"]
            );
            ensure!(
                started.elapsed() < PHASE_TIMEOUT,
                "no heartbeat from node {uuid}'s agent after {PHASE_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// The server, started inside the namespace; killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn phase(name: &str, started: Instant) {
    eprintln!(
        "lab_lifecycle: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// How many times the machine's firmware started (power-on or reset): SeaBIOS prints its
/// banner on the serial console at each start, OVMF its boot manager's first load, and the
/// console keeps every boot.
fn firmware_starts(dir: &Path, machine: &str) -> usize {
    let text = console_since(dir, machine, 0);
    text.matches("SeaBIOS (version").count() + text.matches(OVMF_START).count()
}

/// What OVMF writes on the serial console when it starts: its terminal's mode escape (its
/// release build prints no banner).
const OVMF_START: &str = "\x1b[=3h";

/// The machine's console from byte `from` on.
fn console_since(dir: &Path, machine: &str, from: usize) -> String {
    let bytes = std::fs::read(dir.join(format!("lab/{machine}/console.log"))).unwrap_or_default();
    String::from_utf8_lossy(bytes.get(from..).unwrap_or_default()).into_owned()
}

/// The length of a file now (where to start reading what comes next).
fn file_len(path: &Path) -> usize {
    std::fs::metadata(path).map_or(0, |meta| usize::try_from(meta.len()).unwrap_or(0))
}

/// Whether the node's history mentions `text` since the `seen` entries already read; returns
/// the new count of entries too.
fn history_since(client: &Client, uuid: &str, seen: usize) -> anyhow::Result<(Vec<String>, usize)> {
    let history = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/history?detail=true"),
        None,
        200,
    )?;
    let events: Vec<String> = history["history"]
        .as_array()
        .context("no history")?
        .iter()
        .map(|entry| entry["event"].as_str().unwrap_or("").to_owned())
        .collect();
    let count = events.len();
    Ok((events.into_iter().skip(seen).collect(), count))
}

/// The scenario, run inside the lab's namespace.
fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("lab/lab.json"))?)?;
    let log = std::fs::File::create(dir.join("server.log"))?;
    let _server = Server(
        ferric()
            .arg("server")
            .args(["--api-listen", "10.231.0.1:6385", "--api-url", API])
            .args(["--boot-http-listen", "10.231.0.1:8080", "--boot-http-root"])
            .arg(dir.join("boot"))
            .current_dir(dir)
            .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
            .env("FERRIC_DEPLOY_KERNEL", "ferric-agent.kernel")
            .env("FERRIC_DEPLOY_RAMDISK", "ferric-agent.initramfs")
            .env(
                "FERRIC_DEPLOY_CALLBACK_TIMEOUT",
                CALLBACK_TIMEOUT_SECS.to_string(),
            )
            .env(
                "FERRIC_INSPECT_WAIT_TIMEOUT",
                INSPECT_WAIT_TIMEOUT_SECS.to_string(),
            )
            .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "5")
            .env("FERRIC_LOG_LEVEL", "info,ferric_api=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start ferric server")?,
    );
    let client = Client {
        http: reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?,
    };
    let up = Instant::now();
    while client.send(reqwest::Method::GET, "/v1", None).is_err() {
        ensure!(
            up.elapsed() < Duration::from_secs(120),
            "ferric server did not start; see server.log"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let digest = std::fs::read_to_string(dir.join("marker.img.sha256"))?;
    let nodes = lab["nodes"].as_array().context("lab.json has no nodes")?;
    let enroll = |machine: &Value, extra: Value| -> anyhow::Result<String> {
        let mut body = json!({
            "name": machine["name"],
            "driver": "redfish",
            "boot_interface": "pxe",
            "deploy_interface": "direct",
            "driver_info": {
                "redfish_address": machine["redfish_address"],
                "redfish_system_id": machine["redfish_system_id"],
                "redfish_username": machine["redfish_username"],
                "redfish_password": machine["redfish_password"],
            },
            "instance_info": image_info(&digest),
        });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let created = client.expect(reqwest::Method::POST, "/v1/nodes", Some(body), 201)?;
        let uuid = created["uuid"].as_str().context("no uuid")?.to_owned();
        client.expect(
            reqwest::Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": machine["mac"]})),
            201,
        )?;
        Ok(uuid)
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
    let (node0, node1) = std::thread::scope(|scope| {
        let node1 = scope.spawn(|| silent_node(&client, &late, &nodes[1], &digest));
        let node0 = lifecycle(&client, dir, &uuid, &nodes[0], &digest);
        (node0, node1.join())
    });
    let node1 = node1.map_err(|_| anyhow::anyhow!("node-1's thread panicked"))?;
    match (node0, node1) {
        (Ok(()), Ok(())) => {
            server_hardware::server_hardware(&client, dir, &nodes[3])
                .context("node-3 (server hardware)")?;
            // node-2 is known to no one: discovery, with a server of its own.
            drop(_server);
            discovery::discovery(dir, &nodes[2]).context("node-2 (discovery)")
        }
        (Err(error), Ok(())) => Err(error.context("node-0")),
        (Ok(()), Err(error)) => Err(error.context("node-1")),
        (Err(first), Err(second)) => Err(first.context(format!("node-0 (and node-1: {second:#})"))),
    }
}

/// The magic number that opens an md superblock.
const MD_MAGIC: u32 = 0xa92b_4efc;

fn read_at(path: &Path, offset: u64, len: usize) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0; len];
    std::fs::File::open(path)
        .and_then(|file| file.read_exact_at(&mut bytes, offset))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
}

fn image_info(digest: &str) -> Value {
    json!({
        "image_source": "marker.img",
        "image_disk_format": "raw",
        "image_os_hash_algo": "sha256",
        "image_os_hash_value": digest.trim(),
    })
}

/// node-0 (Redfish, fast track on): inspect; provide and deploy through the agent left
/// running by the phase before (no reboot into the ramdisk); boot from disk; undeploy (a cold
/// boot of the ramdisk); then, fast track off, the aborts: `abort` in `wait call-back`, and
/// seed 001's `DELETE /v1/nodes/{node}/provision` with nothing running (404) and during the
/// image write (202).
fn lifecycle(
    client: &Client,
    dir: &Path,
    uuid: &str,
    machine: &Value,
    digest: &str,
) -> anyhow::Result<()> {
    let name = machine["name"].as_str().unwrap_or("node-0");
    let marker = std::fs::read_to_string(dir.join("marker"))?;
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
    let inventory = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/inventory"),
        None,
        200,
    )?;
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

    // provide: cleaning runs on the agent that is up — no reboot, no `clean wait`.
    let starts = firmware_starts(dir, name);
    let (_, seen) = history_since(client, uuid, 0)?;
    let started = Instant::now();
    client.provision(uuid, json!({"target": "provide"}))?;
    let node = client.wait_for(uuid, "available")?;
    phase("cleaning (fast track: no reboot)", started);
    let (events, seen) = history_since(client, uuid, seen)?;
    ensure!(
        !events.iter().any(|event| event.contains("clean wait")),
        "fast-tracked cleaning waited for an agent: {events:?}"
    );
    ensure!(
        firmware_starts(dir, name) == starts,
        "the machine restarted during fast-tracked cleaning"
    );
    ensure!(
        node["power_state"] == "power on" && node["driver_internal_info"]["agent_url"].is_string(),
        "fast track keeps the machine on with its agent after cleaning: {node}"
    );

    // deploy: the image goes onto the disk through the same agent, then the machine boots it.
    let started = Instant::now();
    client.provision(uuid, json!({"target": "active"}))?;
    let node = client.wait_for(uuid, "active")?;
    phase("deploy (fast track: no reboot into the ramdisk)", started);
    let (events, _) = history_since(client, uuid, seen)?;
    ensure!(
        !events.iter().any(|event| event.contains("wait call-back")),
        "the fast-tracked deploy waited for an agent: {events:?}"
    );
    ensure!(
        node["driver_internal_info"]["deploy_progress"]["bytes_written"].as_u64() == Some(64 << 20),
        "the agent reported the bytes it wrote: {}",
        node["driver_internal_info"]
    );
    let console = dir.join(format!("lab/{name}/console.log"));
    let booted = Instant::now();
    loop {
        let text =
            String::from_utf8_lossy(&std::fs::read(&console).unwrap_or_default()).into_owned();
        if text.contains(marker.trim()) {
            break;
        }
        ensure!(
            booted.elapsed() < PHASE_TIMEOUT,
            "the deployed image did not print its marker; see {}",
            console.display()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    phase("boot from disk", booted);

    // A cold power cycle with no boot override at the BMC: the machine boots its disk by
    // itself (UEFI: the ESP's \EFI\BOOT\BOOTX64.EFI, no boot entry needed).
    let cycled = Instant::now();
    bmc_patch(
        machine,
        json!({"Boot": {"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled"}}),
    )?;
    let console_before = file_len(&console);
    set_power(client, uuid, "power off")?;
    ensure!(bmc_power(machine)? == "Off", "{name} did not power off");
    set_power(client, uuid, "power on")?;
    loop {
        if console_since(dir, name, console_before).contains(marker.trim()) {
            break;
        }
        ensure!(
            cycled.elapsed() < PHASE_TIMEOUT,
            "after a cold power cycle with no boot override the image did not boot; see {}",
            console.display()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    phase("cold power cycle, no boot override: boot from disk", cycled);
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

    // Seed 001: DELETE /v1/nodes/{node}/provision.
    let abort_path = format!("/v1/nodes/{uuid}/provision");
    let refused = client.expect(reqwest::Method::DELETE, &abort_path, None, 404)?;
    eprintln!("lab_lifecycle: DELETE with nothing running: 404 {refused}");
    let started = Instant::now();
    let console_before = file_len(&console);
    let before = client.node(uuid)?["driver_internal_info"]["agent_last_heartbeat"].clone();
    client.provision(uuid, json!({"target": "active"}))?;
    client.wait_while(uuid, "deploy failed")?;
    client.wait_for_heartbeat(uuid, before.as_str())?;
    phase(
        "power-on to first heartbeat (BIOS: SeaBIOS, iPXE ROM)",
        started,
    );
    ensure!(
        console_since(dir, name, console_before).contains("SeaBIOS (version"),
        "boot_mode:bios did not boot {name} in legacy mode; see {}",
        console.display()
    );
    let writing = Instant::now();
    loop {
        let node = client.node(uuid)?;
        let state = node["provision_state"].as_str().unwrap_or("?");
        if state == "deploying" && node["deploy_step"]["step"] == "write_image" {
            break;
        }
        ensure!(
            matches!(state, "deploying" | "wait call-back" | "deploy failed")
                && writing.elapsed() < PHASE_TIMEOUT,
            "{name} never showed the image being written (now {state}): {}",
            node["last_error"]
        );
        std::thread::sleep(Duration::from_millis(200));
    }
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
    let dhcp_before = file_len(&dhcp_log);
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
    loop {
        let node = client.node(uuid)?;
        let state = node["provision_state"].as_str().unwrap_or("?");
        if state == "deploying" && node["deploy_step"]["step"] == "wait" {
            break;
        }
        ensure!(
            matches!(state, "deploying" | "wait call-back" | "deploy failed")
                && started.elapsed() < PHASE_TIMEOUT,
            "{name} never showed the wait step (now {state}): {}",
            node["last_error"]
        );
        std::thread::sleep(Duration::from_millis(200));
    }
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
