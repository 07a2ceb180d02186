//! `lab up`, `lab status`, `lab down`: building and tearing down the lab from its state file.
//!
//! This is the command edge, so errors are `anyhow` with the operator's next step in them.
//! Progress goes to stderr; `lab up` prints only the enrollment JSON on stdout so it can be piped.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::json;

use crate::dnsmasq::{self, DnsmasqConfig};
use crate::host;
use crate::layout::{self, LabPaths, LabState, NodeState};
use crate::machine::Firmware;
use crate::qemu::{OVMF_CODE, OVMF_CODE_SECURE_BOOT, OVMF_VARS, OVMF_VARS_SECURE_BOOT};
use crate::{LabArgs, SelfCommand};

/// iPXE for virtio-net from Debian's `ipxe-qemu` (legacy BIOS and UEFI in one ROM); QEMU loads
/// it by default, we only check that it is installed.
pub const NIC_ROM: &str = "/usr/lib/ipxe/qemu/efi-virtio.rom";
/// The iPXE loader dnsmasq hands UEFI PXE clients over TFTP (Debian's `ipxe`).
const IPXE_UEFI_LOADER: &str = "/usr/lib/ipxe/snponly.efi";
/// Set when `lab status` re-runs itself inside the namespace to reach the BMCs.
const INSIDE_ENV: &str = "FERRIC_LAB_INSIDE_NAMESPACE";
/// Unix socket paths (QMP) are limited to 108 bytes including the terminator.
const MAX_SOCKET_PATH: usize = 107;

fn preflight(firmware: Firmware) -> anyhow::Result<()> {
    if !host::is_root() {
        bail!("the lab needs root (network namespaces, taps); run it with sudo or as root");
    }
    // UEFI machines need OVMF; every machine's firmware PXE client needs the iPXE loaders
    // dnsmasq serves over TFTP (a legacy boot uses the NIC's ROM).
    let files: &[&str] = match firmware {
        Firmware::Uefi => &[NIC_ROM, OVMF_CODE, OVMF_VARS, IPXE_UEFI_LOADER],
        Firmware::Bios => &[NIC_ROM],
        Firmware::SecureBoot => &[
            NIC_ROM,
            OVMF_CODE_SECURE_BOOT,
            OVMF_VARS_SECURE_BOOT,
            IPXE_UEFI_LOADER,
        ],
    };
    let missing: Vec<&str> = ["ip", "qemu-system-x86_64", "qemu-img", "dnsmasq"]
        .into_iter()
        .filter(|program| host::find_program(program).is_none())
        .chain(
            files
                .iter()
                .copied()
                .filter(|file| !Path::new(file).exists()),
        )
        .collect();
    if !missing.is_empty() {
        bail!(
            "missing {}: install the lab's packages with `scripts/install-deps.sh --lab`",
            missing.join(", ")
        );
    }
    Ok(())
}

fn load_state(paths: &LabPaths) -> anyhow::Result<Option<LabState>> {
    let file = paths.state_file();
    match std::fs::read_to_string(&file) {
        Ok(text) => {
            Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{} is damaged", file.display())
            })?))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", file.display())),
    }
}

fn bmc_running(paths: &LabPaths) -> Option<u32> {
    host::read_pid(&paths.bmc_pid()).filter(|pid| host::pid_alive(*pid))
}

