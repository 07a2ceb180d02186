//! End-to-end: a lab machine with DHCP denied boots the agent from Redfish virtual media and
//! is inspected and deployed with static addresses from its node's `network_data` (issue 23).
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`, which also
//! installs GRUB and xorriso for the ISO; the agent built beside the `ferric` binary):
//! `cargo test -p ferric --features lab-e2e --test lab_vmedia`. Like `lab_lifecycle` it is a
//! `harness = false` binary that runs itself again inside the lab's namespace.
//!
//! One machine (`node-0`, the lab's default firmware), `ferric lab deny-dhcp node-0`; a node
//! with the `redfish-virtual-media` boot interface, `driver_info.dhcp_less` and
//! `network_data` giving its NIC 10.231.0.60/24. Phases, each timed: validate (and a
//! DHCP-less node without `network_data` refused there); inspection through the agent booted
//! from the per-node ISO (the BMC's VirtualMedia InsertMedia, a one-time boot from CD);
//! deploy (power-on → first heartbeat, then the image written and checked on the disk file);
//! the ISO ejected afterwards (`GET /v1/nodes/{node}/vmedia`); and the lab's DHCP log shows no
//! lease for the machine.
//!
//! With `FERRIC_E2E_SECURE_BOOT=1` the machine is `lab up --firmware secure-boot` (OVMF with
//! secure boot on and Microsoft's keys) and the node has capability `secure_boot:true`, so its
//! ISOs boot through Debian's signed shim, GRUB and kernel; the console must show the
//! kernel's "Secure boot enabled".

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

const NAMESPACE: &str = "ferric-vmedia-e2e";
const API: &str = "http://10.231.0.1:6385";
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// The machine's static address (outside the lab's DHCP range, .100–.199).
const STATIC_ADDRESS: &str = "10.231.0.60";

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
            eprintln!("lab_vmedia: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `FERRIC_E2E_SECURE_BOOT=1`: the secure-boot variant.
fn secure_boot() -> bool {
    std::env::var_os("FERRIC_E2E_SECURE_BOOT").is_some_and(|value| value == "1")
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Builds the ramdisk and a 4 MiB image, brings up a one-machine lab with DHCP denied to it,
/// runs the scenario inside the namespace and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/tmp/ferric-vmedia-{}", std::process::id()));
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
        let image: Vec<u8> = (0..4u32 << 20)
            .map(|index| (index.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(boot.join("images/pattern.img"), &image)?;
        std::fs::write(dir.join("pattern.img.sha256"), sha256_hex(&image))?;
        eprintln!(
            "lab_vmedia: ramdisk and image ready: {:.1} s",
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
        let mut up = vec!["up", "--nodes", "1", "--memory", "512"];
        if secure_boot() {
            up.extend(["--firmware", "secure-boot"]);
        }
        lab(&up, "ferric lab up")?;
        lab(&["deny-dhcp", "node-0"], "ferric lab deny-dhcp")?;
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
                "lab_vmedia: passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        (result, down) => {
            eprintln!(
                "lab_vmedia: kept for inspection: {} (server.log, lab/node-0/console.log, \
                 lab/dnsmasq.log, lab/bmc.log)",
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

    fn provision(&self, uuid: &str, target: &str) -> anyhow::Result<()> {
        self.expect(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": target})),
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

    /// Waits for the agent's first heartbeat.
    fn wait_for_heartbeat(&self, uuid: &str) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let node = self.node(uuid)?;
            if node["driver_internal_info"]["agent_last_heartbeat"].is_string() {
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
                "no heartbeat from node {uuid} after {PHASE_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
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
        "lab_vmedia: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
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
    while client.send(reqwest::Method::GET, "/v1", None).is_err() {
        ensure!(
            up.elapsed() < Duration::from_secs(120),
            "ferric server did not start; see server.log"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let digest = std::fs::read_to_string(dir.join("pattern.img.sha256"))?;
    let driver_info = json!({
        "redfish_address": machine["redfish_address"],
        "redfish_system_id": machine["redfish_system_id"],
        "redfish_username": machine["redfish_username"],
        "redfish_password": machine["redfish_password"],
        "dhcp_less": true,
    });
    let node = |name: &str, network_data: Value| {
        json!({
            "name": name,
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "deploy_interface": "direct",
            "inspect_interface": "agent",
            "automated_clean": false,
            "driver_info": driver_info,
            "network_data": network_data,
            "properties": if secure_boot() {
                json!({"capabilities": "secure_boot:true"})
            } else {
                json!({})
            },
            "instance_info": {
                "image_source": "pattern.img",
                "image_disk_format": "raw",
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": digest.trim(),
            },
        })
    };

    // Validate: the DHCP-less node without network_data is refused, naming the fix.
    let started = Instant::now();
    let bare = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(node("no-network-data", json!({}))),
        201,
    )?;
    let bare = bare["uuid"].as_str().context("no uuid")?.to_owned();
    let answer = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{bare}/validate"),
        None,
        200,
    )?;
    ensure!(
        answer["boot"]["result"] == false
            && answer["boot"]["reason"]
                .as_str()
                .unwrap_or("")
                .contains("set the node's network_data"),
        "a DHCP-less node without network_data validated: {answer}"
    );
    client.expect(
        reqwest::Method::DELETE,
        &format!("/v1/nodes/{bare}"),
        None,
        204,
    )?;
    let network_data = json!({
        "links": [{"id": "nic0", "type": "phy", "ethernet_mac_address": mac}],
        "networks": [{"id": "provisioning", "type": "ipv4", "link": "nic0",
            "ip_address": STATIC_ADDRESS, "netmask": "255.255.255.0",
            "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.231.0.1"}]}],
        "services": [{"type": "dns", "address": "10.231.0.1"}],
    });
    let created = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(node("node-0", network_data)),
        201,
    )?;
    let uuid = created["uuid"].as_str().context("no uuid")?.to_owned();
    client.expect(
        reqwest::Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": mac})),
        201,
    )?;
    let answer = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/validate"),
        None,
        200,
    )?;
    for kind in ["power", "boot", "deploy", "inspect"] {
        ensure!(
            answer[kind]["result"] == true,
            "{kind} does not validate: {answer}"
        );
    }
    phase("enroll + validate", started);

    let started = Instant::now();
    client.provision(&uuid, "manage")?;
    client.wait_for(&uuid, "manageable")?;
    client.provision(&uuid, "inspect")?;
    let inspected = client.wait_for(&uuid, "manageable")?;
    ensure!(
        inspected["inspection_finished_at"].is_string(),
        "no inspection recorded: {inspected}"
    );
    let inventory = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/inventory"),
        None,
        200,
    )?;
    let addresses = inventory["inventory"]["interfaces"].to_string();
    ensure!(
        addresses.contains(STATIC_ADDRESS),
        "the agent did not report its static address: {addresses}"
    );
    phase("inspection (virtual media, static address)", started);

    let started = Instant::now();
    client.provision(&uuid, "provide")?;
    client.wait_for(&uuid, "available")?;
    client.provision(&uuid, "active")?;
    client.wait_for_heartbeat(&uuid)?;
    phase(
        "power-on to first heartbeat (deploy, virtual media)",
        started,
    );
    client.wait_for(&uuid, "active")?;
    phase("deploy (virtual media, static address)", started);

    let disk = dir.join("lab/node-0/disk.img");
    let written =
        std::fs::read(&disk).with_context(|| format!("cannot read {}", disk.display()))?;
    let image = std::fs::read(dir.join("boot/images/pattern.img"))?;
    ensure!(
        written.get(..image.len()) == Some(image.as_slice()),
        "the disk does not hold the image"
    );
    let media = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/vmedia"),
        None,
        200,
    )?;
    ensure!(
        media["vmedia"].as_array().is_some_and(
            |slots| !slots.is_empty() && slots.iter().all(|slot| slot["inserted"] == false)
        ),
        "the ISO stayed inserted after the deploy: {media}"
    );
    let dhcp = std::fs::read_to_string(dir.join("lab/dnsmasq.log")).unwrap_or_default();
    let leases: Vec<&str> = dhcp
        .lines()
        .filter(|line| {
            line.contains("DHCPACK")
                && line
                    .to_ascii_lowercase()
                    .contains(&mac.to_ascii_lowercase())
        })
        .collect();
    ensure!(leases.is_empty(), "dnsmasq gave node-0 a lease: {leases:?}");
    eprintln!("lab_vmedia: dnsmasq gave {mac} no lease; the agent used {STATIC_ADDRESS}");
    if secure_boot() {
        let console =
            std::fs::read_to_string(dir.join("lab/node-0/console.log")).unwrap_or_default();
        ensure!(
            console.contains("Secure boot enabled"),
            "secure boot: the kernel did not say \"Secure boot enabled\" on the console"
        );
        eprintln!("lab_vmedia: the agent's kernel booted with secure boot enabled");
    }
    Ok(())
}
