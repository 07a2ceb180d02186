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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

const NAMESPACE: &str = "ferric-raid-e2e";
const API: &str = "http://10.231.0.1:6385";
/// Generous: boots under TCG on a busy 2-core host take several times what lab-facts measured.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);

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
            eprintln!("lab_raid: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A 64 MiB disk whose `/init` prints `marker` on the serial console forever, and a live ISO
/// that boots the same kernel and initramfs (`boot/images/live.iso`).
fn build_test_image(dir: &Path) -> anyhow::Result<()> {
    let marker = format!("FERRIC-RAID-MARKER-{}", std::process::id());
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
        kernel: kernel.clone(),
        initramfs: initramfs.clone(),
        append: "console=ttyS0 quiet".into(),
        size_mib: 64,
    }
    .build(&image, &dir.join("image-work"))?;
    std::fs::write(dir.join("marker"), &marker)?;
    std::fs::write(
        dir.join("marker.img.sha256"),
        sha256_hex(&std::fs::read(&image)?),
    )?;
    build_live_iso(dir, &kernel, &initramfs)
}

/// A live ISO (BIOS and UEFI, `grub-mkrescue`) whose GRUB entry boots `kernel` and
/// `initramfs` from the CD with the serial console.
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
    run(
        Command::new("grub-mkrescue")
            .arg("-o")
            .arg(dir.join("boot/images/live.iso"))
            .arg(&tree),
        "grub-mkrescue (grub-common, grub-pc-bin, grub-efi-amd64-bin, xorriso, mtools)",
    )?;
    Ok(())
}