pub(crate) fn up(
    args: &LabArgs,
    n_nodes: u32,
    memory_mib: u32,
    boot_url: &str,
    firmware: Firmware,
    hardware: &[crate::hardware::Hardware],
    this: &SelfCommand,
) -> anyhow::Result<()> {
    preflight(firmware)?;
    let paths = LabPaths::new(&args.dir).context("cannot resolve the lab directory")?;
    if host::namespace_exists(&args.namespace) || bmc_running(&paths).is_some() {
        eprintln!(
            "lab: already up (namespace {}, state in {}); `lab status` shows it, `lab down` removes it",
            args.namespace,
            paths.dir.display()
        );
        return Ok(());
    }
    let longest_socket = paths.qmp_socket(&format!("node-{}", layout::MAX_NODES));
    if longest_socket.as_os_str().len() > MAX_SOCKET_PATH {
        bail!(
            "the lab directory {} is too deep for QMP sockets (Unix socket paths are limited to 107 bytes); use a shorter --dir",
            paths.dir.display()
        );
    }
    let started = Instant::now();
    let nodes = (0..n_nodes)
        .map(|index| {
            let mut node = NodeState::new(
                index,
                memory_mib,
                crate::secret::random_hex(layout::PASSWORD_BYTES)?,
            );
            node.firmware = firmware;
            node.hardware = crate::hardware::per_machine(hardware, index as usize);
            Ok(node)
        })
        .collect::<std::io::Result<Vec<_>>>()
        .context("cannot generate BMC passwords")?;
    let lab = LabState {
        namespace: args.namespace.clone(),
        bridge: layout::BRIDGE.to_owned(),
        bridge_address: layout::BRIDGE_ADDRESS.to_owned(),
        boot_url: boot_url.to_owned(),
        nodes,
    };
    if let Err(error) = build(&paths, &lab, this) {
        eprintln!("lab: up failed; cleaning up what it started");
        teardown(&paths, &args.namespace);
        return Err(error);
    }
    let enrollment =
        json!({"nodes": lab.nodes.iter().map(NodeState::enrollment).collect::<Vec<_>>()});
    println!("{}", serde_json::to_string_pretty(&enrollment)?);
    let kinds: Vec<String> = lab
        .nodes
        .iter()
        .map(|node| format!("{} {}", node.info.name, node.hardware.name()))
        .collect();
    eprintln!(
        "lab: up in {:.1} s: {} {firmware:?} machine(s) ({}), powered off, in namespace {} (bridge {} {}/{}); boot script URL {}",
        started.elapsed().as_secs_f64(),
        lab.nodes.len(),
        kinds.join(", "),
        lab.namespace,
        lab.bridge,
        lab.bridge_address,
        layout::BRIDGE_PREFIX,
        lab.boot_url
    );
    eprintln!(
        "lab: BMCs listen inside the namespace (`ip netns exec {} …`); state and consoles in {}",
        lab.namespace,
        paths.dir.display()
    );
    Ok(())
}

fn build(paths: &LabPaths, lab: &LabState, this: &SelfCommand) -> anyhow::Result<()> {
    let dir = &paths.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // 0x3f8 (COM1) little-endian: SeaBIOS and iPXE copy their screen text to that port.
    std::fs::write(paths.sercon(), [0xf8, 0x03]).context("cannot write the sercon-port file")?;
    // A new lab starts with fresh DHCP logs and leases, so what they show is about this lab.
    for old in [paths.dnsmasq_log(), paths.dnsmasq_leases(), paths.bmc_log()] {
        let _ = std::fs::remove_file(old);
    }
    for node in &lab.nodes {
        let name = &node.info.name;
        let node_dir = paths.node_dir(name);
        // A new lab gets new blank disks and empty consoles.
        if node_dir.exists() {
            std::fs::remove_dir_all(&node_dir)
                .with_context(|| format!("cannot clear {}", node_dir.display()))?;
        }
        std::fs::create_dir_all(&node_dir)
            .with_context(|| format!("cannot create {}", node_dir.display()))?;
        for disk in paths.disks(name) {
            host::run(
                "qemu-img",
                ["create", "-q", "-f", "raw"]
                    .iter()
                    .map(Path::new)
                    .chain([disk.as_path(), Path::new(layout::DISK_SIZE)]),
            )?;
        }
    }
    let state_text = serde_json::to_string_pretty(lab)?;
    std::fs::write(paths.state_file(), state_text).context("cannot write lab.json")?;

    let taps: Vec<String> = lab.nodes.iter().map(|node| node.tap.clone()).collect();
    host::namespace_create(
        &lab.namespace,
        &lab.bridge,
        &format!("{}/{}", lab.bridge_address, layout::BRIDGE_PREFIX),
        layout::BRIDGE_ULA,
        &taps,
    )
    .context("cannot create the lab network")?;
    let dnsmasq = DnsmasqConfig::new(paths, &lab.namespace, &lab.bridge, &lab.boot_url);
    dnsmasq::start(&dnsmasq).context("cannot start dnsmasq in the namespace")?;
    start_bmcs(paths, &lab.namespace, this)
}

/// Starts `lab serve-bmc` inside the namespace, detached, and waits until it listens.
fn start_bmcs(paths: &LabPaths, namespace: &str, this: &SelfCommand) -> anyhow::Result<()> {
    let log_path = paths.bmc_log();
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", namespace])
        .args(&this.0)
        .arg("serve-bmc")
        .arg("--dir")
        .arg(&paths.dir)
        .arg("--namespace")
        .arg(namespace)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        // Its own process group: a Ctrl-C in the terminal that ran `lab up` must not stop it.
        .process_group(0)
        .spawn()
        .context("cannot start the BMC process")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if bmc_running(paths).is_some() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "the BMC process exited ({status}); see {}",
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!(
        "the BMCs did not start within 20 s; see {}",
        log_path.display()
    )
}

