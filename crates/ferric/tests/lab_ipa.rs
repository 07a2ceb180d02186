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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

const NAMESPACE: &str = "ferric-ipa-e2e";
const API: &str = "http://10.231.0.1:6385";
/// Generous: IPA's ramdisk is ~80 MiB and starts Python under TCG on a busy 2-core host.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a node may wait for its agent, and an inspection for its data.
const CALLBACK_TIMEOUT_SECS: u64 = 420;
/// IPA's Python, udev and the ramdisk's size need more than the lab's default 512 MiB.
const MEMORY_MIB: &str = "2048";

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
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
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
            eprintln!("lab_ipa: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Builds (or takes from the cache) the IPA ramdisk and the test image, brings the lab up,
/// runs the scenario inside its namespace, and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/tmp/ferric-ipa-e2e-{}", std::process::id()));
    let boot = dir.join("boot");
    std::fs::create_dir_all(boot.join("images"))?;
    let started = Instant::now();
    let result = (|| {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-ipa-ramdisk.sh");
        let built = run(
            Command::new(&script).arg(&boot),
            "scripts/build-ipa-ramdisk.sh",
        )?;
        eprintln!("lab_ipa: IPA ramdisk:\n{}", built.trim_end());
        build_test_image(&dir)?;
        eprintln!(
            "lab_ipa: ramdisk and test image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        run(
            ferric()
                .args(["lab", "up", "--nodes", "1", "--memory", MEMORY_MIB])
                .args(["--namespace", NAMESPACE])
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
                "lab_ipa: passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        (result, down) => {
            eprintln!(
                "lab_ipa: kept for inspection: {} (server.log, ferric.db, lab/node-0/console.log with IPA's log, lab/dnsmasq.log, lab/bmc.log)",
                dir.display()
            );
            result?;
            down.map(|_| ())
        }
    }
}

/// A 64 MiB whole-disk image whose `/init` prints a fresh marker on the serial console.
fn build_test_image(dir: &Path) -> anyhow::Result<()> {
    let marker = format!("FERRIC-IPA-E2E-MARKER-{}", std::process::id());
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
    fn expect(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        status: u16,
    ) -> anyhow::Result<Value> {
        let mut request = self
            .http
            .request(method.clone(), format!("{API}{path}"))
            .header("X-OpenStack-Ironic-API-Version", "1.110");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().with_context(|| format!("{method} {path}"))?;
        let got = response.status().as_u16();
        let text = response.text()?;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        ensure!(
            got == status,
            "{method} {path}: expected {status}, got {got}: {body}"
        );
        Ok(body)
    }

    fn provision(&self, uuid: &str, target: &str) -> anyhow::Result<()> {
        self.expect(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({ "target": target })),
            202,
        )
        .map(|_| ())
    }

    fn node(&self, uuid: &str) -> anyhow::Result<Value> {
        self.expect(
            reqwest::Method::GET,
            &format!("/v1/nodes/{uuid}"),
            None,
            200,
        )
    }

    /// Waits until the node rests in `target`; a failed state or another resting one is an
    /// error with the node's `last_error`.
    fn wait_for(&self, uuid: &str, target: &str) -> anyhow::Result<Value> {
        let started = Instant::now();
        loop {
            let node = self.node(uuid)?;
            let state = node["provision_state"].as_str().unwrap_or("?");
            if state == target && node["reservation"].is_null() {
                return Ok(node);
            }
            let resting = node["target_provision_state"].is_null();
            let failed = state.ends_with("failed") || state == "error";
            if state != target && (failed || (resting && !state.ends_with("wait"))) {
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
}

/// The server, started inside the namespace; stopped when dropped.
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
        "lab_ipa: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The scenario, run inside the lab's namespace.
fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("lab/lab.json"))?)?;
    let machine = &lab["nodes"][0];
    let name = machine["name"].as_str().unwrap_or("node-0");
    let log = std::fs::File::create(dir.join("server.log"))?;
    let _server = Server(
        ferric()
            .arg("server")
            .args(["--api-listen", "10.231.0.1:6385", "--api-url", API])
            .args(["--boot-http-listen", "10.231.0.1:8080", "--boot-http-root"])
            .arg(dir.join("boot"))
            .current_dir(dir)
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
    while client
        .expect(reqwest::Method::GET, "/v1", None, 200)
        .is_err()
    {
        ensure!(
            up.elapsed() < Duration::from_secs(120),
            "ferric server did not start; see server.log"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let digest = std::fs::read_to_string(dir.join("marker.img.sha256"))?;
    let started = Instant::now();
    let created = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "name": name,
            "driver": "redfish",
            "boot_interface": "ipxe",
            "deploy_interface": "direct",
            "inspect_interface": "agent",
            "driver_info": {
                "redfish_address": machine["redfish_address"],
                "redfish_system_id": machine["redfish_system_id"],
                "redfish_username": machine["redfish_username"],
                "redfish_password": machine["redfish_password"],
            },
            "instance_info": {
                "image_source": "marker.img",
                "image_disk_format": "raw",
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": digest.trim(),
            },
        })),
        201,
    )?;
    let uuid = created["uuid"].as_str().context("no uuid")?.to_owned();
    client.expect(
        reqwest::Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": machine["mac"]})),
        201,
    )?;
    client.provision(&uuid, "manage")?;
    client.wait_for(&uuid, "manageable")?;
    phase("enroll + manage", started);

    let started = Instant::now();
    client.provision(&uuid, "inspect")?;
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
    client.provision(&uuid, "provide")?;
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
    client.provision(&uuid, "active")?;
    client.wait_for(&uuid, "active")?;
    phase("deploy (IPA writes the image)", started);
    // IPA moves the GPT's backup header to the end of the disk after writing (as Ferric's
    // agent does), so the primary header (LBA 1) differs from the image's in the backup
    // header's location and the checksum; everything after it is the image.
    let written = read_at(&disk, image.len())?;
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

fn read_at(path: &Path, len: usize) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0; len];
    std::fs::File::open(path)
        .and_then(|file| file.read_exact_at(&mut bytes, 0))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
}
