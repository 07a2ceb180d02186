//! End-to-end: a real lab with one UEFI QEMU machine (OVMF, no iPXE ROM), driven over Redfish
//! until iPXE does DHCP three ways — the firmware's PXE client fetching iPXE over TFTP, UEFI
//! HTTP boot fetching it over HTTP, and legacy BIOS with the NIC's iPXE ROM — each timed,
//! then powered on and off over IPMI with ipmitool.
//!
//! Runs only with `--features lab-e2e` (root, qemu-system-x86, ipxe-qemu, dnsmasq):
//! `cargo test -p ferric-lab --features lab-e2e --test lab_e2e`. It is a `harness = false`
//! binary because the lab re-invokes its own executable (`lab serve-bmc` in the background, and
//! `e2e-redfish` inside the namespace, where the BMCs listen), so `main` dispatches on argv.
//! The state directory is kept, with consoles and logs, when the test fails.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use clap::Parser;
use ferric_lab::layout::LabState;
use ferric_lab::{LabArgs, LabCommand, SelfCommand};
use serde_json::{Value, json};

const NAMESPACE: &str = "ferric-lab-e2e";
/// Generous: under TCG and a busy 2-core host a boot can take several times the measured 2.4 s.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Parser)]
enum Invocation {
    #[command(subcommand)]
    Lab(LabCommand),
    /// The Redfish half of the scenario, run inside the namespace.
    E2eRedfish { dir: PathBuf },
}

fn this() -> anyhow::Result<SelfCommand> {
    SelfCommand::current()
}