/// Stops everything the lab started, best effort, and says what it found.
fn teardown(paths: &LabPaths, namespace: &str) -> Vec<String> {
    let mut stopped = Vec::new();
    // The BMC process powers its machines off on SIGTERM; what is left is killed below.
    if let Some(pid) = host::read_pid(&paths.bmc_pid())
        && host::terminate(pid, Duration::from_secs(15))
    {
        stopped.push(format!("BMCs (pid {pid})"));
    }
    let node_dirs = std::fs::read_dir(&paths.dir)
        .into_iter()
        .flatten()
        .flatten();
    for entry in node_dirs {
        let pid_file = entry.path().join("qemu.pid");
        if let Some(pid) = host::read_pid(&pid_file)
            && host::terminate(pid, Duration::from_secs(3))
        {
            stopped.push(format!(
                "QEMU {} (pid {pid})",
                entry.file_name().to_string_lossy()
            ));
        }
        let _ = std::fs::remove_file(&pid_file);
        let _ = std::fs::remove_file(entry.path().join("qmp.sock"));
    }
    let dnsmasq = DnsmasqConfig::new(paths, namespace, layout::BRIDGE, "");
    if dnsmasq::stop(&dnsmasq) {
        stopped.push("dnsmasq".into());
    }
    // Anything else still in the namespace was started by the lab too.
    for pid in host::namespace_pids(namespace) {
        if host::terminate(pid, Duration::from_secs(3)) {
            stopped.push(format!("leftover pid {pid}"));
        }
    }
    if host::namespace_exists(namespace) {
        match host::namespace_delete(namespace) {
            Ok(()) => stopped.push(format!("namespace {namespace}")),
            Err(error) => eprintln!("lab: {error}"),
        }
    }
    let _ = std::fs::remove_file(paths.bmc_pid());
    let _ = std::fs::remove_file(paths.state_file());
    stopped
}

pub(crate) fn down(args: &LabArgs) -> anyhow::Result<()> {
    let paths = LabPaths::new(&args.dir).context("cannot resolve the lab directory")?;
    let has_state = paths.state_file().exists() || paths.bmc_pid().exists();
    if !has_state && !host::namespace_exists(&args.namespace) {
        eprintln!(
            "lab: nothing to do: no lab in {} and no namespace {}",
            paths.dir.display(),
            args.namespace
        );
        return Ok(());
    }
    if !host::is_root() {
        bail!("the lab needs root to stop its processes and delete its namespace");
    }
    let stopped = teardown(&paths, &args.namespace);
    eprintln!(
        "lab: down; stopped {}; consoles and logs kept in {}",
        if stopped.is_empty() {
            "nothing (already stopped)".to_owned()
        } else {
            stopped.join(", ")
        },
        paths.dir.display()
    );
    Ok(())
}

