//! End-to-end: a live ISO deployed with the `ramdisk` deploy interface through Redfish
//! virtual media, as Metal3's baremetal-operator drives it (issue 27): BMO registers a
//! `redfish-virtualmedia` host with `deploy_interface: ramdisk` when its image is a live ISO
//! (`ironic.go:842`), sets `instance_info.boot_iso` (`ironic.go:573`), turns automated
//! cleaning off and deploys with an empty config drive (`ironic.go:1292`).
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`, which installs
//! GRUB and xorriso): `cargo test -p ferric --features lab-e2e --test lab_metal3`. Like
//! `lab_vmedia` it is a `harness = false` binary that runs itself again inside the lab's
//! namespace.
//!
//! The live ISO is built here with `grub-mkrescue` from the agent ramdisk's kernel and
//! initramfs (any bootable ISO would do), with a marker on its kernel command line. Phases,
//! each timed: enroll, manage (the lab BMC verified), provide, deploy (`active` at once: no
//! disk is written), the machine booting the ISO from the virtual CD (the marker on its
//! serial console; the disk file untouched), and undeploy (powered off, the ISO ejected).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

const NAMESPACE: &str = "ferric-metal3-e2e";
const API: &str = "http://10.231.0.1:6385";
const PHASE_TIMEOUT: Duration = Duration::from_secs(300);
/// On the live ISO's kernel command line: the console shows it when the ISO booted.
const MARKER: &str = "ferric.live_iso=metal3";

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
            eprintln!("lab_metal3: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// A live ISO: the agent's kernel and initramfs behind a GRUB menu (BIOS and UEFI) whose
/// kernel command line carries [`MARKER`].
fn build_live_iso(boot: &Path, output: &Path) -> anyhow::Result<()> {
    let tree = boot.join("live-tree");
    std::fs::create_dir_all(tree.join("boot/grub"))?;
    std::fs::create_dir_all(tree.join("live"))?;
    std::fs::copy(boot.join("ferric-agent.kernel"), tree.join("live/vmlinuz"))?;
    std::fs::copy(
        boot.join("ferric-agent.initramfs"),
        tree.join("live/initrd"),
    )?;
    std::fs::write(
        tree.join("boot/grub/grub.cfg"),
        format!(
            "set timeout=0\nset default=0\n\
             serial --unit=0 --speed=115200\n\
             terminal_input serial console\nterminal_output serial console\n\
             menuentry \"Live ISO\" {{\n\
             \x20 linux /live/vmlinuz console=ttyS0,115200 {MARKER}\n\
             \x20 initrd /live/initrd\n\
             }}\n"
        ),
    )?;
    run(
        Command::new("grub-mkrescue")
            .arg("-o")
            .arg(output)
            .arg(&tree),
        "grub-mkrescue",
    )?;
    std::fs::remove_dir_all(&tree)?;
    Ok(())
}

/// Builds the ramdisk and the live ISO, brings up a one-machine lab, runs the scenario inside
/// the namespace and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/tmp/ferric-metal3-{}", std::process::id()));
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
        build_live_iso(&boot, &boot.join("images/live.iso"))?;
        eprintln!(
            "lab_metal3: ramdisk and live ISO ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let lab = |args: &[&str], what: &str| {
            run(
                ferric()
                    .arg("lab")
                    .args(args)
                    .args(["--namespace", NAMESPACE])
                    .arg("--dir")
                    .arg(dir.join("lab")),
                what,
            )
        };
        lab(&["up", "--nodes", "1", "--memory", "512"], "ferric lab up")?;
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
                "lab_metal3: passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        (result, down) => {
            eprintln!(
                "lab_metal3: kept for inspection: {} (server.log, lab/node-0/console.log, \
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
    /// One request as BMO sends it (microversion 1.110).
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

    fn provision(&self, uuid: &str, body: Value) -> anyhow::Result<()> {
        self.expect(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(body),
            202,
        )
        .map(drop)
    }

    /// Waits until the node rests in `target`; another resting or failed state is an error
    /// with its `last_error`.
    fn wait_for(&self, uuid: &str, target: &str) -> anyhow::Result<Value> {
        let started = Instant::now();
        loop {
            let node = self.expect(
                reqwest::Method::GET,
                &format!("/v1/nodes/{uuid}"),
                None,
                200,
            )?;
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

    fn cdrom(&self, uuid: &str) -> anyhow::Result<Value> {
        let media = self.expect(
            reqwest::Method::GET,
            &format!("/v1/nodes/{uuid}/vmedia"),
            None,
            200,
        )?;
        media["vmedia"]
            .as_array()
            .and_then(|slots| slots.iter().find(|slot| slot["device_type"] == "cdrom"))
            .cloned()
            .with_context(|| format!("no virtual CD: {media}"))
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
        "lab_metal3: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The first 16 MiB of the machine's disk file (where a deploy would have written).
fn disk_head(disk: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut head = Vec::new();
    std::fs::File::open(disk)
        .with_context(|| format!("cannot open {}", disk.display()))?
        .take(16 << 20)
        .read_to_end(&mut head)?;
    Ok(head)
}

fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("lab/lab.json"))?)?;
    let machine = &lab["nodes"][0];
    let mac = machine["mac"]
        .as_str()
        .context("lab.json: no MAC")?
        .to_owned();
    let log = std::fs::File::create(dir.join("server.log"))?;
    let _server = Server(
        ferric()
            .arg("server")
            .args(["--api-listen", "10.231.0.1:6385", "--api-url", API])
            .args(["--boot-http-listen", "10.231.0.1:8080", "--boot-http-root"])
            .arg(dir.join("boot"))
            .current_dir(dir)
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
    let disk = dir.join("lab/node-0/disk.img");
    let disk_before = disk_head(&disk)?;

    // register.go:301 with pkg/hardwareutils/bmc/redfish_virtualmedia.go's interfaces and
    // ironic.go:842's deploy interface for a live ISO.
    let started = Instant::now();
    let created = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "firmware_interface": "redfish",
            "raid_interface": "redfish",
            "deploy_interface": "ramdisk",
            "inspect_interface": "agent",
            "name": "metal3~live-host",
            "disable_power_off": false,
            "driver_info": {
                "redfish_address": machine["redfish_address"],
                "redfish_system_id": machine["redfish_system_id"],
                "redfish_username": machine["redfish_username"],
                "redfish_password": machine["redfish_password"],
            },
            "properties": {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"},
        })),
        201,
    )?;
    let uuid = created["uuid"].as_str().context("no uuid")?.to_owned();
    client.expect(
        reqwest::Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": mac, "pxe_enabled": true})),
        201,
    )?;
    phase("enroll", started);

    let started = Instant::now();
    client.provision(&uuid, json!({"target": "manage"}))?;
    client.wait_for(&uuid, "manageable")?;
    // ironic.go:1361 (cleaning disabled for a live ISO), then ironic.go:1263 provide.
    client.expect(
        reqwest::Method::PATCH,
        &format!("/v1/nodes/{uuid}"),
        Some(json!([{"op": "add", "path": "/automated_clean", "value": false}])),
        200,
    )?;
    client.provision(&uuid, json!({"target": "provide"}))?;
    client.wait_for(&uuid, "available")?;
    phase("manage + provide", started);

    // ironic.go:573 setLiveIsoUpdateOptsForNode, ironic.go:132 validate, ironic.go:1292.
    let started = Instant::now();
    client.expect(
        reqwest::Method::PATCH,
        &format!("/v1/nodes/{uuid}"),
        Some(json!([
            {"op": "add", "path": "/instance_uuid", "value": "0c8f5b7e-5d0a-4f3e-9b1c-2a4d6e8f0a1b"},
            {"op": "add", "path": "/instance_info/capabilities", "value": {}},
            {"op": "add", "path": "/instance_info/boot_iso",
             "value": "http://10.231.0.1:8080/images/live.iso"},
            {"op": "add", "path": "/driver_info/force_persistent_boot_device", "value": "Default"},
        ])),
        200,
    )?;
    let validation = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/validate"),
        None,
        200,
    )?;
    for kind in ["power", "boot", "deploy"] {
        ensure!(
            validation[kind]["result"] == true,
            "{kind} does not validate: {validation}"
        );
    }
    client.provision(&uuid, json!({"target": "active", "configdrive": {}}))?;
    client.wait_for(&uuid, "active")?;
    phase("deploy (ramdisk: active without writing a disk)", started);

    let started = Instant::now();
    let console = dir.join("lab/node-0/console.log");
    loop {
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        if text.contains(MARKER) {
            break;
        }
        ensure!(
            started.elapsed() < PHASE_TIMEOUT,
            "the machine did not boot the live ISO within {PHASE_TIMEOUT:?} (no {MARKER} on \
             its console; see {})",
            console.display()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let cdrom = client.cdrom(&uuid)?;
    ensure!(
        cdrom["inserted"] == true
            && cdrom["image"]
                .as_str()
                .is_some_and(|image| image.ends_with("/images/live.iso")),
        "the live ISO is not the inserted virtual CD: {cdrom}"
    );
    ensure!(
        disk_head(&disk)? == disk_before,
        "the ramdisk deploy wrote to the disk"
    );
    phase("the machine runs the live ISO (virtual CD)", started);

    // ironic.go:1473 deprovision.
    let started = Instant::now();
    client.provision(&uuid, json!({"target": "deleted"}))?;
    let node = client.wait_for(&uuid, "available")?;
    ensure!(
        node["power_state"] == "power off",
        "the machine stayed on after undeploy: {}",
        node["power_state"]
    );
    let cdrom = client.cdrom(&uuid)?;
    ensure!(
        cdrom["inserted"] == false,
        "the live ISO stayed inserted after undeploy: {cdrom}"
    );
    phase("undeploy (powered off, ISO ejected)", started);
    Ok(())
}
