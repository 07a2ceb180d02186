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

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

const NAMESPACE: &str = "ferric-part-e2e";
const API: &str = "http://10.231.0.1:6385";
/// Generous: boots under TCG on a busy 2-core host take several times what lab-facts measured.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// The root filesystem's UUID, given to mkfs.ext4: the agent must report it.
const ROOT_UUID: &str = "6f3a2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
/// The test image's root filesystem size.
const ROOT_FS_MIB: u64 = 64;

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
            eprintln!("lab_partition: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn phase(name: &str, started: Instant) {
    eprintln!(
        "lab_partition: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Builds the ramdisk and the root filesystem image, brings a one-machine lab up, runs the
/// scenario inside its namespace, and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/tmp/ferric-partition-e2e-{}", std::process::id()));
    let boot = dir.join("boot");
    std::fs::create_dir_all(boot.join("images"))?;
    let started = Instant::now();
    let result = (|| {
        let mut build = ferric();
        build.args(["ramdisk", "build", "--output"]).arg(&boot);
        if let Some(agent) = std::env::var_os("FERRIC_E2E_AGENT") {
            build.arg("--agent").arg(agent);
        }
        run(&mut build, "ferric ramdisk build")?;
        build_root_image(&dir)?;
        phase("ramdisk and root filesystem image built", started);
        run(
            ferric()
                .args(["lab", "up", "--nodes", "1", "--memory", "512"])
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
                "lab_partition: passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        (result, down) => {
            eprintln!(
                "lab_partition: kept for inspection: {} (server.log, lab/node-0/console.log)",
                dir.display()
            );
            result?;
            down.map(|_| ())
        }
    }
}

/// The root filesystem image: its kernel boots an initramfs whose `/init` prints the marker.
fn build_root_image(dir: &Path) -> anyhow::Result<()> {
    let marker = format!("FERRIC-PARTITION-MARKER-{}", std::process::id());
    let init = format!(
        "#!/bin/busybox sh\n\
         /bin/busybox mkdir -p /dev\n\
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
    let image = dir.join("boot/images/root.img");
    ferric_lab::image::RootFsImage {
        kernel,
        initramfs,
        append: "console=ttyS0 quiet".into(),
        size_mib: ROOT_FS_MIB,
        uuid: ROOT_UUID.into(),
    }
    .build(&image, &dir.join("image-work"))?;
    std::fs::write(dir.join("marker"), &marker)?;
    let digest = {
        use sha2::Digest;
        sha2::Sha256::digest(std::fs::read(&image)?)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>()
    };
    std::fs::write(dir.join("root.img.sha256"), digest)?;
    Ok(())
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

    /// Asks for `target` and waits until the node rests in `state`, retrying a 409 "locked"
    /// for a while as clients retry NodeLocked.
    fn provision(&self, uuid: &str, target: &str, state: &str) -> anyhow::Result<Value> {
        let path = format!("/v1/nodes/{uuid}/states/provision");
        let asked = Instant::now();
        loop {
            match self.expect(
                reqwest::Method::PUT,
                &path,
                Some(json!({"target": target})),
                202,
            ) {
                Err(error)
                    if error.to_string().contains("is locked by host")
                        && asked.elapsed() < Duration::from_secs(60) =>
                {
                    std::thread::sleep(Duration::from_millis(500));
                }
                result => break result.map(drop)?,
            }
        }
        loop {
            let node = self.expect(
                reqwest::Method::GET,
                &format!("/v1/nodes/{uuid}"),
                None,
                200,
            )?;
            let now = node["provision_state"].as_str().unwrap_or("?");
            if now == state && node["reservation"].is_null() {
                return Ok(node);
            }
            if now.ends_with("failed") || now == "error" {
                bail!(
                    "node {uuid} went to {now}, not {state}: last_error {}",
                    node["last_error"]
                );
            }
            ensure!(
                asked.elapsed() < PHASE_TIMEOUT,
                "node {uuid} still in {now} after {PHASE_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_secs(1));
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

/// The scenario, run inside the lab's namespace.
fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("lab/lab.json"))?)?;
    let machine = &lab["nodes"][0];
    let name = machine["name"].as_str().context("lab.json: no node name")?;
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
            .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "5")
            .env("FERRIC_LOG_LEVEL", "info")
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
    let digest = std::fs::read_to_string(dir.join("root.img.sha256"))?;
    let created = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "name": name,
            "driver": "redfish",
            "boot_interface": "pxe",
            "deploy_interface": "direct",
            "automated_clean": false,
            "driver_info": {
                "redfish_address": machine["redfish_address"],
                "redfish_system_id": machine["redfish_system_id"],
                "redfish_username": machine["redfish_username"],
                "redfish_password": machine["redfish_password"],
            },
            "properties": {"capabilities": "boot_mode:uefi"},
            "instance_info": {
                "image_source": "root.img",
                "image_type": "partition",
                "root_gb": 1,
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

    let started = Instant::now();
    client.provision(&uuid, "manage", "manageable")?;
    phase("manage", started);
    let started = Instant::now();
    client.provision(&uuid, "provide", "available")?;
    phase("provide (no cleaning)", started);
    let started = Instant::now();
    let node = client.provision(&uuid, "active", "active")?;
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
            "the deployed partition image did not print its marker; see {}",
            console.display()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
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
    let disk = std::fs::File::open(dir.join(format!("lab/{name}/disk.img")))?;
    let mut header = [0u8; 8];
    disk.read_exact_at(&mut header, 512)?;
    ensure!(&header == b"EFI PART", "the disk has no GPT");
    let mut entries = [0u8; 256];
    disk.read_exact_at(&mut entries, 1024)?;
    let esp_type = uuid::uuid!("C12A7328-F81F-11D2-BA4B-00A0C93EC93B").to_bytes_le();
    ensure!(entries[..16] == esp_type, "partition 1 is not an ESP");
    let root_start = u64::from_le_bytes(entries[128 + 32..128 + 40].try_into()?) * 512;
    let image = std::fs::read(dir.join("boot/images/root.img"))?;
    let mut written = vec![0u8; 1 << 20];
    disk.read_exact_at(&mut written, root_start)?;
    ensure!(
        written == image[..written.len()],
        "partition 2 does not start with the root filesystem image"
    );
    Ok(())
}