/// `lab deny-dhcp` / `lab allow-dhcp`: one machine's DHCP off or on again.
pub(crate) fn set_dhcp(args: &LabArgs, node: &str, allow: bool) -> anyhow::Result<()> {
    let paths = LabPaths::new(&args.dir).context("cannot resolve the lab directory")?;
    let Some(lab) = load_state(&paths)? else {
        bail!(
            "no lab in {} (start one with `lab up`, or name its --dir)",
            paths.dir.display()
        );
    };
    let Some(machine) = lab.nodes.iter().find(|candidate| {
        candidate.info.name == node || candidate.info.mac.eq_ignore_ascii_case(node)
    }) else {
        bail!(
            "the lab has no machine {node}; its machines: {}",
            lab.nodes
                .iter()
                .map(|candidate| format!("{} ({})", candidate.info.name, candidate.info.mac))
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let dnsmasq = DnsmasqConfig::new(&paths, &lab.namespace, &lab.bridge, &lab.boot_url);
    let (name, mac) = (&machine.info.name, &machine.info.mac);
    if allow {
        let changed = dnsmasq::allow(&dnsmasq, mac)?;
        eprintln!(
            "lab: DHCP {} for {name} ({mac})",
            if changed {
                "allowed again"
            } else {
                "was already allowed"
            }
        );
    } else {
        let changed = dnsmasq::deny(&dnsmasq, mac)?;
        eprintln!(
            "lab: DHCP {} for {name} ({mac}): dnsmasq ignores it until `lab allow-dhcp {name}`",
            if changed {
                "denied"
            } else {
                "was already denied"
            }
        );
    }
    Ok(())
}

pub(crate) fn status(args: &LabArgs, this: &SelfCommand) -> anyhow::Result<()> {
    let paths = LabPaths::new(&args.dir).context("cannot resolve the lab directory")?;
    let Some(lab) = load_state(&paths)? else {
        println!(
            "no lab in {} (start one with `lab up`)",
            paths.dir.display()
        );
        return Ok(());
    };
    let inside = std::env::var_os(INSIDE_ENV).is_some();
    if !inside {
        if !host::namespace_exists(&lab.namespace) {
            println!(
                "lab in {}: namespace {} is MISSING; run `lab down` then `lab up`",
                paths.dir.display(),
                lab.namespace
            );
            return Ok(());
        }
        // The BMCs listen only inside the namespace: ask them from there.
        let status = Command::new("ip")
            .args(["netns", "exec", &lab.namespace])
            .args(&this.0)
            .arg("status")
            .arg("--dir")
            .arg(&paths.dir)
            .arg("--namespace")
            .arg(&lab.namespace)
            .env(INSIDE_ENV, "1")
            .status()
            .context("cannot run `lab status` inside the namespace")?;
        if !status.success() {
            bail!(
                "`lab status` inside namespace {} failed ({status})",
                lab.namespace
            );
        }
        return Ok(());
    }
    let pid_text =
        |pid: Option<u32>| pid.map_or("NOT RUNNING".to_owned(), |pid| format!("pid {pid}"));
    let dnsmasq_pid = host::read_pid(&paths.dnsmasq_pid()).filter(|pid| host::pid_alive(*pid));
    println!(
        "namespace {}: bridge {} {}/{}; dnsmasq {}; BMCs {}",
        lab.namespace,
        lab.bridge,
        lab.bridge_address,
        layout::BRIDGE_PREFIX,
        pid_text(dnsmasq_pid),
        pid_text(bmc_running(&paths))
    );
    println!(
        "boot script URL {}; DHCP log {}",
        lab.boot_url,
        paths.dnsmasq_log().display()
    );
    let denied = dnsmasq::denied(&DnsmasqConfig::new(
        &paths,
        &lab.namespace,
        &lab.bridge,
        &lab.boot_url,
    ));
    if !denied.is_empty() {
        println!("DHCP denied (lab deny-dhcp) for {}", denied.join(", "));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let powers = runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?;
        let mut powers = Vec::new();
        for node in &lab.nodes {
            powers.push(read_power(&client, node).await);
        }
        anyhow::Ok(powers)
    })?;
    println!(
        "{:<8} {:<17} {:<11} {:<50} {:<18} CONSOLE",
        "NAME", "MAC", "POWER", "BMC (Redfish)", "BMC (IPMI, UDP)"
    );
    for (node, power) in lab.nodes.iter().zip(powers) {
        let ipmi = if node.ipmi_port == 0 {
            "-".to_owned()
        } else {
            format!("{}:{}", node.ipmi_address, node.ipmi_port)
        };
        println!(
            "{:<8} {:<17} {:<11} {:<50} {:<18} {}",
            node.info.name,
            node.info.mac,
            power,
            format!("{}{}", node.redfish_address, node.redfish_system_id),
            ipmi,
            paths.console(&node.info.name).display()
        );
    }
    Ok(())
}

async fn read_power(client: &reqwest::Client, node: &NodeState) -> String {
    let url = format!("{}{}", node.redfish_address, node.redfish_system_id);
    let response = client
        .get(&url)
        .basic_auth(&node.redfish_username, Some(&node.redfish_password))
        .send()
        .await;
    let body = match response {
        Ok(response) if response.status().is_success() => {
            response.json::<serde_json::Value>().await
        }
        Ok(response) => return format!("HTTP {}", response.status().as_u16()),
        Err(_) => return "NO BMC".into(),
    };
    body.ok()
        .and_then(|body| body["PowerState"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

pub(crate) fn serve_bmc(args: &LabArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .try_init();
    let paths = LabPaths::new(&args.dir).context("cannot resolve the lab directory")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(crate::bmc::serve(paths))
}