fn lab_args(dir: &Path) -> LabArgs {
    LabArgs {
        dir: dir.to_owned(),
        namespace: NAMESPACE.into(),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("lab") | Some("e2e-redfish") => match Invocation::parse() {
            Invocation::Lab(command) => {
                this().and_then(|this| ferric_lab::run_with(command, &this))
            }
            Invocation::E2eRedfish { dir } => redfish_scenario(&dir),
        },
        _ => scenario(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lab_e2e: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn scenario() -> anyhow::Result<()> {
    let dir = PathBuf::from(format!("/tmp/ferric-lab-e2e-{}", std::process::id()));
    let this = this()?;
    let started = Instant::now();
    let up = ferric_lab::run_with(
        LabCommand::Up {
            nodes: 1,
            memory: 384,
            boot_url: ferric_lab::layout::DEFAULT_BOOT_URL.into(),
            firmware: ferric_lab::machine::Firmware::Uefi,
            hardware: vec![ferric_lab::hardware::Hardware::Virtio],
            lab: lab_args(&dir),
        },
        &this,
    );
    eprintln!("lab_e2e: lab up: {:.2} s", started.elapsed().as_secs_f64());
    let inner = up.and_then(|()| {
        let status = Command::new("ip")
            .args(["netns", "exec", NAMESPACE])
            .args(&this.0[..1])
            .arg("e2e-redfish")
            .arg(&dir)
            .status()
            .context("cannot run the Redfish steps inside the namespace")?;
        ensure!(status.success(), "the Redfish steps failed ({status})");
        Ok(())
    });
    let down_started = Instant::now();
    let down = ferric_lab::run_with(
        LabCommand::Down {
            lab: lab_args(&dir),
        },
        &this,
    );
    eprintln!(
        "lab_e2e: lab down: {:.2} s",
        down_started.elapsed().as_secs_f64()
    );
    let gone = !Path::new("/run/netns").join(NAMESPACE).exists();
    match (inner, down) {
        (Ok(()), Ok(())) if gone => {
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!(
                "lab_e2e: passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        (inner, down) => {
            eprintln!("lab_e2e: consoles and logs kept in {}", dir.display());
            inner?;
            down?;
            bail!("namespace {NAMESPACE} still exists after lab down")
        }
    }
}

/// Serves what a UEFI HTTP boot and the iPXE it starts fetch: the loader from Debian's `ipxe`
/// and a `boot.ipxe` that leaves iPXE again (Ferric's boot file server, in small).
async fn serve_boot_files(address: &str) -> anyhow::Result<()> {
    let loader = std::fs::read(format!(
        "{}/{}",
        ferric_drivers::dhcp::IPXE_DIR,
        ferric_drivers::dhcp::UEFI_LOADER
    ))
    .context("the UEFI iPXE loader is missing: install Debian's ipxe")?;
    let app = axum::Router::new()
        .route(
            &format!("/{}", ferric_drivers::dhcp::UEFI_LOADER),
            axum::routing::get(move || async move { loader.clone() }),
        )
        .route(
            "/boot.ipxe",
            axum::routing::get(|| async { "#!ipxe\necho lab_e2e boot.ipxe\nexit 0\n" }),
        );
    let listener = tokio::net::TcpListener::bind(address).await?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}

/// Over Redfish, three network boots, each Off → boot override once → On → iPXE DHCP seen →
/// ForceOff → Off: UEFI PXE (iPXE over TFTP), UEFI HTTP boot, legacy BIOS (the NIC's ROM).
fn redfish_scenario(dir: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(dir.join("lab.json"))?;
    let lab: LabState = serde_json::from_str(&text)?;
    let node = lab.nodes.first().context("the lab has no node")?;
    let system = format!("{}{}", node.redfish_address, node.redfish_system_id);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let base = lab.boot_url.rsplit_once('/').map_or("", |(base, _)| base);
        serve_boot_files(base.trim_start_matches("http://")).await?;
        let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        let request = |method: reqwest::Method, url: &str| {
            client
                .request(method, url)
                .basic_auth(&node.redfish_username, Some(&node.redfish_password))
        };
        let get = || async {
            let body: Value = request(reqwest::Method::GET, &system).send().await?.json().await?;
            anyhow::Ok(body)
        };
        let power = || async { anyhow::Ok(get().await?["PowerState"].as_str().unwrap_or("?").to_owned()) };
        ensure!(power().await? == "Off", "a new lab machine must be off");
        let body = get().await?;
        ensure!(
            body["Boot"]["BootSourceOverrideMode"] == "UEFI",
            "a UEFI lab machine starts in UEFI mode: {}",
            body["Boot"]
        );

        let reset = format!("{system}/Actions/ComputerSystem.Reset");
        let console = dir.join(&node.info.name).join("console.log");
        let dhcp_log = dir.join("dnsmasq.log");
        let discover = format!("DHCPDISCOVER(ferric-br0) {}", node.info.mac);
        let paths = [
            ("UEFI PXE → TFTP → iPXE", "Pxe", "UEFI", "sent /usr/lib/ipxe/snponly.efi"),
            ("UEFI HTTP boot → iPXE", "UefiHttp", "UEFI", "vendor class: HTTPClient"),
            ("BIOS, the NIC's iPXE ROM", "Pxe", "Legacy", "SeaBIOS"),
        ];
        for (path, target, mode, evidence) in paths {
            let console_from = std::fs::metadata(&console).map_or(0, |meta| meta.len() as usize);
            let dhcp_from = std::fs::metadata(&dhcp_log).map_or(0, |meta| meta.len() as usize);
            let boot = json!({"Boot": {"BootSourceOverrideTarget": target,
                "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": mode}});
            let patched = request(reqwest::Method::PATCH, &system).json(&boot).send().await?;
            ensure!(patched.status().is_success(), "{path}: PATCH Boot: {}", patched.status());

            let on_started = Instant::now();
            let on = request(reqwest::Method::POST, &reset).json(&json!({"ResetType": "On"})).send().await?;
            ensure!(on.status().as_u16() == 204, "{path}: Reset On: {}", on.status());
            ensure!(power().await? == "On", "{path}: the machine must be on after Reset On");
            loop {
                let since = |path: &Path, from: usize| {
                    let bytes = std::fs::read(path).unwrap_or_default();
                    String::from_utf8_lossy(bytes.get(from..).unwrap_or_default()).into_owned()
                };
                let console_text = since(&console, console_from);
                let dhcp_text = since(&dhcp_log, dhcp_from);
                let ipxe_configured = console_text.contains("iPXE") && console_text.contains("net0: 10.231.0.");
                let seen = |text: &str| console_text.contains(text) || dhcp_text.contains(text);
                if ipxe_configured && dhcp_text.contains(&discover) && seen(evidence) {
                    break;
                }
                if on_started.elapsed() > BOOT_TIMEOUT {
                    bail!("{path}: no iPXE DHCP (or no \"{evidence}\") within {BOOT_TIMEOUT:?}; see {} and {}", console.display(), dhcp_log.display());
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            eprintln!("lab_e2e: {path}: power on → iPXE DHCP done: {:.2} s", on_started.elapsed().as_secs_f64());

            let off_started = Instant::now();
            let off = request(reqwest::Method::POST, &reset).json(&json!({"ResetType": "ForceOff"})).send().await?;
            ensure!(off.status().as_u16() == 204, "{path}: Reset ForceOff: {}", off.status());
            ensure!(power().await? == "Off", "{path}: the machine must be off after ForceOff");
            eprintln!("lab_e2e: ForceOff → Off: {:.2} s", off_started.elapsed().as_secs_f64());
            let system_body = get().await?;
            ensure!(
                system_body["Boot"]["BootSourceOverrideEnabled"] == "Disabled",
                "{path}: the one-time boot override must be consumed"
            );
        }
        Ok(())
    })?;
    ipmi_scenario(node)
}

/// The same machine over IPMI with ipmitool: Off → bootdev pxe → power on → On → power off.
fn ipmi_scenario(node: &ferric_lab::layout::NodeState) -> anyhow::Result<()> {
    let ipmitool = |args: &[&str]| -> anyhow::Result<String> {
        let output = Command::new("ipmitool")
            .args(["-I", "lanplus", "-C", "17", "-H", &node.ipmi_address])
            .args(["-p", &node.ipmi_port.to_string(), "-U", &node.ipmi_username])
            .args(["-P", &node.ipmi_password])
            .args(args)
            .output()
            .context("cannot run ipmitool (scripts/install-deps.sh installs it)")?;
        ensure!(
            output.status.success(),
            "ipmitool {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let started = Instant::now();
    ensure!(
        ipmitool(&["power", "status"])?.contains("is off"),
        "IPMI must read the machine off"
    );
    ipmitool(&["chassis", "bootdev", "pxe"])?;
    ipmitool(&["power", "on"])?;
    ensure!(
        ipmitool(&["power", "status"])?.contains("is on"),
        "IPMI power on must start the machine"
    );
    ipmitool(&["power", "off"])?;
    ensure!(
        ipmitool(&["power", "status"])?.contains("is off"),
        "IPMI power off must stop the machine"
    );
    eprintln!(
        "lab_e2e: IPMI status → bootdev → on → off: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