/// Builds the ramdisk and the test image, brings up a one-machine lab, runs the scenario
/// inside the namespace and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/tmp/ferric-raid-{}", std::process::id()));
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
        build_test_image(&dir)?;
        eprintln!(
            "lab_raid: ramdisk and test image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        run(
            ferric()
                .args(["lab", "up", "--nodes", "2", "--memory", "512"])
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
                "lab_raid: passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        (result, down) => {
            eprintln!(
                "lab_raid: kept for inspection: {} (server.log, lab/node-0/console.log, \
                 lab/bmc.log)",
                dir.display()
            );
            result?;
            down.map(|_| ())
        }
    }
}

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

    fn provision(&self, uuid: &str, body: Value) -> anyhow::Result<()> {
        self.expect(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(body),
            202,
        )
        .map(drop)
    }

    fn node(&self, uuid: &str) -> anyhow::Result<Value> {
        self.expect(
            reqwest::Method::GET,
            &format!("/v1/nodes/{uuid}"),
            None,
            200,
        )
    }

    /// Waits until the node rests in `target`; another resting or failed state is an error
    /// with its `last_error`.
    fn wait_for(&self, uuid: &str, target: &str) -> anyhow::Result<Value> {
        let started = Instant::now();
        loop {
            let node = self.node(uuid)?;
            let state = node["provision_state"].as_str().unwrap_or("?");
            if state == target && node["reservation"].is_null() {
                return Ok(node);
            }
            let resting = node["target_provision_state"].is_null();
            if state != target
                && (state.ends_with("failed") || (resting && !state.ends_with("wait")))
            {
                bail!(
                    "node {uuid} rests in {state}, not {target}: last_error {}",
                    node["last_error"]
                );
            }
            ensure!(
                started.elapsed() < PHASE_TIMEOUT,
                "node {uuid} still in {state} after {PHASE_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
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
        "lab_raid: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn read_at(path: &Path, offset: u64, len: usize) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0; len];
    std::fs::File::open(path)
        .and_then(|file| file.read_exact_at(&mut bytes, offset))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
}

fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("lab/lab.json"))?)?;
    let machine = &lab["nodes"][0];
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
            .env("FERRIC_LOG_LEVEL", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start ferric server")?,
    );
    let client = Client {
        http: reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
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
    let marker = std::fs::read_to_string(dir.join("marker"))?;

    let started = Instant::now();
    let created = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "name": machine["name"],
            "driver": "redfish",
            "boot_interface": "pxe",
            "deploy_interface": "direct",
            "raid_interface": "redfish",
            "automated_clean": false,
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
    client.provision(&uuid, json!({"target": "manage"}))?;
    client.wait_for(&uuid, "manageable")?;
    client.expect(
        reqwest::Method::PUT,
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
    client.provision(&uuid, json!({"target": "provide"}))?;
    client.wait_for(&uuid, "available")?;
    client.provision(&uuid, json!({"target": "active"}))?;
    let deployed = client.wait_for(&uuid, "active")?;
    phase("deploy onto the volume (agent, root device hint)", started);
    ensure!(
        deployed["driver_internal_info"]["root_uuid_or_disk_id"].is_string()
            || deployed["last_error"].is_null(),
        "deploy ended with an error: {}",
        deployed["last_error"]
    );

    let console = dir.join("lab/node-0/console.log");
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
    phase("boot from the RAID volume", booted);

    // The image is on the volume (its GPT's primary header may differ: the agent moves the
    // backup header to the end of the disk), and not on the machine's own disk.
    let image = std::fs::read(dir.join("boot/images/marker.img"))?;
    let without_gpt_header = |bytes: &[u8]| [&bytes[..512], &bytes[1024..]].concat();
    let written = read_at(&volume, 0, image.len())?;
    ensure!(
        without_gpt_header(&written) == without_gpt_header(&image),
        "{} does not hold the deployed image",
        volume.display()
    );
    let own = read_at(&dir.join("lab/node-0/disk.img"), 512, 8)?;
    ensure!(
        own != *b"EFI PART",
        "the machine's own disk got the image too: the root device hint was not followed"
    );
    live_iso(&client, dir, &lab["nodes"][1], marker.trim())
}

/// node-1: the `ramdisk` deploy interface boots `instance_info.boot_iso` from virtual media.
fn live_iso(client: &Client, dir: &Path, machine: &Value, marker: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let created = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "name": machine["name"],
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "deploy_interface": "ramdisk",
            "automated_clean": false,
            "driver_info": {
                "redfish_address": machine["redfish_address"],
                "redfish_system_id": machine["redfish_system_id"],
                "redfish_username": machine["redfish_username"],
                "redfish_password": machine["redfish_password"],
            },
            "instance_info": {"boot_iso": "images/live.iso"},
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
    client.provision(&uuid, json!({"target": "manage"}))?;
    client.wait_for(&uuid, "manageable")?;
    client.provision(&uuid, json!({"target": "provide"}))?;
    client.wait_for(&uuid, "available")?;
    phase("live ISO node: enroll + manage + provide", started);

    let started = Instant::now();
    client.provision(&uuid, json!({"target": "active"}))?;
    client.wait_for(&uuid, "active")?;
    phase(
        "live ISO deploy (ramdisk interface: ISO inserted, CD boot)",
        started,
    );
    let media = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/vmedia"),
        None,
        200,
    )?;
    ensure!(
        media["vmedia"]
            .as_array()
            .is_some_and(|slots| slots.iter().any(|slot| slot["inserted"] == true
                && slot["image_url"]
                    .as_str()
                    .is_some_and(|image| image.ends_with("live.iso")))),
        "the live ISO is not in the machine's CD drive: {media}"
    );
    let console = dir.join("lab/node-1/console.log");
    let booted = Instant::now();
    loop {
        let text =
            String::from_utf8_lossy(&std::fs::read(&console).unwrap_or_default()).into_owned();
        if text.contains(marker) {
            break;
        }
        ensure!(
            booted.elapsed() < PHASE_TIMEOUT,
            "the live ISO did not print its marker; see {}",
            console.display()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    phase("live ISO: active to its marker on the console", booted);
    Ok(())
}
